//! What a run reports: how it ended, what its task does next, and progress on the way.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{RunId, RunStatus, TaskId};

/// What a run's good end writes besides its own rows: the tasks it queued (`enqueue`) and the
/// signals it read (`await-signal`), which no later run is handed once it succeeded.
#[derive(Debug, Clone, Default)]
pub struct QueuedTasks {
    /// The tasks, in the order queued: a task's number is its place here.
    pub tasks: Vec<super::NewTask>,
    /// Those queued to run after others of them (`enqueue-after`): its number, and theirs (each
    /// lower than its own).
    pub after: BTreeMap<u32, Vec<u32>>,
    /// The signals it read.
    pub signals: Vec<super::SignalId>,
}

impl QueuedTasks {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

impl From<Vec<super::NewTask>> for QueuedTasks {
    fn from(tasks: Vec<super::NewTask>) -> Self {
        QueuedTasks { tasks, after: BTreeMap::new(), signals: Vec::new() }
    }
}

/// How a run ended, as the runner reports it to the store.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run that ended.
    pub run_id: RunId,
    /// Its task.
    pub task_id: TaskId,
    /// How it ended, and what comes next.
    pub end: RunEnd,
    /// The handler's last progress report, if any.
    pub percents_completed: Option<u8>,
    /// When it ended.
    pub finished_on: DateTime<Utc>,
    /// How long it ran (from the worker's start of it), in milliseconds.
    pub duration_ms: i64,
    /// The sha256 (hex) of the component that ran it.
    pub component_digest: Option<String>,
    /// The fuel it burnt.
    pub fuel_used: Option<i64>,
    /// What the guest printed, size-capped, one line each.
    pub logs: Option<String>,
    /// The key its fuel is charged to ([`super::ClaimedRun::fuel_key`]).
    pub fuel_key: Option<super::FuelKey>,
    /// A success deletes its task where nothing reads it again
    /// ([`super::ClaimedRun::delete_on_success`]).
    pub delete_on_success: bool,
}

/// A run's end: a success with its results, or a failure of a known kind with its code, message
/// and the decided next step. No other combination can be built.
#[derive(Debug, Clone)]
pub enum RunEnd {
    /// The handler returned results (or none).
    Success {
        /// The final results, a JSON document.
        results: Option<String>,
        /// The tasks it queued (`enqueue`), written with its end.
        children: QueuedTasks,
    },
    /// It failed.
    Failure {
        /// How.
        failure: super::Failure,
        /// What the handler reported before it failed.
        partial_results: Option<String>,
        /// Decided by [`crate::retry::decide`].
        next: NextStep,
    },
    /// It snoozed: its task is due again at `until`, this run neither a success nor a failure.
    Snoozed {
        /// When the task is due again.
        until: DateTime<Utc>,
        /// The signal it waits for (`await-signal`), which makes it due at once when sent.
        awaiting: Option<String>,
        /// What the handler reported before it snoozed.
        partial_results: Option<String>,
        /// The tasks it queued (`enqueue`), written with its end.
        children: QueuedTasks,
    },
}

impl RunOutcome {
    /// The status the run ends with.
    pub fn status(&self) -> RunStatus {
        match &self.end {
            RunEnd::Success { .. } => RunStatus::Success,
            RunEnd::Failure { failure, .. } => failure.status(),
            RunEnd::Snoozed { .. } => RunStatus::Snoozed,
        }
    }

    /// The results written: a success's, or what a failed run reported before it failed.
    pub fn results(&self) -> Option<&str> {
        match &self.end {
            RunEnd::Success { results, .. } => results.as_deref(),
            RunEnd::Failure { partial_results, .. } | RunEnd::Snoozed { partial_results, .. } => {
                partial_results.as_deref()
            }
        }
    }

    /// How it failed; `None` for a success or a snooze.
    pub fn failure(&self) -> Option<&super::Failure> {
        match &self.end {
            RunEnd::Success { .. } | RunEnd::Snoozed { .. } => None,
            RunEnd::Failure { failure, .. } => Some(failure),
        }
    }

    /// The tasks it queued, written with its end if it ended well.
    pub fn children(&self) -> &QueuedTasks {
        static NONE: QueuedTasks = QueuedTasks { tasks: Vec::new(), after: BTreeMap::new(), signals: Vec::new() };
        match &self.end {
            RunEnd::Success { children, .. } | RunEnd::Snoozed { children, .. } => children,
            RunEnd::Failure { .. } => &NONE,
        }
    }

    /// What happens to a failed run's task next; `None` for a success (the task is done) or a
    /// snooze (it is due again at its time).
    pub fn next(&self) -> Option<NextStep> {
        match &self.end {
            RunEnd::Success { .. } | RunEnd::Snoozed { .. } => None,
            RunEnd::Failure { next, .. } => Some(*next),
        }
    }
}

/// What a run stopped from outside (its task cancelled, or the run ended elsewhere) leaves on its
/// row: the lines the guest logged and the fuel it used up to the stop.
#[derive(Debug, Clone)]
pub struct StoppedRun {
    /// The run stopped.
    pub run_id: RunId,
    /// The sha256 (hex) of the component that ran it.
    pub component_digest: Option<String>,
    /// The fuel it burnt up to the stop.
    pub fuel_used: Option<i64>,
    /// What the guest printed up to the stop.
    pub logs: Option<String>,
    /// The key its fuel is charged to ([`super::ClaimedRun::fuel_key`]).
    pub fuel_key: Option<super::FuelKey>,
}

/// How a claimed run leaves its worker, as the store applies it ([`crate::store::Store::release_runs`]).
#[derive(Debug, Clone, Copy)]
pub enum RunRelease<'a> {
    /// It ended: its outcome is written and its task moves on.
    Ended(&'a RunOutcome),
    /// Back to the queue unrun and uncounted, due at `at`, as before its claim.
    PutBack {
        /// The run, still running under its worker.
        run: RunId,
        /// When its task is due again.
        at: DateTime<Utc>,
    },
    /// Ended elsewhere (cancelled, timed out): what it logged and used, kept on its row.
    Stopped(&'a StoppedRun),
}

/// What a [`crate::store::Store::release_runs`] did besides writing outcomes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Released {
    /// The runs put back; one that had ended elsewhere meanwhile is not among them.
    pub put_back: Vec<RunId>,
    /// The stopped runs whose logs and fuel were kept; one whose row is running or scheduled
    /// again, or already has them, is not among them.
    pub kept: Vec<RunId>,
}

/// What a task does after a failed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Schedule the task again, due at this time (its next run is made by the claim that starts it).
    RetryAt(DateTime<Utc>),
    /// Do not run again: the task becomes a dead letter.
    GiveUp,
}

/// A progress report from a running handler.
#[derive(Debug, Clone)]
pub struct ProgressUpdate {
    /// The task whose run reports.
    pub task_id: TaskId,
    /// The run reporting.
    pub run_id: RunId,
    /// How far it is, 0 to 100.
    pub percent: Option<u8>,
    /// Partial results so far (a JSON document).
    pub results: Option<String>,
}
