//! The records of the three tables and their statuses.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

pub mod failure;
mod input;
mod json;
pub mod lifecycle;
mod outcome;
pub use failure::{codes, ErrorSource, Failure, FailureKind};
pub use input::TaskInput;
pub use json::{task_json, RunDetail, TaskDetail};
pub use lifecycle::{TaskState, Transition};
pub use outcome::*;

/// A task's id (`task_queue.id`).
pub type TaskId = i64;
/// A run's id (`task_runs.id`).
pub type RunId = i64;
/// A runner's id (`task_runners.id`): one worker process.
pub type RunnerId = i64;

/// Whether `name` can name a handler (and its plugin file): letters, digits, `-` and `_`, at
/// most 128 bytes (no paths).
pub fn valid_handler_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Status of a run, and of a task (a task's `last_status` is the status of its latest run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum RunStatus {
    /// Created, waiting for a runner (and, for a task, for its `scheduled_on`).
    Scheduled,
    /// Claimed by a runner.
    Running,
    /// Ended well.
    Success,
    /// A known failure: the handler returned an error, trapped or broke a limit.
    Error,
    /// Not finished in time, or its runner died.
    Timeout,
    /// Cancelled by an operator: a scheduled task never starts, a running run is stopped.
    Cancelled,
}

impl RunStatus {
    /// Every status, in the order of a run's life.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Scheduled,
        RunStatus::Running,
        RunStatus::Success,
        RunStatus::Error,
        RunStatus::Timeout,
        RunStatus::Cancelled,
    ];

    /// The word stored in the database and shown to people.
    pub const fn as_str(self) -> &'static str {
        match self {
            RunStatus::Scheduled => "scheduled",
            RunStatus::Running => "running",
            RunStatus::Success => "success",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// A finished run counts as failed when it ended in error or timeout.
    pub fn is_failure(self) -> bool {
        matches!(self, RunStatus::Error | RunStatus::Timeout)
    }
}

/// Status of a runner (a worker process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum RunnerStatus {
    /// Working.
    Running,
    /// The runner stopped by itself (shutdown, drain, memory cap).
    Success,
    /// The overseer found it dead: stale heartbeat or a vanished process.
    Timeout,
}

impl RunnerStatus {
    /// The word stored in the database and shown to people.
    pub const fn as_str(self) -> &'static str {
        match self {
            RunnerStatus::Running => "running",
            RunnerStatus::Success => "success",
            RunnerStatus::Timeout => "timeout",
        }
    }
}

/// A status word read from the database or the command line that is not one we know.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown status {0:?}")]
pub struct UnknownStatus(pub String);

impl FromStr for RunStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL.into_iter().find(|st| st.as_str() == s).ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

impl FromStr for RunnerStatus {
    type Err = UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "running" => Ok(RunnerStatus::Running),
            "success" => Ok(RunnerStatus::Success),
            "timeout" => Ok(RunnerStatus::Timeout),
            other => Err(UnknownStatus(other.to_string())),
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for RunnerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Per-task retry backoff; `None` fields fall back to the worker's [`crate::retry::Backoff`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct BackoffSettings {
    /// Delay before the first retry, in milliseconds; doubles with each further failure.
    pub base_ms: Option<i64>,
    /// Upper bound of the delay, in milliseconds.
    pub max_ms: Option<i64>,
}

/// What a caller asks to queue. Build one with [`NewTask::new`] and the `with_*` methods.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The handler (plugin name) that runs it.
    pub handler: String,
    /// The task's data, a JSON document (validated by the client before it is written).
    pub data: String,
    /// When to run it; `None` = now.
    pub scheduled_on: Option<DateTime<Utc>>,
    /// Runs it may have before it is given up on, the first included: each failed run in a row is
    /// an attempt, and the task is a dead letter once this many have failed ([`DEFAULT_MAX_ATTEMPTS`];
    /// at least 1). Celery's `max_retries=N` is `max_attempts` N + 1.
    pub max_attempts: u32,
    /// Who queued it, for people reading the queue (free text).
    pub queued_by: Option<String>,
    /// The queue it is claimed from ([`DEFAULT_QUEUE`]).
    pub queue: String,
    /// Lower runs first.
    pub priority: i32,
    /// While a task with this key is unfinished, adding another returns the existing one.
    pub unique_key: Option<String>,
    /// `None` = the system-wide default (1 day).
    pub run_timeout: Option<Duration>,
    /// This task's retry backoff; unset parts are the worker's.
    pub backoff: BackoffSettings,
}

