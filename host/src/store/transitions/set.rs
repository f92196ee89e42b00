//! What a transition writes to its task's row, made from the state it enters
//! ([`Transition::to`]) in one function, [`Set::columns`]: every `UPDATE task_queue` of a
//! transition takes its `SET` list from here, the hot paths' per-database statements included.
//!
//! | entering | writes |
//! |---|---|
//! | scheduled | `last_status`, `scheduled_on` |
//! | running | `last_status` (the claim adds its run's columns) |
//! | awaiting retry | `last_status`: how the run ended (error or timeout) |
//! | a final state | `last_status` (kept by a give-up), `finished_on`, `gave_up_on` (dead), the unique key released unless its `unique_states` keeps it there |
//!
//! Leaving a final state (a replay) clears `finished_on` and `gave_up_on` and the run a success
//! kept on the row (written to `task_runs` first), and holds the key again. Besides, a transition that ends a run in failure counts it (`task_runs_failed + 1`),
//! a success or a replay forgets the failures, a claim counts an attempt and a put-back gives
//! it back, and so does a snooze, which is counted (`snoozes + 1`) and awaits no signal.

use std::fmt;

use super::super::sql::{CANCELLED, RUNNING, SCHEDULED, SUCCESS, WAITING};
use crate::model::{TaskState, Transition, UniqueStates};

/// The column a task's unique key is held in while it is unfinished (or in its `unique_states`).
const KEY: &str = "active_unique_key";

/// The unique key of a task entering the final state `state`: kept when its `unique_states` holds
/// that state (succeeded: `succeeded` or `any`; dead or cancelled: `any`), else let go.
fn key_entering(state: TaskState) -> String {
    let kept: &[UniqueStates] = match state {
        TaskState::Succeeded => &[UniqueStates::Succeeded, UniqueStates::Any],
        _ => &[UniqueStates::Any],
    };
    let kept: Vec<String> = kept.iter().map(|u| format!("'{}'", u.as_str())).collect();
    format!("CASE WHEN unique_states IN ({}) THEN {KEY} END", kept.join(", "))
}

/// The `SET` list of a transition: `format!("UPDATE task_queue SET {} WHERE ...", Set::of(t, "$2"))`.
#[derive(Debug, Clone, Copy)]
pub struct Set<'a> {
    t: Transition,
    at: &'a str,
    ended_as: Option<&'a str>,
    q: &'a str,
    key: bool,
}

impl<'a> Set<'a> {
    /// What `t` writes, made at `at` (an SQL expression: `$2`, `j.f`).
    pub fn of(t: Transition, at: &'a str) -> Self {
        Set { t, at, ended_as: None, q: "", key: true }
    }

    /// The status of the run it ends in failure (an SQL expression), which becomes the task's.
    pub fn ended_as(self, status: &'a str) -> Self {
        Set { ended_as: Some(status), ..self }
    }

    /// Each column qualified with `q` (MySQL's `q.` in an update of two tables).
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub fn qualified(self, q: &'a str) -> Self {
        Set { q, ..self }
    }

    /// Without the unique key, which the caller writes apart (only on the rows that have one,
    /// so the others do not touch its index).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub fn key_apart(self) -> Self {
        Set { key: false, ..self }
    }

    /// The columns written and their values (SQL expressions), in order.
    pub fn columns(&self) -> Vec<(&'static str, String)> {
        let (t, at) = (self.t, self.at);
        let mut out: Vec<(&'static str, String)> = Vec::new();
        let status = match t.to() {
            TaskState::Waiting => Some(WAITING.to_string()),
            TaskState::Scheduled => Some(SCHEDULED.to_string()),
            TaskState::Running => Some(RUNNING.to_string()),
            TaskState::Succeeded => Some(SUCCESS.to_string()),
            TaskState::Cancelled => Some(CANCELLED.to_string()),
            // How the run ended; a give-up ends none and keeps it.
            TaskState::AwaitingRetry | TaskState::Dead => self.ended_as.map(str::to_string),
        };
        out.extend(status.map(|s| ("last_status", s)));
        if t.to() == TaskState::Scheduled {
            out.push(("scheduled_on", at.to_string()));
        }
        if t.to().is_final() {
            out.push(("finished_on", at.to_string()));
            if t.to() == TaskState::Dead {
                out.push(("gave_up_on", at.to_string()));
            }
            out.push((KEY, key_entering(t.to())));
        } else if t.from().iter().all(|s| s.is_final()) {
            // Unfinished again: it holds its key again (a task holding it meanwhile makes this
            // a unique violation, and the caller's transaction is rolled back).
            out.push(("finished_on", "NULL".to_string()));
            out.push(("gave_up_on", "NULL".to_string()));
            out.push((KEY, "unique_key".to_string()));
        }
        if t.counts_a_failure() {
            out.push(("task_runs_failed", "task_runs_failed + 1".to_string()));
        } else if matches!(t, Transition::Succeed | Transition::Replay) {
            out.push(("task_runs_failed", "0".to_string()));
        }
        match t {
            Transition::Claim => out.push(("run_attempt", "run_attempt + 1".to_string())),
            // It ran no guest to its end: the claim that starts it again makes the same attempt.
            Transition::PutBack => out.push(("run_attempt", "run_attempt - 1".to_string())),
            // A snooze uses no attempt; it is counted, for `[tasks] max_snoozes`. It awaits no
            // signal (a run's wait marks the task after).
            Transition::Snooze => {
                out.push(("run_attempt", "run_attempt - 1".to_string()));
                out.push(("snoozes", "snoozes + 1".to_string()));
                out.push(("awaiting_signal", "NULL".to_string()));
                out.push(("awaiting_until", "NULL".to_string()));
            }
            // Run again from the start: its snoozes and waits forgotten with its failures, and
            // the run it kept (written to `task_runs` first: `transitions::kept_to_runs`).
            Transition::Replay => {
                out.push(("snoozes", "0".to_string()));
                out.push(("awaiting_signal", "NULL".to_string()));
                out.push(("awaiting_until", "NULL".to_string()));
                for kept in ["run_duration_ms", "run_digest", "run_fuel_used", "run_logs"] {
                    out.push((kept, "NULL".to_string()));
                }
            }
            _ => {}
        }
        if !self.key {
            out.retain(|(c, _)| *c != KEY);
        }
        out
    }
}

