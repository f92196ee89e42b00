//! The statuses of runs and runners, as the database stores them and the API names them.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

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
    /// A run that ended asking to be run later (`snooze`): neither a success nor a failure. Its
    /// task is then scheduled; a task's own status is never this.
    Snoozed,
    /// A task added to run after others, waiting until each has succeeded. A task's status
    /// only: it has no run until it is claimed.
    Waiting,
}

impl RunStatus {
    /// Every status, in the order of a task's life (waiting, before it is scheduled, is a task's only).
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Waiting,
        RunStatus::Scheduled,
        RunStatus::Running,
        RunStatus::Success,
        RunStatus::Error,
        RunStatus::Timeout,
        RunStatus::Cancelled,
        RunStatus::Snoozed,
    ];

    /// Whether a task's latest run may give the task this status (never `snoozed`: a snooze
    /// schedules the task).
    pub const fn is_of_tasks(self) -> bool {
        !matches!(self, RunStatus::Snoozed)
    }

    /// The word stored in the database and shown to people.
    pub const fn as_str(self) -> &'static str {
        match self {
            RunStatus::Scheduled => "scheduled",
            RunStatus::Running => "running",
            RunStatus::Success => "success",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Snoozed => "snoozed",
            RunStatus::Waiting => "waiting",
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