/// Runs a task may have (each failed run in a row an attempt) before it is given up on, unless
/// it says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Longest handler name, queue name, unique key and `queued_by`, in bytes, on every database.
pub const MAX_HANDLER_BYTES: usize = 128;
/// Longest queue name, in bytes.
pub const MAX_QUEUE_BYTES: usize = 128;
/// Longest unique key, in bytes.
pub const MAX_UNIQUE_KEY_BYTES: usize = 255;
/// Longest `queued_by`, in bytes.
pub const MAX_QUEUED_BY_BYTES: usize = 255;
/// The queue of a task that names none.
pub const DEFAULT_QUEUE: &str = "default";
/// A worker's queue list that means every queue (and a name no task may have).
pub const EVERY_QUEUE: &str = "*";

impl NewTask {
    /// A task for `handler` with `data` (a JSON document), due now, in the default queue.
    pub fn new(handler: impl Into<String>, data: impl Into<String>) -> Self {
        NewTask {
            handler: handler.into(),
            data: data.into(),
            scheduled_on: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            queued_by: None,
            queue: DEFAULT_QUEUE.to_string(),
            priority: 0,
            unique_key: None,
            run_timeout: None,
            backoff: BackoffSettings::default(),
        }
    }
    /// Due at `at` instead of now.
    pub fn with_scheduled_on(mut self, at: DateTime<Utc>) -> Self {
        self.scheduled_on = Some(at);
        self
    }
    /// Given up on after `n` failed runs in a row (at least 1: the first run is an attempt).
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }
    /// The old name of [`NewTask::with_max_attempts`], the same number (0 is taken as 1).
    #[deprecated(note = "the same number is `with_max_attempts`")]
    pub fn with_max_retries(self, n: u32) -> Self {
        self.with_max_attempts(n.max(1))
    }
    /// Who queued it.
    pub fn with_queued_by(mut self, who: impl Into<String>) -> Self {
        self.queued_by = Some(who.into());
        self
    }
    /// In `queue` instead of the default.
    pub fn with_queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
    /// Claimed before tasks of a higher `priority` (lower runs first).
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    /// Not added while an unfinished task holds `key` (that task is returned).
    pub fn with_unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }
    /// Each run may take at most `timeout`.
    pub fn with_run_timeout(mut self, timeout: Duration) -> Self {
        self.run_timeout = Some(timeout);
        self
    }
    /// Its own retry backoff.
    pub fn with_backoff(mut self, backoff: BackoffSettings) -> Self {
        self.backoff = backoff;
        self
    }
}

/// Runs in flight allowed at once across all workers, per queue and per handler: the
/// operator's `[queues.NAME] max_running` and `[handlers.NAME] max_running`, enforced in the
/// claim (see [`crate::store::shared`]'s limited claim).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Queue name → runs of it in flight at most.
    pub queues: std::collections::BTreeMap<String, u32>,
    /// Handler name → runs of it in flight at most.
    pub handlers: std::collections::BTreeMap<String, u32>,
}

impl RunLimits {
    /// The largest limit a configuration may set.
    pub const MAX: u32 = 1_000_000;

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.handlers.is_empty()
    }

    /// Whether a claim of `queues` and `handlers` (None: any) touches a limit.
    pub fn apply_to(&self, queues: &[String], handlers: Option<&[String]>) -> bool {
        queues.iter().any(|q| self.queues.contains_key(q))
            || match handlers {
                Some(hs) => hs.iter().any(|h| self.handlers.contains_key(h)),
                None => !self.handlers.is_empty(),
            }
    }
}

