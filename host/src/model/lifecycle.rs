//! A task's life: the states it can be in and the moves between them, as types.
//!
//! A task's state is read from two columns of `task_queue`: `last_status` (the status of its
//! latest run) and `gave_up_on` (set once it will not run again). [`TaskState::of`] is that
//! reading, and every [`Transition`] says from which states it may start and where it ends.
//! The store writes each transition in one place (`store/transitions.rs`), and refuses one whose
//! task is not in a state it starts from: a late outcome of a cancelled run, the replay of a
//! running task. The state table of docs/queue.md is [`table`], checked by a test.

use std::fmt;

use serde::Serialize;

use super::RunStatus;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum TaskState {
    /// Added to run after other tasks, waiting until each has succeeded: never claimed.
    Waiting,
    /// Waiting for its `scheduled_on`, then for a worker to claim it.
    Scheduled,
    /// A worker holds its run.
    Running,
    /// Its run failed (timed out, or its worker died) and the overseer has not yet decided
    /// between a retry and giving up.
    AwaitingRetry,
    /// Its last run succeeded. Final until an operator runs it again.
    Succeeded,
    /// Given up on: no retries left, a failure that cannot be retried, or a handler no worker
    /// serves. A dead letter, kept until replayed or deleted.
    Dead,
    /// Cancelled by an operator. Final until replayed.
    Cancelled,
}

impl TaskState {
    /// Every state, in the order of a task's life.
    pub const ALL: [TaskState; 7] = [
        TaskState::Waiting,
        TaskState::Scheduled,
        TaskState::Running,
        TaskState::AwaitingRetry,
        TaskState::Succeeded,
        TaskState::Dead,
        TaskState::Cancelled,
    ];

    /// The state of a task whose latest run is `last_status`, given up on or not.
    pub fn of(last_status: RunStatus, given_up: bool) -> TaskState {
        match (last_status, given_up) {
            // A task's status is never `snoozed` (a snooze schedules it); read as scheduled.
            (RunStatus::Scheduled | RunStatus::Snoozed, false) => TaskState::Scheduled,
            (RunStatus::Waiting, false) => TaskState::Waiting,
            (RunStatus::Running, false) => TaskState::Running,
            (RunStatus::Success, _) => TaskState::Succeeded,
            (RunStatus::Cancelled, _) => TaskState::Cancelled,
            (RunStatus::Error | RunStatus::Timeout, false) => TaskState::AwaitingRetry,
            // Only a failed task is given up on; a scheduled or running one with the mark would
            // be a broken row, and reads as what the mark says.
            (_, true) => TaskState::Dead,
        }
    }

    /// Its name, as the docs and the API spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskState::Waiting => "waiting",
            TaskState::Scheduled => "scheduled",
            TaskState::Running => "running",
            TaskState::AwaitingRetry => "awaiting-retry",
            TaskState::Succeeded => "succeeded",
            TaskState::Dead => "dead",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// The states a task will not leave unless an operator replays it.
    pub const FINAL: [TaskState; 3] = [TaskState::Succeeded, TaskState::Dead, TaskState::Cancelled];

    /// Whether the task will not run again unless an operator replays it.
    pub fn is_final(self) -> bool {
        Self::FINAL.contains(&self)
    }

    /// Whether `t` may start from this state.
    pub fn allows(self, t: Transition) -> bool {
        t.from().contains(&self)
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TaskState {
    type Err = super::UnknownStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TaskState::ALL.into_iter().find(|st| st.as_str() == s).ok_or_else(|| super::UnknownStatus(s.to_string()))
    }
}

/// A move of a task from one state to another: each written once, in `store/transitions.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// The last task a waiting task runs after succeeded (or ended badly, for a task that runs
    /// anyway): it is due.
    Ready,
    /// A task a waiting task runs after is dead or was cancelled: it is cancelled too.
    DependencyFailed,
    /// A worker takes a due task and starts its run, made by the claim.
    Claim,
    /// The run succeeded.
    Succeed,
    /// The run failed and the worker scheduled the next attempt after its backoff.
    FailAndRetry,
    /// The run failed for good: no retries left, or a failure that cannot be retried.
    FailAndGiveUp,
    /// The run asked to be run later (`snooze`): the task is due again after its snooze, the
    /// attempt given back, the snooze counted.
    Snooze,
    /// The run outlived its run timeout, or its worker stopped heartbeating; the overseer ends it.
    TimeOut,
    /// The worker returns a run it will not finish (it is stopping, or its memory cap is
    /// reached), uncounted, to be claimed again.
    PutBack,
    /// The overseer schedules the next attempt of a timed-out task.
    Retry,
    /// The overseer gives up on a timed-out task that has no retries left.
    GiveUp,
    /// The overseer gives up on a due task whose handler no live worker serves.
    Abandon,
    /// An operator cancels an unfinished task; a running run is stopped.
    Cancel,
    /// An operator schedules a finished task again, its failures forgotten: a dead or cancelled
    /// one to finish it, a succeeded one to run it again (its next run a new attempt).
    Replay,
}

impl Transition {
    /// Every transition, in the order of the docs' table.
    pub const ALL: [Transition; 14] = [
        Transition::Ready,
        Transition::DependencyFailed,
        Transition::Claim,
        Transition::Succeed,
        Transition::FailAndRetry,
        Transition::FailAndGiveUp,
        Transition::Snooze,
        Transition::TimeOut,
        Transition::PutBack,
        Transition::Retry,
        Transition::GiveUp,
        Transition::Abandon,
        Transition::Cancel,
        Transition::Replay,
    ];

