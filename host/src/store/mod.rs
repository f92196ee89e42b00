//! Persistence: one [`Store`] trait, one implementation per database.
//!
//! All SQL lives in the backend files (`sqlite.rs`, ...). The store knows nothing of wasmtime;
//! retry decisions are made by the caller ([`crate::retry`]) and handed in as [`NextStep`]s.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::model::*;

pub mod postgres;
pub mod sqlite;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A failed task that needs its next run created (or to be given up on).
#[derive(Debug, Clone)]
pub struct RetryCandidate {
    pub task_id: TaskId,
    pub failures: u32,
    pub max_retries: u32,
    pub backoff: BackoffSettings,
    /// The latest run's attempt number; the next run gets this plus one.
    pub last_attempt: u32,
}

/// A decision about a [`RetryCandidate`].
#[derive(Debug, Clone, Copy)]
pub struct RetryPlan {
    pub task_id: TaskId,
    pub next_attempt: u32,
    /// `RetryAt` or `GiveUp`.
    pub next: NextStep,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Create or update the tables (idempotent).
    async fn migrate(&self) -> Result<()>;

    // --- tasks -----------------------------------------------------------------------------

    /// Queue tasks with their first run, in one transaction. Inputs are already validated.
    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>>;
    async fn get_task(&self, id: TaskId) -> Result<Option<Task>>;
    async fn runs_of(&self, task_id: TaskId) -> Result<Vec<Run>>;
    async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>>;
    async fn counts(&self) -> Result<QueueCounts>;
    /// Replay a dead letter: reset its failure count and schedule a new run now.
    async fn retry_task(&self, id: TaskId, now: DateTime<Utc>) -> Result<RunId>;

    // --- runners ---------------------------------------------------------------------------

    /// Register a runner unless `limit` runners are already live.
    async fn register_runner(&self, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId>;
    /// Returns false when the runner is no longer `running` (the overseer timed it out).
    async fn heartbeat(&self, runner: RunnerId, now: DateTime<Utc>) -> Result<bool>;
    async fn finish_runner(&self, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()>;
    async fn live_runners(&self) -> Result<Vec<Runner>>;

    // --- runs ------------------------------------------------------------------------------

    /// Atomically claim up to `limit` due scheduled runs of `queues` (priority, then FIFO).
    /// `default_timeout` applies to tasks without their own run timeout.
    async fn claim(
        &self,
        runner: RunnerId,
        queues: &[String],
        limit: u32,
        now: DateTime<Utc>,
        default_timeout: Duration,
    ) -> Result<Vec<ClaimedRun>>;
    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()>;
    /// Write finished runs and update their tasks, in one transaction. A run that is no longer
    /// `running` (timed out meanwhile) is left as it is.
    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> Result<()>;
    /// Whether a scheduled run of `queues` is due, one is running (on any runner), or a failed
    /// task awaits its retry run: what keeps a draining worker going.
    async fn has_due_work(&self, queues: &[String], now: DateTime<Utc>) -> Result<bool>;

    // --- maintenance -----------------------------------------------------------------------

    /// Mark runners `timeout`, and their running runs with them. Returns the runs timed out.
    async fn time_out_runners(&self, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64>;
    /// Time out running runs past their `timeout_on`. Returns how many.
    async fn time_out_overdue_runs(&self, now: DateTime<Utc>, limit: u32) -> Result<u64>;
    /// Failed tasks (error/timeout, not given up) whose next step is not decided yet.
    async fn retry_candidates(&self, limit: u32) -> Result<Vec<RetryCandidate>>;
    async fn apply_retry_plans(&self, plans: &[RetryPlan], now: DateTime<Utc>) -> Result<()>;
    /// Delete up to `batch` successful tasks finished before `before`, with their runs.
    async fn rotate(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;
}

pub type SharedStore = Arc<dyn Store>;

/// Options for opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Apply migrations on open.
    pub migrate: bool,
    pub max_connections: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { migrate: true, max_connections: 4 }
    }
}

/// Open the store a URL names: `sqlite://PATH` or `postgres://USER[:PASSWORD]@HOST[:PORT]/DB`.
pub async fn open(url: &str, options: &StoreOptions) -> Result<SharedStore> {
    let scheme = url.split_once("://").map(|(s, _)| s).or_else(|| url.split_once(':').map(|(s, _)| s));
    let store: SharedStore = match scheme {
        Some("sqlite") => Arc::new(sqlite::SqliteStore::connect(url, options).await?),
        Some("postgres") | Some("postgresql") => Arc::new(postgres::PostgresStore::connect(url, options).await?),
        Some("mysql") | Some("mariadb") => {
            return Err(Error::BadUrl {
                url: url.to_string(),
                reason: "MySQL/MariaDB is not supported yet; use sqlite://PATH or postgres://...".into(),
            })
        }
        Some(other) => {
            return Err(Error::BadUrl {
                url: url.to_string(),
                reason: format!("unknown scheme {other:?}; use sqlite://PATH or postgres://USER@HOST/DB"),
            })
        }
        None => {
            return Err(Error::BadUrl {
                url: url.to_string(),
                reason: "expected a URL such as sqlite://taskhost.db".into(),
            })
        }
    };
    if options.migrate {
        store.migrate().await?;
    }
    Ok(store)
}
