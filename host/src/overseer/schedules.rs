//! Periodic tasks: every schedule not paused gets a task for its latest due slot, once (see
//! [`crate::schedule`]). Slots are queued exactly once even when two overseers race (each
//! schedule's row is locked while its slot is queued), so this service needs no leader for
//! correctness; the lease only saves the work.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::Service;
use crate::error::Result;
use crate::model::TaskId;
use crate::store::SharedStore;

#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How often due slots are looked for: the most a slot's task is queued after its time.
    pub interval: Duration,
}

impl Config {
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
}

impl Default for Config {
    fn default() -> Self {
        Config { interval: Self::DEFAULT_INTERVAL }
    }
}

/// The tasks queued, with their schedules' names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub queued: Vec<(String, TaskId)>,
}

pub struct Schedules {
    store: SharedStore,
    config: Config,
}

impl Schedules {
    pub fn new(store: SharedStore, config: Config) -> Self {
        Schedules { store, config }
    }

    pub async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        Ok(Report { queued: self.store.queue_due_slots(now).await? })
    }
}

#[async_trait]
impl Service for Schedules {
    fn name(&self) -> &'static str {
        "schedules"
    }
    fn interval(&self) -> Duration {
        self.config.interval
    }
    async fn tick(&self, now: DateTime<Utc>) -> Result<Option<String>> {
        let r = self.run_once(now).await?;
        Ok((!r.queued.is_empty()).then(|| {
            let names: Vec<&str> = r.queued.iter().map(|(n, _)| n.as_str()).collect();
            format!("queued {} periodic tasks ({})", r.queued.len(), names.join(", "))
        }))
    }
}