    /// The states it may start from.
    pub const fn from(self) -> &'static [TaskState] {
        use TaskState::*;
        match self {
            Transition::Ready | Transition::DependencyFailed => &[Waiting],
            Transition::Claim | Transition::Abandon => &[Scheduled],
            Transition::Succeed
            | Transition::FailAndRetry
            | Transition::FailAndGiveUp
            | Transition::Snooze
            | Transition::TimeOut
            | Transition::PutBack => &[Running],
            Transition::Retry | Transition::GiveUp => &[AwaitingRetry],
            Transition::Cancel => &[Waiting, Scheduled, Running, AwaitingRetry],
            Transition::Replay => &[Succeeded, Dead, Cancelled],
        }
    }

    /// The state it ends in.
    pub const fn to(self) -> TaskState {
        match self {
            Transition::Claim => TaskState::Running,
            Transition::Succeed => TaskState::Succeeded,
            Transition::Ready
            | Transition::FailAndRetry
            | Transition::Snooze
            | Transition::PutBack
            | Transition::Retry
            | Transition::Replay => TaskState::Scheduled,
            Transition::TimeOut => TaskState::AwaitingRetry,
            Transition::FailAndGiveUp | Transition::GiveUp | Transition::Abandon => TaskState::Dead,
            Transition::Cancel | Transition::DependencyFailed => TaskState::Cancelled,
        }
    }

    /// Its name in the docs' table.
    pub const fn as_str(self) -> &'static str {
        match self {
            Transition::Ready => "ready",
            Transition::DependencyFailed => "dependency failed",
            Transition::Claim => "claim",
            Transition::Succeed => "succeed",
            Transition::FailAndRetry => "fail, retry",
            Transition::FailAndGiveUp => "fail, give up",
            Transition::Snooze => "snooze",
            Transition::TimeOut => "time out",
            Transition::PutBack => "put back",
            Transition::Retry => "retry",
            Transition::GiveUp => "give up",
            Transition::Abandon => "abandon",
            Transition::Cancel => "cancel",
            Transition::Replay => "replay",
        }
    }

    /// Who makes it.
    pub const fn by(self) -> &'static str {
        match self {
            Transition::Claim
            | Transition::Succeed
            | Transition::FailAndRetry
            | Transition::FailAndGiveUp
            | Transition::Snooze
            | Transition::PutBack => "worker",
            Transition::TimeOut | Transition::Retry | Transition::GiveUp | Transition::Abandon => "overseer",
            Transition::Cancel | Transition::Replay => "operator (CLI, API, dashboard)",
            // In the transaction of that task's end, whoever makes it.
            Transition::Ready => "the end of the last task it runs after",
            Transition::DependencyFailed => "the end of a task it runs after",
        }
    }

    /// Whether it counts a failed run on the task (`task_runs_failed`).
    pub const fn counts_a_failure(self) -> bool {
        matches!(self, Transition::FailAndRetry | Transition::FailAndGiveUp | Transition::TimeOut | Transition::Abandon)
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transitions as a Markdown table (docs/queue.md's, checked against this by a test).
pub fn table() -> String {
    let mut out = String::from("| transition | from | to | made by |\n|---|---|---|---|\n");
    for t in Transition::ALL {
        let from: Vec<&str> = t.from().iter().map(|s| s.as_str()).collect();
        out.push_str(&format!("| {} | {} | {} | {} |\n", t, from.join(", "), t.to(), t.by()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_is_reached_and_can_be_left() {
        for s in TaskState::ALL {
            // A task is added scheduled, or waiting when it runs after others.
            let reached =
                matches!(s, TaskState::Scheduled | TaskState::Waiting) || Transition::ALL.iter().any(|t| t.to() == s);
            assert!(reached, "{s} is never reached");
            assert!(Transition::ALL.iter().any(|t| s.allows(*t)), "{s} is never left");
        }
    }

    #[test]
    fn final_states_are_left_only_by_an_operators_replay() {
        for s in TaskState::ALL.into_iter().filter(|s| s.is_final()) {
            for t in Transition::ALL.into_iter().filter(|t| s.allows(*t)) {
                assert_eq!(t, Transition::Replay, "{s} left by {t}");
            }
        }
        assert!(TaskState::Succeeded.allows(Transition::Replay), "a succeeded task can be run again");
    }

    #[test]
    fn the_readme_shows_the_transitions_as_they_are() {
        let readme = include_str!("../../../docs/queue.md");
        let start = "<!-- transitions: made by model::lifecycle::table -->\n";
        let Some(at) = readme.find(start) else { panic!("docs/queue.md lacks {start:?}") };
        let shown = &readme[at + start.len()..];
        let end = shown.find("<!--").unwrap_or(shown.len());
        assert_eq!(&shown[..end], table(), "docs/queue.md's transitions table differs from lifecycle::table()");
    }

    #[test]
    fn the_columns_read_as_the_states() {
        assert_eq!(TaskState::of(RunStatus::Scheduled, false), TaskState::Scheduled);
        assert_eq!(TaskState::of(RunStatus::Timeout, false), TaskState::AwaitingRetry);
        assert_eq!(TaskState::of(RunStatus::Error, false), TaskState::AwaitingRetry);
        assert_eq!(TaskState::of(RunStatus::Error, true), TaskState::Dead);
        assert_eq!(TaskState::of(RunStatus::Cancelled, false), TaskState::Cancelled);
        assert_eq!(TaskState::of(RunStatus::Waiting, false), TaskState::Waiting);
    }
}
