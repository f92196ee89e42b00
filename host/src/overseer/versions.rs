//! Versions: deployed versions of handlers (`taskhost deploy`) that are not active, stopped being
//! active longer ago than the retention and no unfinished task is pinned to are deleted, in
//! bounded batches, with the components no version is of any more. The active version of each
//! handler is always kept, whatever its age, and so is each release (the history of what ran).
//! A rollback can still go to any version within the retention.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::SharedStore;

/// The `[overseer.versions]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// Keep a version this long after another was made active in its place.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub retention: Duration,
    /// Versions deleted per transaction (fewer when their components pass 64 MiB).
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
    pub const DEFAULT_BATCH: u32 = 20;
    /// Its default batches a pass.
    pub const DEFAULT_MAX_BATCHES: u32 = 10;
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
    /// Versions deleted.
    pub versions: u64,
    /// Components deleted with them.
    pub components: u64,
    /// Those components' bytes.
    pub bytes: u64,
    /// Transactions it took.
    pub batches: u32,
}

/// The service (see the module's documentation).
pub struct Versions {
    store: SharedStore,
    config: Config,
}

impl Versions {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        Versions { store, config }
    }
}

#[async_trait]
impl Service for Versions {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let before = super::ago(now, self.config.retention);
        let mut report = Report::default();
        while report.batches < self.config.max_batches {
            let retired = self.store.retire_versions(before, self.config.batch).await?;
            report.batches += 1;
            report.versions += retired.versions;
            report.components += retired.components;
            report.bytes += retired.bytes;
            if retired.versions == 0 || (retired.versions < u64::from(self.config.batch) && !retired.more) {
                break;
            }
        }
        Ok(report)
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.versions > 0).then(|| {
            let versions = crate::text::count(self.versions, "old version");
            let components = crate::text::count(self.components, "component");
            format!("deleted {versions} and {components} ({:.1} MB)", self.bytes as f64 / 1e6)
        })
    }
}
