//! What a run reports: how it ended, what its task does next, and progress on the way.

use chrono::{DateTime, Utc};

use super::{RunId, RunStatus, TaskId};

/// How a run ended, as the runner reports it to the store.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: RunId,
    pub task_id: TaskId,
    pub end: RunEnd,
    pub percents_completed: Option<u8>,
    pub finished_on: DateTime<Utc>,
    pub duration_ms: i64,
    pub component_digest: Option<String>,
    pub fuel_used: Option<i64>,
    pub logs: Option<String>,
}

/// A run's end: a success with its results, or a failure of a known kind with its code, message
/// and the decided next step. No other combination can be built.
#[derive(Debug, Clone)]
pub enum RunEnd {
    Success {
        results: Option<String>,
    },
    Failure {
        failure: super::Failure,
        /// What the handler reported before it failed.
        partial_results: Option<String>,
        /// Decided by [`crate::retry::decide`].
        next: NextStep,
    },
}

impl RunOutcome {
    pub fn status(&self) -> RunStatus {
        match &self.end {
            RunEnd::Success { .. } => RunStatus::Success,
            RunEnd::Failure { failure, .. } => failure.status(),
        }
    }

    /// The results written: a success's, or what a failed run reported before it failed.
    pub fn results(&self) -> Option<&str> {
        match &self.end {
            RunEnd::Success { results } => results.as_deref(),
            RunEnd::Failure { partial_results, .. } => partial_results.as_deref(),
        }
    }

    pub fn failure(&self) -> Option<&super::Failure> {
        match &self.end {
            RunEnd::Success { .. } => None,
            RunEnd::Failure { failure, .. } => Some(failure),
        }
    }

    /// What happens to the task next; `None` for a success (the task is done).
    pub fn next(&self) -> Option<NextStep> {
        match &self.end {
            RunEnd::Success { .. } => None,
            RunEnd::Failure { next, .. } => Some(*next),
        }
    }
}

/// What a run stopped from outside (its task cancelled, or the run ended elsewhere) leaves on its
/// row: the lines the guest logged and the fuel it used up to the stop.
#[derive(Debug, Clone)]
pub struct StoppedRun {
    pub run_id: RunId,
    pub component_digest: Option<String>,
    pub fuel_used: Option<i64>,
    pub logs: Option<String>,
}

/// What a task does after a failed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Create a new scheduled run due at this time.
    RetryAt(DateTime<Utc>),
    /// Do not run again: the task becomes a dead letter.
    GiveUp,
}

/// A progress report from a running handler.
#[derive(Debug, Clone)]
pub struct ProgressUpdate {
    pub run_id: RunId,
    pub percent: Option<u8>,
    pub results: Option<String>,
}
