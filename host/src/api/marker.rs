//! When a reader of the database may skip a read: while the database's change marker
//! ([`Store::change_marker`](crate::store::Store::change_marker)) stands as it was at the last
//! read that may be trusted, for at most [`SAFETY_READ`]. Shared by the waits' watcher
//! (`wait.rs`) and the event stream's reader (`feed.rs`).

use tokio::time::Instant;

use crate::store::SharedStore;

/// How often a reader reads whatever the change marker says (a marker that failed to move).
pub const SAFETY_READ: std::time::Duration = std::time::Duration::from_secs(1);

/// A reader's view of the change marker.
pub(super) struct Gate {
    /// The marker at the look before.
    seen: Option<u64>,
    /// The marker of the last read that may be trusted to have seen every commit it marks, and
    /// when that read was.
    read: Option<(u64, Instant)>,
    /// False once the marker could not be read (a server without the function): not asked again.
    marked: bool,
}

/// A read the gate let through, with the marker read before it.
pub(super) struct Pass(Option<u64>);

impl Default for Gate {
    fn default() -> Self {
        Gate { seen: None, read: None, marked: true }
    }
}

impl Gate {
    /// None when the database has not changed since a trusted read under [`SAFETY_READ`] ago;
    /// else the pass to read with (the marker is read before the data: a commit after it moves
    /// it for the next look). `what` names the reader in the one warning of a failing marker.
    pub async fn pass(&mut self, store: &SharedStore, what: &str) -> Option<Pass> {
        let marker = match self.marked.then(|| store.change_marker()) {
            Some(read) => read.await.unwrap_or_else(|e| {
                tracing::warn!("the database's change marker cannot be read, so {what} reads every tick: {e}");
                self.marked = false;
                None
            }),
            None => None,
        };
        if let (Some(now), Some((then, at))) = (marker, self.read) {
            if now == then && at.elapsed() < SAFETY_READ {
                self.seen = marker;
                return None;
            }
        }
        Some(Pass(marker))
    }

    /// The read of `pass` was not needed after all (nothing to read): its marker counts as seen.
    pub fn skip(&mut self, pass: Pass) {
        self.seen = pass.0;
    }

    /// The read of `pass` is done (`whole`: it read everything it meant to).
    pub fn done(&mut self, pass: Pass, whole: bool) {
        let Pass(marker) = pass;
        // A commit's log record is written a moment before the commit is seen: a read is trusted
        // only once the marker stood still for a tick before it (each change costs two reads).
        self.read = marker.filter(|m| whole && self.seen == Some(*m)).map(|m| (m, Instant::now()));
        self.seen = marker;
    }
}
