//! The flow-control limits a worker claims within, as last read from the database
//! ([`crate::store::Store::limits_in_force`]): read before a claim when a second old, so a
//! limit set or changed live (`taskhost limits set`, the API) applies on every worker within a
//! second. The claim itself reads each limit it touches afresh, locked: this view only says
//! which queues and handlers take the limited claim, and which runs are charged their fuel.

use std::time::Duration;

use tokio::time::Instant;

use crate::model::{ClaimedRun, FuelKey, RunLimits};
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

    /// Read them again before the next claim (a wake-up may say a limit changed).
    pub fn expire(&mut self) {
        self.fresh_until = None;
    }

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

/// Mark the keyed runs of queues that weigh their keys by fuel (`fuel_per_turn`): each is
/// charged the fuel it burns to its key when it ends; and the runs of queues that delete their
/// successes (`on_success`).
pub(super) fn mark_by_limits(runs: &mut [ClaimedRun], limits: &RunLimits) {
    for run in runs {
        run.delete_on_success = limits.deletes_successes(&run.queue);
        if let (Some(key), Some(_)) = (&run.key, limits.fuel_per_turn(&run.queue)) {
            run.fuel_key = Some(FuelKey { queue: run.queue.clone(), key: key.clone() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Limit;

    #[test]
    fn only_keyed_runs_of_a_queue_weighed_by_fuel_are_charged() {
        let mut limits = RunLimits::default();
        limits.set(
            crate::model::LimitScope::Queue,
            "metered",
            Limit { fuel_per_turn: Some(1_000_000), ..Limit::default() },
        );
        limits.set(crate::model::LimitScope::Queue, "capped", Limit { max_running: Some(2), ..Limit::default() });
        let now = chrono::Utc::now();
        let run = |queue: &str, key: Option<&str>| ClaimedRun {
            run_id: 1,
            task_id: 1,
            attempt: 1,
            handler: "h".into(),
            queue: queue.into(),
            due_on: now,
            data: "{}".into(),
            queued_by: None,
            max_attempts: 1,
            task_runs_failed: 0,
            backoff: Default::default(),
            snoozes: 0,
            depth: 0,
            started_on: now,
            timeout_on: now,
            key: key.map(str::to_string),
            fuel_key: None,
            delete_on_success: false,
            digest: None,
            unreadable: None,
        };
        let mut runs =
            [run("metered", Some("a")), run("metered", None), run("capped", Some("a")), run("default", Some("a"))];
        mark_by_limits(&mut runs, &limits);
        let charged: Vec<_> =
            runs.iter().map(|r| r.fuel_key.as_ref().map(|k| (k.queue.as_str(), k.key.as_str()))).collect();
        assert_eq!(charged, [Some(("metered", "a")), None, None, None]);
        assert!(
            !limits.limits_claims_of("metered") && limits.limits_claims_of("capped"),
            "a fuel per turn alone is claimed freely"
        );
        // Only a cap keeps an idle worker polling: a rate says when its next start is due.
        let paced = Limit { rate: crate::model::Rate::parse("5/1s").ok(), ..Limit::default() };
        limits.set(crate::model::LimitScope::Queue, "paced", paced);
        let q = |name: &str| vec![name.to_string()];
        assert!(
            limits.wants_short_poll(&q("capped"), &[])
                && !limits.wants_short_poll(&q("paced"), &[])
                && limits.wants_short_poll(&q("metered"), &[])
        );
    }
}
