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

/// How long a reader whose marker could not be read reads every tick before it asks again: a
/// server without the function fails each time, a database down a moment only then.
pub const MARKER_RETRY: Duration = Duration::from_secs(60);

/// A reader's view of the change marker.
pub(super) struct Gate {
    /// The marker at the look before.
    seen: Option<u64>,
    /// Since when `seen` has been the marker (or since the database last said it was written).
    seen_since: Instant,
    /// The marker of the last read that may be trusted to have seen every commit it marks, and
    /// when that read was.
    read: Option<(u64, Instant)>,
    /// Until when the marker is not asked for, after it could not be read.
    unmarked_until: Option<Instant>,
    /// Whether that failure was told (once, until the marker is read again).
    told: bool,
}

/// A read the gate let through, with the marker read before it and whether the marker had
/// stood still for [`STILL`] then.
pub(super) struct Pass(Option<u64>, bool);

impl Default for Gate {
    fn default() -> Self {
        Gate { seen: None, seen_since: Instant::now(), read: None, unmarked_until: None, told: false }
    }
}

impl Gate {
    /// None when the database has not changed since a trusted read under [`SAFETY_READ`] ago;
    /// else the pass to read with (the marker is read before the data: a commit after it moves
    /// it for the next look). `what` names the reader in the one warning of a failing marker.
    pub async fn pass(&mut self, store: &SharedStore, what: &str) -> Option<Pass> {
        let marker = match self.asks_at(Instant::now()) {
            true => match store.change_marker().await {
                Ok(marker) => {
                    if std::mem::take(&mut self.told) {
                        tracing::info!("the database's change marker is read again, so {what} reads on its moves");
                    }
                    self.unmarked_until = None;
                    marker
                }
                Err(e) => {
                    if !std::mem::replace(&mut self.told, true) {
                        tracing::warn!("the database's change marker cannot be read, so {what} reads every tick: {e}");
                    }
                    self.unmarked_until = Some(Instant::now() + MARKER_RETRY);
                    None
                }
            },
            false => None,
        };
        self.pass_at(marker, Instant::now())
    }

    /// Whether the marker is asked for at `now`: always, but for [`MARKER_RETRY`] after it failed.
    fn asks_at(&self, now: Instant) -> bool {
        self.unmarked_until.is_none_or(|until| now >= until)
    }

    /// [`Gate::pass`] with the marker read, at `now`.
    fn pass_at(&mut self, marker: Option<u64>, now: Instant) -> Option<Pass> {
        if let (Some(current), Some((then, at))) = (marker, self.read) {
            if current == then && now.saturating_duration_since(at) < SAFETY_READ {
                self.see(marker, now);
                return None;
            }
        }
        let still = marker.is_some() && marker == self.seen && now.saturating_duration_since(self.seen_since) >= STILL;
        Some(Pass(marker, still))
    }

    /// The database said it was written, whatever its marker says (SQLite's bell rang): the next
    /// look reads, and a read is trusted again only once all stood still for [`STILL`].
    pub fn disturb(&mut self) {
        self.disturb_at(Instant::now());
    }

    fn disturb_at(&mut self, now: Instant) {
        self.read = None;
        self.seen_since = now;
    }

    /// The read of `pass` is done (`whole`: it read everything it meant to). It is trusted only
    /// if the marker had stood still before it (so each change costs two reads).
    pub fn done(&mut self, pass: Pass, whole: bool) {
        self.done_at(pass, whole, Instant::now());
    }

    fn done_at(&mut self, pass: Pass, whole: bool, now: Instant) {
        let Pass(marker, still) = pass;
        self.read = marker.filter(|_| whole && still).map(|m| (m, now));
        self.see(marker, now);
    }

