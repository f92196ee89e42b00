//! Unserved handlers: a scheduled task whose handler no live runner serves, once that has lasted
//! a horizon, is given up as `handler-not-found` (a dead letter, replayable once the handler is
//! deployed). Workers claim only the handlers they have loaded, so one badly deployed worker
//! leaves such tasks alone rather than dead-lettering them; this service decides only when the
//! whole fleet has gone without the handler for the horizon.
//!
//! It also warns of each queue whose due tasks no live runner claims from (a worker given
//! `--queues` that leaves it out), once its oldest due task has waited `warn_after`: such tasks
//! are not given up, they wait for a worker of their queue.
//!
//! A handler counts as served when any runner, live or since stopped, that heartbeated within the
//! horizon serves it. It judges only when every live runner has said what it serves, and at least
//! one of them has been up for the horizon (a fleet that has just started has not had its chance).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::SharedStore;

/// The `[overseer.unserved]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// How long a due task may wait for a live runner serving its handler.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub horizon: Duration,
    /// Tasks given up per statement.
    pub batch: u32,
    /// How long a queue's due tasks wait, with no live runner claiming from it, before a warning.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub warn_after: Duration,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
    /// Its default horizon.
    pub const DEFAULT_HORIZON: Duration = Duration::from_secs(600);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 1_000;
    /// Its default wait before warning of a queue no runner claims from.
    pub const DEFAULT_WARN_AFTER: Duration = Duration::from_secs(30);
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Self::DEFAULT_INTERVAL,
            horizon: Self::DEFAULT_HORIZON,
            batch: Self::DEFAULT_BATCH,
            warn_after: Self::DEFAULT_WARN_AFTER,
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Tasks given up on.
    pub tasks_given_up: u64,
    /// Queues with due tasks that no live runner claims from: name and due tasks.
    pub unclaimed_queues: Vec<(String, u64)>,
}

/// The service (see the module's documentation).
pub struct Unserved {
    store: SharedStore,
    config: Config,
}

impl Unserved {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        Unserved { store, config }
    }
}

#[async_trait]
impl Service for Unserved {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let mut report = Report::default();
        let waited = super::ago(now, self.config.warn_after);
        for q in self.store.queues(now).await? {
            let long = q.oldest_due.is_some_and(|t| t <= waited);
            if q.due > 0 && long && q.paused_on.is_none() && q.served_by == 0 {
                report.unclaimed_queues.push((q.name, q.due));
            }
        }
        let live = self.store.live_runners().await?;
        let since = super::ago(now, self.config.horizon);
        let judged =
            !live.is_empty() && live.iter().all(|r| r.handlers.is_some()) && live.iter().any(|r| r.started_on <= since);
        if !judged {
            return Ok(report);
        }
        // Served within the horizon: by any runner that heartbeated since, live or stopped (a
        // worker restarting for an upgrade has not stopped serving its handlers).
        let mut served: Vec<String> = self
            .store
            .runners_seen_since(since)
            .await?
            .into_iter()
            .flat_map(|r| r.handlers.unwrap_or_default().into_keys())
            .collect();
        served.sort();
        served.dedup();
        for _ in 0..super::MAX_BATCHES_A_PASS {
            let n = self.store.give_up_unserved(&served, since, now, self.config.batch).await?;
            report.tasks_given_up += n;
            if n < u64::from(self.config.batch) {
                break;
            }
        }
        Ok(report)
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        let mut lines = Vec::new();
        if self.tasks_given_up > 0 {
            let n = crate::text::count(self.tasks_given_up, "task");
            lines.push(format!("gave up {n} whose handler no live worker serves"));
        }
        for (name, due) in &self.unclaimed_queues {
            lines.push(format!(
                "queue {name} has {} due and no live worker claims from it: start one with --queues {name}, or with none for every queue",
                crate::text::count(*due, "task")
            ));
        }
        (!lines.is_empty()).then(|| lines.join("; "))
    }

    fn warns(&self) -> bool {
        !self.unclaimed_queues.is_empty()
    }
}
