//! An idle worker's wait: for a wake-up from the database, a newer task, a load (of the plugins
//! directory, or of a deployed version) or the poll.

use std::time::Duration;

use super::Claimer;
use crate::model::TaskId;
use crate::runner::ExitReason;

impl Claimer<'_> {
    /// Wait for work: a wake-up from the database, the poll interval, a signal or a reason to
    /// exit (Some).
    pub async fn wait_for_work(&mut self) -> Option<ExitReason> {
        let cfg = &self.worker.config;
        // Polling at the short interval: without wake-ups; when a capped run may end elsewhere
        // (a rate says when its next start is due, and a limit changed live wakes idle workers);
        // and when draining, whose tasks may also be left by another worker (waiting for a
        // wake-up added up to the notified poll interval to every drain on PostgreSQL).
        let poll = if self.wakeups.is_some() && !self.capped && !cfg.drain {
            cfg.notified_poll_interval
        } else {
            cfg.poll_interval
        };
        // A draining worker whose last outcomes are being written is done once they are, and a
        // capped one finds the room its own runs held once they are: the writer says so, rather
        // than the next poll (a cap of 8 on no-op runs drained 130 a second at the 50 ms poll).
        // Whether or not runs are still held: the writer lets go of them before it notifies, so a
        // claim that read before that write finds none held here, and only the notification's
        // stored permit says the room is now free (waiting on the held runs alone waited for the
        // poll). A permit left from an older write costs one claim.
        let runs = self.runs;
        let wait_written = cfg.drain || self.capped;
        let written = async move {
            if wait_written {
                runs.written.notified().await
            } else {
                std::future::pending().await
            }
        };
        // Without wake-ups, tasks other processes add are seen by a probe far cheaper than a
        // claim, taken only while idle.
        let probe = if self.wakeups.is_none() { cfg.probe_interval } else { Duration::ZERO };
        // A rate limit out of starts: claim again when it allows the next (on the database's
        // clock, as the limit counts), not at the poll.
        let next_start = self.next_start_on.map(|on| (on - self.worker.clock.now()).to_std().unwrap_or_default());
        tokio::select! {
            _ = &mut self.shutdown => Some(ExitReason::Shutdown),
            r = self.exits.recv() => Some(r.unwrap_or(ExitReason::Shutdown)),
            _ = tokio::time::sleep(poll) => None,
            _ = tokio::time::sleep(next_start.unwrap_or(poll)), if next_start.is_some() => None,
            _ = newer_task(&self.worker.store, probe, &mut self.newest) => None,
            _ = written => None,
            open = changed(&mut self.local_adds) => {
                if !open {
                    self.local_adds = None;
                }
                None
            }
            _ = changed(&mut self.versions_loaded) => None,
            open = changed(&mut self.loading) => {
                if !open {
                    self.loading = None; // the first load is over
                }
                None
            }
            woke = crate::runner::run_watch::next(&mut self.wakeups) => {
                if !woke {
                    self.wakeups = None; // the listener is gone: poll only
                }
                // Woken for tasks added or a limit changed: the claim reads the limits afresh.
                self.limits.expire();
                None
            }
        }
    }
}

/// When the newest task's id moves on from `newest`, looking every `every` (never when zero); a
/// failed look is left to the poll. Each look runs to its end in a task of its own: this wait is
/// dropped whenever another wakes the worker first, and a query dropped halfway leaves its
/// connection unread (MySQL's pool then discards it, with a warning).
async fn newer_task(store: &crate::store::SharedStore, every: Duration, newest: &mut TaskId) {
    if every.is_zero() {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(every).await;
        let store = store.clone();
        let look = tokio::spawn(async move { store.newest_task_id().await });
        match look.await {
            Ok(Ok(id)) if id != *newest => {
                *newest = id;
                return;
            }
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => tracing::debug!("looking for new tasks: {e}"),
        }
    }
}

/// When `watched` changes again (false: it never will, its sender is gone); never without one.
async fn changed<T>(watched: &mut Option<tokio::sync::watch::Receiver<T>>) -> bool {
    match watched {
        Some(w) => w.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}
