//! Statistics compaction: the rows of `task_stats` (one per handler, queue, minute and runner)
//! older than two hours are merged into one row per handler, queue and hour, in bounded
//! batches, so the table (and the time `taskhost stats` takes to sum it) grows with the hours
//! the queue has run, not with its runners and busy minutes. The statistics read the same after;
//! the last minute's and hour's runs are read from minute rows, which are kept.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::SharedStore;

/// The `[overseer.stats_compaction]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// Rows of minutes at least this old are merged (more than the hour `stats` reads by minute).
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub keep_minutes_for: Duration,
    /// Rows merged per transaction.
    pub batch: u32,
    /// Batches per run, so one run stays short; the rest waits for the next interval.
    pub max_batches: u32,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);
    /// Its default time minute rows are kept.
    pub const DEFAULT_KEEP_MINUTES_FOR: Duration = Duration::from_secs(2 * 3600);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 1_000;
    /// Its default batches a pass.
    pub const DEFAULT_MAX_BATCHES: u32 = 100;
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Self::DEFAULT_INTERVAL,
            keep_minutes_for: Self::DEFAULT_KEEP_MINUTES_FOR,
            batch: Self::DEFAULT_BATCH,
            max_batches: Self::DEFAULT_MAX_BATCHES,
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Minute rows merged into hour rows.
    pub rows_merged: u64,
    /// Transactions it took.
    pub batches: u32,
}

/// The service (see the module's documentation).
pub struct StatsCompaction {
    store: SharedStore,
    config: Config,
}

impl StatsCompaction {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        StatsCompaction { store, config }
    }
}

#[async_trait]
impl Service for StatsCompaction {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        // Never less than the two hours the statistics read by minute (the last minute and hour).
        let keep = self.config.keep_minutes_for.max(Config::DEFAULT_KEEP_MINUTES_FOR);
        let before = super::ago(now, keep);
        let (rows_merged, batches) = super::in_batches(self.config.batch, self.config.max_batches, || {
            self.store.compact_stats(before, self.config.batch)
        })
        .await?;
        Ok(Report { rows_merged, batches })
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.rows_merged > 0)
            .then(|| format!("merged {} of statistics into hours", crate::text::count(self.rows_merged, "row")))
    }
}