impl fmt::Display for Set<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.columns().iter().map(|(c, v)| format!("{}{c} = {v}", self.q)).collect();
        f.write_str(&list.join(", "))
    }
}

/// The `SET` of the unique keys a [`Set::key_apart`] of `t` left out.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub fn release_key(t: Transition) -> String {
    format!("{KEY} = {}", key_entering(t.to()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transition_writes_the_columns_of_the_state_it_enters_and_no_column_twice() {
        for t in Transition::ALL {
            let set = Set::of(t, "$2").ended_as("$3");
            let columns: Vec<&str> = set.columns().iter().map(|(c, _)| *c).collect();
            let mut unique = columns.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), columns.len(), "{t}: {columns:?}");
            assert_eq!(columns.contains(&"finished_on"), t.to().is_final() || t == Transition::Replay, "{t}");
            assert_eq!(columns.contains(&"scheduled_on"), t.to() == TaskState::Scheduled, "{t}");
            assert_eq!(columns.contains(&KEY), t.to().is_final() || t == Transition::Replay, "{t}");
            assert!(!Set::of(t, "$2").key_apart().columns().iter().any(|(c, _)| *c == KEY), "{t}");
        }
    }

    #[test]
    fn each_transition_reads_as_its_statement_did() {
        let set = |t, status: Option<&str>| match status {
            Some(s) => Set::of(t, "$2").ended_as(s).to_string(),
            None => Set::of(t, "$2").to_string(),
        };
        assert_eq!(set(Transition::Retry, None), "last_status = 'scheduled', scheduled_on = $2");
        assert_eq!(
            set(Transition::FailAndRetry, Some("'error'")),
            "last_status = 'scheduled', scheduled_on = $2, task_runs_failed = task_runs_failed + 1"
        );
        assert_eq!(
            set(Transition::PutBack, None),
            "last_status = 'scheduled', scheduled_on = $2, run_attempt = run_attempt - 1"
        );
        assert_eq!(
            set(Transition::FailAndGiveUp, Some("$3")),
            "last_status = $3, finished_on = $2, gave_up_on = $2, active_unique_key = \
             CASE WHEN unique_states IN ('any') THEN active_unique_key END, task_runs_failed = task_runs_failed + 1"
        );
        assert_eq!(
            set(Transition::GiveUp, None),
            "finished_on = $2, gave_up_on = $2, active_unique_key = CASE WHEN unique_states IN ('any') THEN \
             active_unique_key END"
        );
        assert_eq!(
            set(Transition::TimeOut, Some("'timeout'")),
            "last_status = 'timeout', task_runs_failed = task_runs_failed + 1"
        );
        assert_eq!(
            set(Transition::Replay, None),
            "last_status = 'scheduled', scheduled_on = $2, finished_on = NULL, gave_up_on = NULL, \
             active_unique_key = unique_key, task_runs_failed = 0, snoozes = 0, awaiting_signal = NULL, \
             awaiting_until = NULL, run_duration_ms = NULL, run_digest = NULL, run_fuel_used = NULL, run_logs = NULL"
        );
        assert_eq!(
            Set::of(Transition::Succeed, "r.f").qualified("q.").to_string(),
            "q.last_status = 'success', q.finished_on = r.f, q.active_unique_key = CASE WHEN unique_states IN \
             ('succeeded', 'any') THEN active_unique_key END, q.task_runs_failed = 0"
        );
        assert_eq!(set(Transition::Claim, None), "last_status = 'running', run_attempt = run_attempt + 1");
        assert_eq!(
            set(Transition::Snooze, None),
            "last_status = 'scheduled', scheduled_on = $2, run_attempt = run_attempt - 1, snoozes = snoozes + 1, \
             awaiting_signal = NULL, awaiting_until = NULL"
        );
    }
}
