//! What this worker runs, against what the database says it runs.
//!
//! The run watch asks, every second while runs are in flight (and at once when PostgreSQL
//! notifies a cancellation), which runs the database has `running` on this runner, and mends
//! the two ways they can differ:
//!
//! - a run in flight that the database no longer has running here (cancelled, or timed out by an
//!   overseer) is stopped at once;
//! - a run the database has running here that this worker does not hold is an **orphan**: its
//!   claim committed but the answer never came back (the connection dropped, or the server
//!   restarted, between the commit and the reply). Nothing would ever run or end it, and a live
//!   runner's runs are never timed out as lost, so it would wait for its run timeout (a day by
//!   default). Seen so on two looks in a row (a claim's answer being handled during one look is
//!   held by the next), it is put back in the queue, unrun and uncounted. An answer that arrives
//!   after all for a run put back so is dropped, never started.
//!
//! A run this worker claimed has an entry in [`Claims`] until what became of it is in the
//! database; a run with one is no orphan (one the fence stopped keeps it: the heartbeat puts it
//! back). While nothing is in flight the watch looks every fifth period only.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::claims::Claims;
use super::fence::Fence;
use super::release::{PutBackWhy, Releases};
use crate::clock::SharedClock;
use crate::model::{RunId, RunnerId};
use crate::store::SharedStore;

/// While nothing is in flight or suspected, the watch looks once in this many periods.
const IDLE_LOOKS: u32 = 5;

/// Runs seen running here in the database but not held, look after look.
#[derive(Debug, Default)]
pub(super) struct Suspects(HashSet<RunId>);

impl Suspects {
    /// This look's unknown runs; returns those the previous look found unknown too.
    pub fn judge(&mut self, unknown: HashSet<RunId>) -> Vec<RunId> {
        let mut orphans: Vec<RunId> = unknown.intersection(&self.0).copied().collect();
        orphans.sort_unstable();
        self.0 = unknown;
        orphans
    }
}

/// Watches the runs in flight against the database (see the module's documentation).
pub(super) struct RunWatch {
    pub store: SharedStore,
    pub clock: SharedClock,
    pub runner: RunnerId,
    pub claims: Arc<Claims>,
    pub fence: Arc<Fence>,
    /// How often to look while runs are in flight.
    pub interval: Duration,
    /// Woken when running tasks were cancelled anywhere (PostgreSQL); None: poll only.
    pub cancels: Option<mpsc::Receiver<()>>,
    /// Where orphans are put back (the writer).
    pub releases: Releases,
}

impl RunWatch {
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut suspects = Suspects::default();
        let mut ticks = 0u32;
        loop {
            tokio::select! {
                _ = tick.tick() => ticks = ticks.wrapping_add(1),
                woke = next(&mut self.cancels) => if !woke { self.cancels = None },
                _ = stop.changed() => return,
            }
            // Listed before asking: a run that starts after this is not judged by this answer.
            let mine = self.claims.executing();
            let busy = !self.claims.is_empty() || !suspects.0.is_empty();
            if self.fence.is_fenced() || (!busy && !ticks.is_multiple_of(IDLE_LOOKS)) {
                continue;
            }
            let asked = tokio::time::timeout(
                self.interval.max(Duration::from_secs(1)),
                self.store.running_runs_of(self.runner),
            );
            let running = match asked.await {
                Ok(Ok(running)) => running.into_iter().collect::<HashSet<_>>(),
                Ok(Err(e)) => {
                    tracing::warn!(runner = self.runner, "could not check the runs in flight: {e}");
                    continue;
                }
                Err(_) => continue,
            };
            for run in ended_elsewhere(mine, &running, &self.claims.executing()) {
                tracing::warn!(runner = self.runner, run, "this run was cancelled or ended elsewhere: stopping it");
                self.claims.stop(run);
            }
            // Judged after the answer: a claim answered before it is held by now.
            let unknown = running.into_iter().filter(|&r| !self.claims.holds(r));
            for run in suspects.judge(unknown.collect()) {
                if let Some(held) = self.claims.disown(run) {
                    tracing::warn!(
                        runner = self.runner,
                        run,
                        "the database has this run running here but its claim's answer never came: putting it back"
                    );
                    self.releases.put_back([held], self.clock.now(), PutBackWhy::AnswerLost);
                }
            }
        }
    }
}

/// The runs executing before the database was asked (`before`) that it no longer has running
/// here and whose guests still execute (`now`): a run whose guest ended meanwhile may have been
/// written by this worker's writer before the answer, and is no run ended elsewhere.
fn ended_elsewhere(before: Vec<RunId>, running: &HashSet<RunId>, now: &[RunId]) -> Vec<RunId> {
    before.into_iter().filter(|r| !running.contains(r) && now.contains(r)).collect()
}

/// The next message; pending forever without a channel. False when the channel closed.
pub(super) async fn next(rx: &mut Option<mpsc::Receiver<()>>) -> bool {
    match rx {
        Some(rx) => rx.recv().await.is_some(),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_whose_guest_ended_while_the_database_was_asked_did_not_end_elsewhere() {
        // 1 ended elsewhere (still executing), 2 ended here and was written meanwhile, 3 runs on.
        let running = HashSet::from([3]);
        assert_eq!(ended_elsewhere(vec![1, 2, 3], &running, &[1, 3]), vec![1]);
    }

    #[test]
    fn a_run_unknown_on_two_looks_in_a_row_is_an_orphan() {
        let mut s = Suspects::default();
        assert!(s.judge(HashSet::from([1, 2])).is_empty(), "one look proves nothing");
        assert_eq!(s.judge(HashSet::from([2, 3])), vec![2]);
        assert!(s.judge(HashSet::from([4])).is_empty(), "3 was held by the third look");
    }
}
