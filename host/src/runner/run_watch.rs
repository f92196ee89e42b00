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
//! A worker holds a run from its claim's answer until what became of it is in the database (its
//! outcome written, or it was put back or ended elsewhere): [`Held`], carried with the run's slot.
//! Runs the fence stopped are not orphans either (the heartbeat puts them back). While nothing is
//! in flight the watch looks every fifth period only.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};

use super::fence::Fence;
use super::release::{PutBackWhy, Releases};
use crate::clock::SharedClock;
use crate::model::{RunId, RunnerId};
use crate::store::SharedStore;

/// How many orphans put back are remembered, to drop an answer that arrives for one after all.
const REMEMBERED_ORPHANS: usize = 1024;

/// While nothing is in flight or suspected, the watch looks once in this many periods.
const IDLE_LOOKS: u32 = 5;

/// The runs this worker is executing, each with a way to stop it, and the runs it holds.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    runs: Mutex<HashMap<RunId, Arc<Notify>>>,
    holdings: Mutex<Holdings>,
}

#[derive(Debug, Default)]
struct Holdings {
    held: HashSet<RunId>,
    orphaned: VecDeque<RunId>,
}

/// This worker holds a run while this lives (see the module's documentation).
#[derive(Debug)]
pub(super) struct Held {
    run: RunId,
    in_flight: Arc<InFlight>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.in_flight.holdings.lock().unwrap_or_else(|p| p.into_inner()).held.remove(&self.run);
    }
}

impl InFlight {
    /// Register a run; the returned handle is notified if the run must stop.
    pub fn enter(&self, run: RunId) -> Arc<Notify> {
        let stop = Arc::new(Notify::new());
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).insert(run, stop.clone());
        stop
    }

    pub fn leave(&self, run: RunId) {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).remove(&run);
    }

    pub fn ids(&self) -> Vec<RunId> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).keys().copied().collect()
    }

    pub fn stop(&self, run: RunId) {
        if let Some(n) = self.runs.lock().unwrap_or_else(|p| p.into_inner()).get(&run) {
            n.notify_one();
        }
    }

    /// Hold a run a claim answered with; None when it was put back as an orphan meanwhile (then
    /// it must not start).
    pub fn hold(self: &Arc<Self>, run: RunId) -> Option<Held> {
        let mut h = self.holdings.lock().unwrap_or_else(|p| p.into_inner());
        if h.orphaned.contains(&run) {
            return None;
        }
        h.held.insert(run);
        Some(Held { run, in_flight: self.clone() })
    }

    /// Take a run this worker does not hold for an orphan, so that it is never started here;
    /// false when it is held after all.
    fn disown(&self, run: RunId) -> bool {
        let mut h = self.holdings.lock().unwrap_or_else(|p| p.into_inner());
        if h.held.contains(&run) {
            return false;
        }
        if !h.orphaned.contains(&run) {
            if h.orphaned.len() >= REMEMBERED_ORPHANS {
                h.orphaned.pop_front();
            }
            h.orphaned.push_back(run);
        }
        true
    }

    fn holds(&self, run: RunId) -> bool {
        self.holdings.lock().unwrap_or_else(|p| p.into_inner()).held.contains(&run)
    }

    fn holds_any(&self) -> bool {
        !self.holdings.lock().unwrap_or_else(|p| p.into_inner()).held.is_empty()
    }
}

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
    pub in_flight: Arc<InFlight>,
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
            let mine = self.in_flight.ids();
            let busy = !mine.is_empty() || self.in_flight.holds_any() || !suspects.0.is_empty();
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
            for run in mine.into_iter().filter(|r| !running.contains(r)) {
                tracing::warn!(runner = self.runner, run, "this run was cancelled or ended elsewhere: stopping it");
                self.in_flight.stop(run);
            }
            // Judged after the answer: a claim answered before it is held by now.
            let unknown = running.into_iter().filter(|&r| !self.in_flight.holds(r) && !self.fence.stopped(r));
            for run in suspects.judge(unknown.collect()) {
                if self.in_flight.disown(run) {
                    tracing::warn!(
                        runner = self.runner,
                        run,
                        "the database has this run running here but its claim's answer never came: putting it back"
                    );
                    self.releases.put_back([(run, None)], self.clock.now(), PutBackWhy::AnswerLost);
                }
            }
        }
    }
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
    fn a_run_unknown_on_two_looks_in_a_row_is_an_orphan() {
        let mut s = Suspects::default();
        assert!(s.judge(HashSet::from([1, 2])).is_empty(), "one look proves nothing");
        assert_eq!(s.judge(HashSet::from([2, 3])), vec![2]);
        assert!(s.judge(HashSet::from([4])).is_empty(), "3 was held by the third look");
    }

    #[test]
    fn a_held_run_is_never_disowned_and_a_disowned_run_is_never_held() {
        let f = Arc::new(InFlight::default());
        let held = f.hold(7).expect("not orphaned");
        assert!(!f.disown(7), "held");
        drop(held);
        assert!(f.disown(7), "its outcome is written: no longer held");
        assert!(f.hold(7).is_none(), "an answer arriving late for an orphan put back is dropped");
        assert!(f.hold(8).is_some());
    }

    #[test]
    fn orphans_remembered_are_bounded() {
        let f = InFlight::default();
        for run in 0..(REMEMBERED_ORPHANS as i64 + 10) {
            assert!(f.disown(run));
        }
        assert_eq!(f.holdings.lock().unwrap_or_else(|p| p.into_inner()).orphaned.len(), REMEMBERED_ORPHANS);
    }
}