/// The result of adding a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Added {
    /// The task queued, or the unfinished task that holds its unique key.
    pub id: TaskId,
    /// false when an unfinished task with the same unique key already existed: `id` is that task.
    pub created: bool,
}

/// A row of `task_queue`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Task {
    /// Its id.
    pub id: TaskId,
    /// When it was queued.
    pub queued_on: DateTime<Utc>,
    /// Who queued it (free text).
    pub queued_by: Option<String>,
    /// When the next run is due (the original schedule, or the retry time after a failure).
    pub scheduled_on: DateTime<Utc>,
    /// The handler (plugin name) that runs it.
    pub handler: String,
    /// Stored as text; written out as the JSON it is.
    #[serde(serialize_with = "json::stored")]
    #[cfg_attr(feature = "serve", schema(value_type = serde_json::Value))]
    pub data: String,
    /// Where the task is in its life ([`TaskState::of`] its `last_status` and `gave_up_on`).
    pub state: TaskState,
    /// The status of its latest run.
    pub last_status: RunStatus,
    /// Runs it may have before it is given up on: a dead letter once this many in a row failed.
    pub max_attempts: u32,
    /// Failed runs in a row (0 after a success or a replay).
    pub task_runs_failed: u32,
    /// The queue it is claimed from.
    pub queue: String,
    /// Lower runs first.
    pub priority: i32,
    /// While the task is unfinished, no other task with this key is added.
    pub unique_key: Option<String>,
    /// Seconds a run may take (None: the worker's default).
    pub run_timeout_secs: Option<i64>,
    /// Its own retry backoff, if any.
    pub backoff: BackoffSettings,
    /// Set when the task will not be retried again (a dead letter): its attempts spent, a
    /// non-retryable error or a missing handler.
    pub gave_up_on: Option<DateTime<Utc>>,
    /// A dead letter's last error, as `code: message`, in a list of dead letters only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A row of `task_runs`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Run {
    /// Its id.
    pub id: RunId,
    /// Its task.
    pub task_id: TaskId,
    /// Its number among its task's runs (1: the first).
    pub attempt: u32,
    /// When it was created (scheduled).
    pub created_on: DateTime<Utc>,
    /// When a runner claimed it.
    pub started_on: Option<DateTime<Utc>>,
    /// 0 to 100, as the handler reported it; 100 on success.
    pub percents_completed: u8,
    /// When it ended.
    pub finished_on: Option<DateTime<Utc>>,
    /// The final (or latest partial) results, written out as the JSON they are.
    #[serde(serialize_with = "json::stored_or_null")]
    #[cfg_attr(feature = "serve", schema(value_type = Option<serde_json::Value>))]
    pub results: Option<String>,
    /// Where it is: scheduled, running, or how it ended.
    pub status: RunStatus,
    /// Why it failed: a host code ([`codes`]) or the handler's own.
    pub error_code: Option<String>,
    /// The failure, in words.
    pub error_message: Option<String>,
    /// The runner that claimed it.
    pub runner_id: Option<RunnerId>,
    /// How long it ran, in milliseconds.
    pub duration_ms: Option<i64>,
    /// The sha256 (hex) of the component that ran it.
    pub component_digest: Option<String>,
    /// The fuel it burnt.
    pub fuel_used: Option<i64>,
    /// Written out as a list of lines.
    #[serde(serialize_with = "json::lines")]
    #[cfg_attr(feature = "serve", schema(value_type = Vec<String>))]
    pub logs: Option<String>,
}

impl Run {
    /// Who produced this run's error: the host exactly when its code is one of the host's codes,
    /// which handlers cannot return (theirs are stored as `guest-CODE`).
    pub fn error_source(&self) -> Option<ErrorSource> {
        let code = self.error_code.as_deref()?;
        Some(if codes::is_host(code) { ErrorSource::Host } else { ErrorSource::Guest })
    }
}

