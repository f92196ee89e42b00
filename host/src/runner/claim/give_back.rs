//! Runs claimed and not started, given back: those that waited too long for a slot, and all of
//! them when a signal or a reason to exit comes.

use super::Step;
use crate::model::ClaimedRun;
use crate::runner::put_back::CutClaim;
use crate::runner::release::{Holding, PutBackWhy, Release, Releases};
use crate::runner::{ExitReason, Held, Worker};

/// Put back, uncounted and in their place in line (due when they were), runs claimed ahead
/// that waited [`AHEAD_WAIT_LIMIT`](crate::runner::run_tasks::AHEAD_WAIT_LIMIT) for a slot; each is held until its release is applied, so
/// the run watch does not take it for an orphan (one that cannot go back is then the run
/// watch's, which puts back what this worker no longer holds).
pub(super) fn put_back_waiting(releases: &Releases, rest: Vec<(ClaimedRun, Held)>) {
    // Slots whose guests were done may have taken them all meanwhile.
    for (run, held) in rest {
        let release = Release::PutBack { run: run.run_id, at: run.due_on, why: PutBackWhy::NoSlot, otherwise: None };
        releases.send(release, Holding::of(held));
    }
}

/// Put back runs claimed and not started when a signal or a reason to exit came.
pub(super) fn hand_back(worker: &Worker, releases: &Releases, cut: ExitReason, rest: Vec<(ClaimedRun, Held)>) -> Step {
    Step::Exit(
        cut,
        Some(match cut {
            ExitReason::Shutdown | ExitReason::MemoryCap => {
                if !rest.is_empty() {
                    tracing::info!(runs = rest.len(), "runs claimed and not started go back to the queue");
                }
                let now = worker.clock.now();
                releases.put_back(rest.into_iter().map(|(_, held)| held), now, PutBackWhy::Exit);
                CutClaim { asked: tokio::time::Instant::now(), all_back: true }
            }
            // A runner declared dead: its runs are timed out with it.
            _ => CutClaim { asked: tokio::time::Instant::now(), all_back: false },
        }),
    )
}
