//! The records of the three tables and their statuses.

use chrono::{DateTime, Utc};
use serde::Serialize;

pub mod failure;
mod input;
mod json;
pub mod lifecycle;
mod limits;
mod new_task;
mod on_success;
mod outcome;
mod rate;
mod signals;
mod status;
mod unique;
pub use failure::{codes, ErrorSource, Failure, FailureKind};
pub use input::TaskInput;
pub use json::{task_json, RunDetail, TaskDetail};
pub use lifecycle::{TaskState, Transition};
pub use limits::{Limit, LimitChange, LimitScope, RunLimits, DEFAULT_WEIGHT};
pub use new_task::*;
pub use on_success::OnSuccess;
pub use outcome::*;
pub use rate::{Grant, Rate};
pub use signals::*;
pub use status::*;
pub use unique::{UniqueStates, MAX_UNIQUE_FOR};

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

/// The result of adding a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Added {
    /// The task queued, or the task that holds its unique key.
    pub id: TaskId,
    /// false when a task holding the same unique key already existed: `id` is that task.
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
    /// Runs that snoozed it (0 after a replay): bounded by `[tasks] max_snoozes`.
    pub snoozes: u32,
    /// The task whose run queued it (`enqueue`), if a run did.
    pub parent_id: Option<TaskId>,
    /// How deep it is under tasks queued by runs (0: queued by a caller).
    pub depth: u32,
    /// While it is waiting: how many of the tasks it runs after have not yet succeeded.
    pub waiting_for: u32,
    /// The signal its last run waits for (`await-signal`), and when that wait times out.
    pub awaiting_signal: Option<String>,
    /// When the wait for `awaiting_signal` times out.
    pub awaiting_until: Option<DateTime<Utc>>,
    /// The queue it is claimed from.
    pub queue: String,
    /// Lower runs first.
    pub priority: i32,
    /// The key whose share it is taken in.
    pub key: Option<String>,
    /// The version of its handler it is pinned to (a deployed component's digest).
    pub version: Option<String>,
    /// While the task is unfinished (or in [`Self::unique_states`]), no other task with this key
    /// is added.
    pub unique_key: Option<String>,
    /// When its unique key is let go, whatever its state (none: no period).
    pub unique_until: Option<DateTime<Utc>>,
    /// In which states it keeps its unique key.
    pub unique_states: UniqueStates,
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

/// A task another runs after, and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Dependency {
    /// The task run after.
    pub id: TaskId,
    /// Its state: the waiting task runs once each is `succeeded`.
    pub state: TaskState,
}

/// A task another runs after, with its last run's results: what the waiting task's run reads
/// (`dependencies`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyResults {
    /// The task run after.
    pub id: TaskId,
    /// Its handler.
    pub handler: String,
    /// Whether it is succeeded (else dead or cancelled, or queued again since).
    pub succeeded: bool,
    /// Its last run's results, unless they were left out.
    pub results: Option<String>,
    /// Its results were left out: with those before them, they were over the bound asked.
    pub results_left_out: bool,
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
    /// How many times its task snoozed so far.
    pub snoozes: u32,
    /// How deep its task is under tasks queued by runs (0: queued by a caller).
    pub depth: u32,
    /// When it was claimed.
    pub started_on: DateTime<Utc>,
    /// When the run times out (its task's run timeout, or the default): the worker stops it
    /// then, before the overseer would.
    pub timeout_on: DateTime<Utc>,
    /// Its task's key (fair shares), if any.
    pub key: Option<String>,
    /// Its task's key, in a queue that weighs its keys by the fuel their runs burn: the run's
    /// fuel is charged to it when it ends (set by the worker, from the limits it read).
    pub fuel_key: Option<FuelKey>,
    /// Its queue deletes its successes (`on_success = delete`): a success of this run deletes
    /// the task where nothing reads it again (set by the worker, from the limits it read).
    pub delete_on_success: bool,
    /// The version of its handler it runs: the digest of a component deployed to the database
    /// (the one its task is pinned to, or the active one when it was claimed); None for a
    /// handler from the plugins directory.
    pub digest: Option<String>,
    /// Why its task's row could not be read, if it could not: then it does not run, and ends
    /// as `unreadable-task` (see `store::rows::ClaimedTask::read_all`).
    pub unreadable: Option<String>,
}

/// A key in a queue that weighs its keys by fuel (a queue's `fuel_per_turn`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FuelKey {
    /// The queue.
    pub queue: String,
    /// The key.
    pub key: String,
}

/// A filter for listing tasks.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only tasks whose latest run has this status.
    pub status: Option<RunStatus>,
    /// Only tasks in this state (a dead letter is `dead`, not `awaiting-retry`, although its
    /// latest run failed).
    pub state: Option<TaskState>,
    /// Only the tasks this task's runs queued.
    pub parent: Option<TaskId>,
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
    /// Waiting for the tasks they run after.
    pub waiting: u64,
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
            // A task's status is never `snoozed`: a snoozed task is scheduled.
            RunStatus::Scheduled | RunStatus::Snoozed => &mut self.scheduled,
            RunStatus::Running => &mut self.running,
            RunStatus::Success => &mut self.success,
            RunStatus::Error => &mut self.error,
            RunStatus::Timeout => &mut self.timeout,
            RunStatus::Cancelled => &mut self.cancelled,
            RunStatus::Waiting => &mut self.waiting,
        };
        *slot = n;
    }
}