/// A row of `task_runners`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Runner {
    /// Its id.
    pub id: RunnerId,
    /// Its process id on its host.
    pub process_id: u32,
    /// Its host: name, boot id and PID namespace (which processes it can see).
    pub host_name: String,
    /// When it registered.
    pub started_on: DateTime<Utc>,
    /// When it stopped or was found dead.
    pub finished_on: Option<DateTime<Utc>>,
    /// Running, stopped by itself, or found dead.
    pub status: RunnerStatus,
    /// Its latest heartbeat.
    pub heartbeat_on: DateTime<Utc>,
    /// The handlers it serves (claims tasks of), each with the sha256 of its component; None when
    /// it has not said.
    pub handlers: Option<std::collections::BTreeMap<String, String>>,
    /// The queues it claims from (`["*"]`: every queue); None when it has not said.
    pub queues: Option<Vec<String>>,
}

impl Runner {
    /// Whether it claims tasks of `queue`. One that has not said (an older host) is taken to
    /// claim from every queue: a warning that no worker serves a queue must never be false.
    pub fn claims_from(&self, queue: &str) -> bool {
        self.queues.as_ref().is_none_or(|qs| qs.iter().any(|q| q == queue || q == EVERY_QUEUE))
    }
}

/// A run a runner has just claimed, with what it needs to execute it.
#[derive(Debug, Clone)]
pub struct ClaimedRun {
    /// The run claimed.
    pub run_id: RunId,
    /// Its task.
    pub task_id: TaskId,
    /// Its attempt number.
    pub attempt: u32,
    /// The handler that runs it.
    pub handler: String,
    /// Its task's queue.
    pub queue: String,
    /// When the run was due: it waited from then to `started_on`.
    pub due_on: DateTime<Utc>,
    /// Its task's data (a JSON document).
    pub data: String,
    /// Who queued its task.
    pub queued_by: Option<String>,
    /// Its task's attempts, for the decision after a failure.
    pub max_attempts: u32,
    /// Its task's failed runs in a row so far.
    pub task_runs_failed: u32,
    /// Its task's own backoff.
    pub backoff: BackoffSettings,
    /// When it was claimed.
    pub started_on: DateTime<Utc>,
    /// When the run times out (its task's run timeout, or the default): the worker stops it
    /// then, before the overseer would.
    pub timeout_on: DateTime<Utc>,
}

/// A filter for listing tasks.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only tasks whose latest run has this status.
    pub status: Option<RunStatus>,
    /// Only tasks in this state (a dead letter is `dead`, not `awaiting-retry`, although its
    /// latest run failed).
    pub state: Option<TaskState>,
    /// Only tasks of this queue.
    pub queue: Option<String>,
    /// Only tasks of this handler.
    pub handler: Option<String>,
    /// Only dead letters (tasks given up on).
    pub dead: bool,
    /// Only tasks whose data contains this text (case-sensitive).
    pub text: Option<String>,
    /// At most this many (None: all).
    pub limit: Option<u32>,
    /// Skip this many (for paging).
    pub offset: u32,
    /// A cursor: only tasks after this id in the order asked for (below it, newest first).
    pub after: Option<TaskId>,
    /// Newest first (by id) instead of oldest first.
    pub newest_first: bool,
}

/// Counts of tasks by status, for the demo and monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueCounts {
    /// Waiting for their time or a worker.
    pub scheduled: u64,
    /// Held by a worker.
    pub running: u64,
    /// Succeeded.
    pub success: u64,
    /// Whose latest run failed (awaiting a retry, or dead).
    pub error: u64,
    /// Whose latest run timed out (awaiting a retry, or dead).
    pub timeout: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Given up on (counted in `error` or `timeout` too).
    pub dead: u64,
}

impl QueueCounts {
    /// Set the count of one status.
    pub fn set(&mut self, status: RunStatus, n: u64) {
        let slot = match status {
            RunStatus::Scheduled => &mut self.scheduled,
            RunStatus::Running => &mut self.running,
            RunStatus::Success => &mut self.success,
            RunStatus::Error => &mut self.error,
            RunStatus::Timeout => &mut self.timeout,
            RunStatus::Cancelled => &mut self.cancelled,
        };
        *slot = n;
    }
}
