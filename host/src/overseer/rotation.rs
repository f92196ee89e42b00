//! Rotation: successful and cancelled tasks finished longer ago than the retention are deleted
//! with their runs, in bounded batches so the database is never locked for long. Failed tasks
//! and dead letters are kept.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::SharedStore;

/// The `[overseer.rotation]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// Keep successful and cancelled tasks this long after they finished.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub retention: Duration,
    /// Tasks deleted per transaction.
    pub batch: u32,
    /// Batches per run, so one run stays short; the rest waits for the next interval.
    pub max_batches: u32,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);
    /// Its default retention.
    pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 1_000;
    /// Its default batches a pass.
    pub const DEFAULT_MAX_BATCHES: u32 = 100;
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Self::DEFAULT_INTERVAL,
            retention: Self::DEFAULT_RETENTION,
            batch: Self::DEFAULT_BATCH,
            max_batches: Self::DEFAULT_MAX_BATCHES,
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Tasks deleted.
    pub tasks_deleted: u64,
    /// Transactions it took.
    pub batches: u32,
}

/// The service (see the module's documentation).
pub struct Rotation {
    store: SharedStore,
    config: Config,
}

impl Rotation {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        Rotation { store, config }
    }
}

#[async_trait]
impl Service for Rotation {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let before = super::ago(now, self.config.retention);
        let (tasks_deleted, batches) = super::in_batches(self.config.batch, self.config.max_batches, || {
            self.store.rotate(before, self.config.batch)
        })
        .await?;
        Ok(Report { tasks_deleted, batches })
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.tasks_deleted > 0)
            .then(|| format!("deleted {}", crate::text::count(self.tasks_deleted, "old finished task")))
    }
}
