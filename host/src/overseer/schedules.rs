//! Periodic tasks: every schedule not paused gets a task for its latest due slot, once (see
//! [`crate::schedule`]). Slots are queued exactly once even when two overseers race (each
//! schedule's row is locked while its slot is queued), so this service needs no leader for
//! correctness; the lease only saves the work.
//!
//! With declared schedules (the operator's configuration file's), the overseer holding the lease
//! first makes the database's declared schedules those (see [`crate::store::Store::sync_schedules`]),
//! once, before it queues anything; a failure is retried at the next tick. A one-off pass
//! (`taskhost overseer --once`) only shows what it would change unless told to apply it: a
//! command run with a stale file must not rewrite the schedules a running overseer keeps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::model::TaskId;
use crate::schedule::{NewSchedule, Synced};
use crate::store::SharedStore;

/// The `[overseer.schedules]` settings.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often due slots are looked for: the most a slot's task is queued after its time.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// The schedules declared in the configuration file; None: nothing is declared here (the
    /// declared schedules in the database are left as they are).
    #[serde(skip)]
    pub declared: Option<Vec<NewSchedule>>,
    /// Whether the declarations are applied (true) or only what they would change is told.
    #[serde(skip)]
    pub apply: bool,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
}

impl Default for Config {
    fn default() -> Self {
        Config { interval: Self::DEFAULT_INTERVAL, declared: None, apply: true }
    }
}

/// The declared schedules changed (on the first pass), and the tasks queued, with their
/// schedules' names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Declared schedules added, changed, removed.
    pub synced: Synced,
    /// False when `synced` is what would change, not what changed.
    pub applied: bool,
    /// Tasks queued: schedule name and task.
    pub queued: Vec<(String, TaskId)>,
}

/// The service (see the module's documentation).
pub struct Schedules {
    store: SharedStore,
    config: Config,
    synced: AtomicBool,
}

impl Schedules {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        Schedules { store, config, synced: AtomicBool::new(false) }
    }
}

#[async_trait]
impl Service for Schedules {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let mut synced = Synced::default();
        let applied = self.config.apply;
        if let Some(declared) = self.config.declared.as_deref() {
            if !self.synced.load(Ordering::Relaxed) {
                synced = if applied {
                    self.store.sync_schedules(declared, now).await?
                } else {
                    self.store.plan_schedules(declared, now).await?
                };
                self.synced.store(true, Ordering::Relaxed);
            }
        }
        Ok(Report { synced, applied, queued: self.store.queue_due_slots(now).await? })
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        let mut said = Vec::new();
        let s = &self.synced;
        for (what, names) in [("added", &s.added), ("updated", &s.updated), ("removed", &s.removed)] {
            if names.is_empty() {
                continue;
            }
            if self.applied {
                said.push(format!("declared schedules {what}: {}", names.join(", ")));
            } else {
                said.push(format!("declared schedules to be {what} (not applied): {}", names.join(", ")));
            }
        }
        if !self.applied && !s.is_empty() {
            said.push(
                "the configuration file's schedules differ from the database's: `overseer --once --apply` \
                       makes them the file's"
                    .to_string(),
            );
        }
        if !self.queued.is_empty() {
            let names: Vec<&str> = self.queued.iter().map(|(n, _)| n.as_str()).collect();
            said.push(format!(
                "queued {} ({})",
                crate::text::count(self.queued.len() as u64, "periodic task"),
                names.join(", ")
            ));
        }
        (!said.is_empty()).then(|| said.join("; "))
    }
}
