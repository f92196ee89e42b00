//! The flow-control limits a worker claims within, as last read from the database
//! ([`crate::store::Store::limits_in_force`]): read before a claim when a second old, so a
//! limit set or changed live (`taskhost limits set`, the API) applies on every worker within a
//! second. The claim itself reads each limit it touches afresh, locked: this view only says
//! which queues and handlers take the limited claim.

use std::time::Duration;

use tokio::time::Instant;

use crate::model::RunLimits;
use crate::store::Store;

/// The limits as last read.
#[derive(Default)]
pub(super) struct LimitsView {
    pub now: RunLimits,
    /// Until when `now` is taken as current (None: read before the next claim).
    fresh_until: Option<Instant>,
}

impl LimitsView {
    /// How long a worker claims within the limits it read, at most.
    pub const REFRESH: Duration = Duration::from_secs(1);

    /// Read the limits again when due (a failed read is the caller's to back off from, as from
    /// a failed claim; the last read stays).
    pub async fn refresh(&mut self, store: &dyn Store) -> crate::error::Result<()> {
        if self.fresh_until.is_none_or(|t| Instant::now() >= t) {
            self.now = store.limits_in_force().await?;
            self.fresh_until = Some(Instant::now() + Self::REFRESH);
        }
        Ok(())
    }
}
