//! The values the [`Store`](super::interface::Store) trait takes and gives besides the model's: which
//! database, retry decisions, bulk filters, queues as listed, wake-up channels.

use chrono::{DateTime, Utc};

use crate::model::*;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
    /// A MySQL or MariaDB server.
    MySql,
}

/// A failed task that needs its next run created (or to be given up on).
#[derive(Debug, Clone)]
pub struct RetryCandidate {
    /// The task.
    pub task_id: TaskId,
    /// Its failed runs in a row.
    pub failures: u32,
    /// Failed runs in a row after which it is given up.
    pub max_attempts: u32,
    /// Its own backoff, if any.
    pub backoff: BackoffSettings,
}

/// A decision about a [`RetryCandidate`].
#[derive(Debug, Clone, Copy)]
pub struct RetryPlan {
    /// The task.
    pub task_id: TaskId,
    /// `RetryAt` or `GiveUp`.
    pub next: NextStep,
}

/// Which tasks a bulk action touches: those of a queue, of a handler and among some ids (None:
/// any). The action's own condition (unfinished, dead, ...) still applies to each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkFilter {
    /// Only tasks of this queue.
    pub queue: Option<String>,
    /// Only tasks of this handler.
    pub handler: Option<String>,
    /// Only these tasks (as a person picks them on a page); the caller bounds how many.
    pub ids: Option<Vec<crate::model::TaskId>>,
}

/// Which finished tasks [`Store::delete_finished`](super::interface::Store::delete_finished) deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Tasks that succeeded.
    Succeeded,
    /// Tasks cancelled.
    Cancelled,
    /// Dead letters: tasks given up on.
    Dead,
    /// All three.
    Any,
}

/// Which ended tasks [`Store::replay`](super::interface::Store::replay) schedules again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Dead letters: tasks given up on.
    Dead,
    /// Cancelled tasks.
    Cancelled,
}

/// Which unfinished tasks [`Store::cancel_matching`](super::interface::Store::cancel_matching) cancels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unfinished {
    /// Not running: waiting for the tasks it runs after or for its time, or awaiting a retry.
    Waiting,
    /// Running tasks.
    Running,
    /// Both.
    #[default]
    Any,
}

/// What [`Store::cancel_matching`](super::interface::Store::cancel_matching) cancelled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cancelled {
    /// Tasks cancelled.
    pub tasks: u64,
    /// Of those, how many were running (their workers stop them).
    pub running: u64,
}

/// What [`Store::wakeups`](super::interface::Store::wakeups) delivers: each channel receives a message soon after its event.
#[derive(Debug)]
pub struct Wakeups {
    /// Tasks were added.
    pub tasks: tokio::sync::mpsc::Receiver<()>,
    /// Running tasks were cancelled.
    pub cancels: tokio::sync::mpsc::Receiver<()>,
}

/// A queue as [`Store::queues`](super::interface::Store::queues) sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// Scheduled tasks due now.
    pub due: u64,
    /// Scheduled tasks due later.
    pub later: u64,
    /// Tasks of it running.
    pub running: u64,
    /// When the longest-waiting due task was due: how far behind the queue is.
    pub oldest_due: Option<DateTime<Utc>>,
    /// Since when it is paused; None: it is not.
    pub paused_on: Option<DateTime<Utc>>,
    /// Runs in flight allowed across all workers, as this process's configuration says (the
    /// store leaves it None; [`crate::Client::queues`] fills it in).
    pub max_running: Option<u32>,
    /// Live workers that claim from it (a worker of an older host, which does not say, counts).
    pub served_by: u32,
}

impl QueueInfo {
    /// A queue that holds nothing.
    pub fn empty(name: String) -> Self {
        QueueInfo {
            name,
            due: 0,
            later: 0,
            running: 0,
            oldest_due: None,
            paused_on: None,
            max_running: None,
            served_by: 0,
        }
    }
}

/// The handlers a runner serves: name → sha256 of the component.
pub type Served = std::collections::BTreeMap<String, String>;