    fn see(&mut self, marker: Option<u64>, now: Instant) {
        if marker != self.seen {
            self.seen = marker;
            self.seen_since = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A gate whose marker stood at `marker` since `t0`, with no read trusted.
    fn gate(t0: Instant, marker: u64) -> Gate {
        Gate { seen: Some(marker), seen_since: t0, ..Gate::default() }
    }

    #[test]
    fn a_read_is_trusted_only_when_the_marker_stood_still_before_it() {
        let t0 = Instant::now();
        let mut g = Gate { seen_since: t0, ..Gate::default() };
        // The first look, and one right after the marker moved, read and are not trusted.
        let first = g.pass_at(Some(1), t0).expect("a first look reads");
        g.done_at(first, true, t0 + MS);
        let soon = g.pass_at(Some(1), t0 + 10 * MS).expect("too soon to trust the read before");
        g.done_at(soon, true, t0 + 11 * MS);
        // Still for STILL: this read is trusted, and the looks after it read nothing.
        let later = g.pass_at(Some(1), t0 + STILL + 10 * MS).expect("not trusted yet");
        g.done_at(later, true, t0 + STILL + 11 * MS);
        assert!(g.pass_at(Some(1), t0 + STILL + 20 * MS).is_none(), "nothing changed since a trusted read");
        // A move reads again, twice.
        let moved = g.pass_at(Some(2), t0 + STILL + 30 * MS).expect("the marker moved");
        g.done_at(moved, true, t0 + STILL + 31 * MS);
        assert!(g.pass_at(Some(2), t0 + STILL + 40 * MS).is_some(), "a read just after a move is not trusted");
    }

    #[test]
    fn a_read_that_missed_something_is_never_trusted() {
        let t0 = Instant::now();
        let mut g = gate(t0, 1);
        let pass = g.pass_at(Some(1), t0 + 2 * STILL).expect("no read trusted yet");
        g.done_at(pass, false, t0 + 2 * STILL);
        assert!(g.pass_at(Some(1), t0 + 3 * STILL).is_some());
    }

    #[test]
    fn a_database_that_says_it_was_written_is_read_whatever_its_marker_says() {
        let t0 = Instant::now();
        let mut g = gate(t0, 1);
        let pass = g.pass_at(Some(1), t0 + STILL).expect("no read trusted yet");
        g.done_at(pass, true, t0 + STILL);
        assert!(g.pass_at(Some(1), t0 + STILL + MS).is_none());
        // The bell rang (a commit whose marker did not move yet, or a coarse clock's).
        g.disturb_at(t0 + STILL + 2 * MS);
        let rung = g.pass_at(Some(1), t0 + STILL + 3 * MS).expect("read after the bell");
        assert!(!rung.1, "a read just after the bell is not trusted");
        g.done_at(rung, true, t0 + STILL + 4 * MS);
        assert!(g.pass_at(Some(1), t0 + STILL + 5 * MS).is_some(), "read again until all stood still");
    }

    #[test]
    fn a_trusted_read_is_made_again_each_safety_read() {
        let t0 = Instant::now();
        let mut g = gate(t0, 1);
        let pass = g.pass_at(Some(1), t0 + STILL).expect("no read trusted yet");
        g.done_at(pass, true, t0 + STILL);
        assert!(g.pass_at(Some(1), t0 + STILL + SAFETY_READ - MS).is_none());
        assert!(g.pass_at(Some(1), t0 + STILL + SAFETY_READ).is_some(), "read once a second all the same");
    }

    #[test]
    fn a_marker_that_failed_is_asked_for_again_a_retry_later() {
        let t0 = Instant::now();
        let mut g = gate(t0, 1);
        assert!(g.asks_at(t0));
        g.unmarked_until = Some(t0 + MARKER_RETRY);
        assert!(!g.asks_at(t0 + MARKER_RETRY - MS), "not asked for while it may still fail");
        assert!(g.asks_at(t0 + MARKER_RETRY), "asked for again: a database down a moment is back");
    }

    #[test]
    fn without_a_marker_every_look_reads() {
        let t0 = Instant::now();
        let mut g = Gate { seen_since: t0, ..Gate::default() };
        for i in 1..4 {
            let pass = g.pass_at(None, t0 + i * STILL).expect("every look reads");
            g.done_at(pass, true, t0 + i * STILL);
        }
    }
}
