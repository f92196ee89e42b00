//! How a stopping worker spends its grace period. A signal stops the worker within
//! `shutdown_grace`, counted from the signal, even while the database is down: the runs in flight
//! get most of it, the last calls (stopping the parts, marking the runner) a share kept back for
//! them and whatever the runs left. Nothing after the grace waits on the database: a runner that
//! could not be marked is found by its heartbeat. (The process then exits without waiting for
//! blocking work such as a compile: see `main.rs`.)

use std::time::Duration;

use tokio::time::Instant;

use super::put_back::CutClaim;
use super::{ExitReason, Worker};
use crate::model::{RunnerId, RunnerStatus};

/// The most the last calls keep back from the runs. It is also what they get when the worker
/// stops for a runner declared dead (no run is waited for then).
const LAST_CALLS_MAX: Duration = Duration::from_secs(2);

/// The least they keep back, unless the grace is shorter than twice this (then half of it).
const LAST_CALLS_MIN: Duration = Duration::from_secs(1);

/// When the runs in flight must have ended, when the parts must have stopped (the first half of
/// what is left), and when the worker must have returned (the runner marked in the second half).
#[derive(Debug, Clone, Copy)]
pub(super) struct StopPlan {
    pub runs_until: Instant,
    pub parts_until: Instant,
    pub gone_by: Instant,
}

impl StopPlan {
    /// The plan for a worker stopping for `exit`, asked at `from` (the signal, or when the
    /// claim loop saw the reason).
    pub fn new(exit: ExitReason, grace: Duration, from: Instant) -> Self {
        let (runs_until, gone_by) = if exit == ExitReason::RunnerLost {
            // Its runs were timed out with it: none is waited for.
            let now = Instant::now();
            (now, later(now, LAST_CALLS_MAX))
        } else {
            (later(from, runs_share(grace)), later(from, grace))
        };
        let parts_until = runs_until + (gone_by - runs_until) / 2;
        StopPlan { runs_until, parts_until, gone_by }
    }
}

/// `d` after `at`, or a year after it for a grace too long to add (a typo of an operator's).
fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d).unwrap_or_else(|| at + Duration::from_secs(365 * 24 * 3600))
}

/// Of a grace period, what the runs in flight (and a claim cut short) may take: all but a fifth
/// of it, the fifth at least [`LAST_CALLS_MIN`] (or half a shorter grace), at most
/// [`LAST_CALLS_MAX`].
pub(super) fn runs_share(grace: Duration) -> Duration {
    let last_calls = (grace / 5).max(LAST_CALLS_MIN.min(grace / 2)).min(LAST_CALLS_MAX);
    grace.saturating_sub(last_calls)
}

impl Worker {
    /// Mark the runner by `gone_by`: stopped, or timed out with its runs when some were left
    /// running (runs not finished in the grace period, or a claim cut short whose runs did not
    /// all go back).
    pub(super) async fn mark_stopped(
        &self,
        runner_id: RunnerId,
        exit: ExitReason,
        abandoned: u64,
        cut: Option<CutClaim>,
        gone_by: Instant,
    ) {
        let now = self.clock.now();
        let lost_a_claim = cut.is_some_and(|c| !c.all_back);
        let last = async {
            if abandoned > 0 || lost_a_claim {
                tracing::warn!(runner_id, abandoned, "runs not finished within the grace period: timing them out");
                self.store.time_out_runners(&[runner_id], now).await.map(|_| ())
            } else if exit != ExitReason::RunnerLost {
                self.store.finish_runner(runner_id, RunnerStatus::Success, now).await
            } else {
                Ok(())
            }
        };
        // The overseer of another worker finds this runner dead by its heartbeat instead.
        match tokio::time::timeout_at(gone_by, last).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(runner_id, "could not mark the runner stopped: {e}"),
            Err(_) => tracing::warn!(
                runner_id,
                "could not mark the runner stopped within the grace period: the database did not answer"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_get_the_grace_but_the_last_calls_share() {
        let from = Instant::now();
        let share = |grace_ms: u64| {
            let plan = StopPlan::new(ExitReason::Shutdown, Duration::from_millis(grace_ms), from);
            assert_eq!(plan.gone_by - from, Duration::from_millis(grace_ms));
            ((plan.runs_until - from).as_millis(), (plan.parts_until - from).as_millis())
        };
        assert_eq!(share(200), (100, 150));
        assert_eq!(share(2_000), (1_000, 1_500));
        assert_eq!(share(5_000), (4_000, 4_500));
        assert_eq!(share(30_000), (28_000, 29_000));
        assert_eq!(share(0), (0, 0));
    }

    #[test]
    fn a_grace_too_long_to_add_is_a_year() {
        let from = Instant::now();
        let plan = StopPlan::new(ExitReason::Shutdown, Duration::MAX, from);
        assert!(plan.gone_by > from && plan.runs_until <= plan.gone_by);
    }
}
