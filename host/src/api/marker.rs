//! When a reader of the database may skip a read: while the database's change marker
//! ([`Store::change_marker`](crate::store::Store::change_marker)) stands as it was at the last
//! read that may be trusted, for at most [`SAFETY_READ`]. Shared by the waits' watcher
//! (`wait.rs`) and the event stream's reader (`feed.rs`).

use std::time::Duration;

use tokio::time::Instant;

use crate::store::SharedStore;

/// How often a reader reads whatever the change marker says (a marker that failed to move).
pub const SAFETY_READ: Duration = Duration::from_secs(1);

/// How long the marker must have stood still before a read for the read to be trusted to have
/// seen every commit it marks: a commit's log record is written a moment before the commit is
/// seen, and SQLite's marker (a file's size and time) may not move for a second commit within
/// the file system's clock tick (4 to 10 ms before Linux 6.13).
pub const STILL: Duration = Duration::from_millis(20);

/// A reader's view of the change marker.
pub(super) struct Gate {
    /// The marker at the look before.
    seen: Option<u64>,
    /// Since when `seen` has been the marker (or since the database last said it was written).
    seen_since: Instant,
    /// The marker of the last read that may be trusted to have seen every commit it marks, and
    /// when that read was.
    read: Option<(u64, Instant)>,
    /// False once the marker could not be read (a server without the function): not asked again.
    marked: bool,
}

/// A read the gate let through, with the marker read before it and whether the marker had
/// stood still for [`STILL`] then.
pub(super) struct Pass(Option<u64>, bool);

impl Default for Gate {
    fn default() -> Self {
        Gate { seen: None, seen_since: Instant::now(), read: None, marked: true }
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
                self.see(marker);
                return None;
            }
        }
        let still = marker.is_some() && marker == self.seen && self.seen_since.elapsed() >= STILL;
        Some(Pass(marker, still))
    }

    /// The database said it was written, whatever its marker says (SQLite's bell rang): the next
    /// look reads, and a read is trusted again only once all stood still for [`STILL`].
    pub fn disturb(&mut self) {
        self.read = None;
        self.seen_since = Instant::now();
    }

    /// The read of `pass` is done (`whole`: it read everything it meant to). It is trusted only
    /// if the marker had stood still before it (so each change costs two reads).
    pub fn done(&mut self, pass: Pass, whole: bool) {
        let Pass(marker, still) = pass;
        self.read = marker.filter(|_| whole && still).map(|m| (m, Instant::now()));
        self.see(marker);
    }

    fn see(&mut self, marker: Option<u64>) {
        if marker != self.seen {
            self.seen = marker;
            self.seen_since = Instant::now();
        }
    }
}
