//! Retries: a task whose latest run failed (error or timeout) and is not given up on is
//! scheduled again, due after the backoff — or is given up on (a dead letter) once it has
//! failed `max_attempts` times in a row.
//!
//! Workers schedule the retry of runs they finish themselves; this service covers runs that
//! ended without their worker: timed out by [`super::liveness`] or [`super::run_timeout`].

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::model::NextStep;
use crate::retry::{self, Backoff};
use crate::store::{RetryCandidate, RetryPlan, SharedStore};

/// The `[overseer.retries]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// Tasks decided per pass.
    pub batch: u32,
    /// The backoff of tasks that set none.
    #[serde(skip)]
    pub backoff: Backoff,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 1_000;
}

impl Default for Config {
    fn default() -> Self {
        Config { interval: Self::DEFAULT_INTERVAL, batch: Self::DEFAULT_BATCH, backoff: Backoff::default() }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Tasks scheduled again.
    pub retries_scheduled: u64,
    /// Tasks given up on.
    pub given_up: u64,
}

/// The plan for one candidate: timeouts are always retryable.
pub fn plan(c: &RetryCandidate, backoff: &Backoff, now: DateTime<Utc>, unit: f64) -> RetryPlan {
    let next = retry::decide(c.failures, c.max_attempts, true, &backoff.for_task(&c.backoff), now, unit);
    RetryPlan { task_id: c.task_id, next }
}

/// The service (see the module's documentation).
pub struct Retries {
    store: SharedStore,
    config: Config,
}

impl Retries {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        Retries { store, config }
    }
}

#[async_trait]
impl Service for Retries {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let mut report = Report::default();
        for _ in 0..super::MAX_BATCHES_A_PASS {
            let candidates = self.store.retry_candidates(self.config.batch).await?;
            let plans: Vec<RetryPlan> =
                candidates.iter().map(|c| plan(c, &self.config.backoff, now, retry::jitter_unit())).collect();
            for p in &plans {
                match p.next {
                    NextStep::RetryAt(_) => report.retries_scheduled += 1,
                    NextStep::GiveUp => report.given_up += 1,
                }
            }
            self.store.apply_retry_plans(&plans, now).await?;
            if candidates.len() < self.config.batch as usize {
                break;
            }
        }
        Ok(report)
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.retries_scheduled + self.given_up > 0).then(|| {
            format!(
                "scheduled {}, gave up on {}",
                crate::text::count(self.retries_scheduled, "retry"),
                crate::text::count(self.given_up, "task")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BackoffSettings;

    fn candidate(failures: u32, max_attempts: u32) -> RetryCandidate {
        RetryCandidate { task_id: 7, failures, max_attempts, backoff: BackoffSettings::default() }
    }

    #[test]
    fn a_timed_out_task_below_max_attempts_is_retried_after_the_backoff() {
        let now = Utc::now();
        let b = Backoff { jitter: 0.0, ..Backoff::default() };
        let p = plan(&candidate(1, 5), &b, now, 0.5);
        assert_eq!(p.next, NextStep::RetryAt(now + chrono::Duration::seconds(1)));
    }

    #[test]
    fn a_task_at_max_attempts_is_given_up() {
        let p = plan(&candidate(5, 5), &Backoff::default(), Utc::now(), 0.5);
        assert_eq!(p.next, NextStep::GiveUp);
    }
}
