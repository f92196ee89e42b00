//! Run timeout: a run still `running` past its task's run timeout (default 1 day, set when it
//! was claimed) becomes `timeout`; the retries service then decides the task's next run.
//!
//! A live worker stops its own runs at their run timeout and writes the outcome itself; this
//! service is the fallback for runs whose worker is gone, and waits a margin past the timeout so
//! the two never race.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::SharedStore;

/// The `[overseer.run_timeout]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// Runs timed out per statement.
    pub batch: u32,
    /// How long past its run timeout a run is left to its worker before this service times it out.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub margin: Duration,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 1_000;
    /// Its default margin.
    pub const DEFAULT_MARGIN: Duration = Duration::from_secs(30);
}

impl Default for Config {
    fn default() -> Self {
        Config { interval: Self::DEFAULT_INTERVAL, batch: Self::DEFAULT_BATCH, margin: Self::DEFAULT_MARGIN }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Runs timed out.
    pub runs_timed_out: u64,
}

/// The service (see the module's documentation).
pub struct RunTimeout {
    store: SharedStore,
    config: Config,
}

impl RunTimeout {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        RunTimeout { store, config }
    }
}

#[async_trait]
impl Service for RunTimeout {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let mut report = Report::default();
        let cutoff = super::ago(now, self.config.margin);
        for _ in 0..super::MAX_BATCHES_A_PASS {
            let n = self.store.time_out_overdue_runs(cutoff, now, self.config.batch).await?;
            report.runs_timed_out += n;
            if n < u64::from(self.config.batch) {
                break;
            }
        }
        Ok(report)
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.runs_timed_out > 0)
            .then(|| format!("timed out {}", crate::text::count(self.runs_timed_out, "overdue run")))
    }
}
