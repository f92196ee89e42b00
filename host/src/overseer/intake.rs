//! Intake: tasks queued in SQL (`taskhost_add`, docs/clients.md) with a key or `after` arrive
//! waiting for this pass, which gives them their key's turn (fair shares) and their waits for
//! the tasks they run after, as an add through the API does when it writes a task
//! (`store/transitions/intake.rs`); the rest of a SQL add is due at once and needs no pass. A
//! dependency that ended badly between the add and this pass cancels the task
//! (`dependency-failed`) unless it runs anyway.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::SharedStore;

/// The `[overseer.intake]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs: how long a keyed or dependent task queued in SQL may wait to be due.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// Tasks taken in per transaction.
    pub batch: u32,
    /// Batches per run, so one run stays short; the rest waits for the next interval.
    pub max_batches: u32,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(500);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 500;
    /// Its default batches a pass.
    pub const DEFAULT_MAX_BATCHES: u32 = 20;
}

impl Default for Config {
    fn default() -> Self {
        Config { interval: Self::DEFAULT_INTERVAL, batch: Self::DEFAULT_BATCH, max_batches: Self::DEFAULT_MAX_BATCHES }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Tasks taken in.
    pub taken_in: u64,
    /// Transactions it took.
    pub batches: u32,
}

/// The service (see the module's documentation).
pub struct Intake {
    store: SharedStore,
    config: Config,
}

impl Intake {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        Intake { store, config }
    }
}

#[async_trait]
impl Service for Intake {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let (taken_in, batches) = super::in_batches(self.config.batch, self.config.max_batches, || {
            self.store.take_in_arrivals(now, self.config.batch)
        })
        .await?;
        Ok(Report { taken_in, batches })
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.taken_in > 0).then(|| format!("took in {}", crate::text::count(self.taken_in, "task queued in SQL")))
    }
}
