//! Every change of a task's state, each written once: the [`Transition`]s of
//! [`crate::model::lifecycle`] as statements.
//!
//! The shared store's files pick and lock the rows a transition applies to (one task by id, a
//! batch by filter, the overdue runs); the functions here write the change. Each task update is
//! guarded by the condition of the states its transition starts from ([`from`], made from
//! [`Transition::from`]), and each run update by the run's own status, so a transition whose
//! task moved on meanwhile changes nothing: the late outcome of a cancelled run, the replay of a
//! running task, a second overseer's retry.
//!
//! | transition | written by |
//! |---|---|
//! | claim | each database's claim statement, with [`claimed_task`] and [`started_run`]; [`claimed_runs`] |
//! | succeed | each database's batched success, with [`succeeded_run`] and [`succeeded_task`] |
//! | fail, retry / fail, give up | [`runs::finish`] |
//! | time out | [`runs::time_out`] |
//! | put back | [`runs::put_back`] |
//! | retry, give up | [`tasks::retry`], [`tasks::give_up`] |
//! | abandon | [`tasks::abandon`] |
//! | cancel | [`tasks::cancel`] |
//! | replay | [`tasks::replay`] |
//!
//! Claims and successes are the hot path: each database writes a batch of them in one or two
//! statements of its own, whose `SET` lists come from here.

pub mod runs;
pub mod tasks;

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::dialect::{ClaimRequest, Dialect};
use super::plumbing::TxOf;
use super::rows::{self, ClaimedTask};
use super::sql::{args, CANCELLED, ERROR, RUNNING, SCHEDULED, SUCCESS, TIMEOUT};
use crate::error::Result;
use crate::model::{codes, ClaimedRun, RunId, RunnerId, TaskId, TaskState, Transition};

/// Why a run ended that its handler did not end: the error code and message it is given.
#[derive(Debug, Clone, Copy)]
pub struct Why<'a> {
    /// One of the host's [`codes`].
    pub code: &'a str,
    /// Why, for a person.
    pub message: &'a str,
}

/// An operator cancelled the task.
pub const CANCELLED_BY_OPERATOR: Why = Why { code: codes::CANCELLED, message: "cancelled by an operator" };
/// The overseer found the run past its `timeout_on`.
pub const TIMED_OUT: Why = Why { code: codes::RUN_TIMEOUT, message: "the run did not finish within its run timeout" };
/// The overseer found the run's runner dead.
pub const LOST: Why =
    Why { code: codes::RUNNER_LOST, message: "the runner running this run stopped (no heartbeat or process gone)" };
/// No live worker serves the task's handler.
pub const UNSERVED: Why = Why {
    code: codes::HANDLER_NOT_FOUND,
    message: "no live worker has served this handler for the overseer's horizon",
};

/// The condition on `task_queue` (unaliased) of the tasks in `state`.
pub fn is(state: TaskState) -> String {
    is_any(&[state])
}

/// The condition on `task_queue` of the tasks in any of `states`. States that are one
/// `last_status` each are one `IN` list (spelled as the partial indexes' conditions are, so that
/// SQLite uses them); the others are alternatives.
pub fn is_any(states: &[TaskState]) -> String {
    let mut plain = Vec::new();
    let mut other = Vec::new();
    for s in states {
        match s {
            TaskState::Scheduled => plain.push(SCHEDULED),
            TaskState::Running => plain.push(RUNNING),
            TaskState::Succeeded => plain.push(SUCCESS),
            TaskState::Cancelled => plain.push(CANCELLED),
            TaskState::AwaitingRetry => {
                other.push(format!("last_status IN ({ERROR}, {TIMEOUT}) AND gave_up_on IS NULL"))
            }
            TaskState::Dead => other.push("gave_up_on IS NOT NULL".to_string()),
        }
    }
    let words: Vec<String> = plain.iter().map(ToString::to_string).collect();
    match words.len() {
        0 => {}
        1 => other.insert(0, format!("last_status = {}", words[0])),
        _ => other.insert(0, format!("last_status IN ({})", words.join(", "))),
    }
    match other.len() {
        0 => "1 = 0".to_string(),
        1 => other.remove(0),
        _ => format!("(({}))", other.join(") OR (")),
    }
}

/// The condition on `task_queue` of the tasks `t` may start from.
pub fn from(t: Transition) -> String {
    is_any(t.from())
}

/// What a claim writes to its task.
pub fn claimed_task() -> String {
    format!("last_status = {RUNNING}")
}

/// What a claim writes to its run: started at `now` by `runner`, timing out at `timeout` (each
/// an SQL expression of the database's statement).
pub fn started_run(now: &str, runner: &str, timeout: &str) -> String {
    format!("status = {RUNNING}, started_on = {now}, task_runner_id = {runner}, timeout_on = {timeout}")
}

/// What a success writes to its run; `v` spells the database's expression of each value of the
/// outcome: `f` (finished), `res` (results), `ms` (duration), `dg` (digest), `fu` (fuel), `lg`
/// (logs). Only a run still running may succeed: the statement's own condition.
pub fn succeeded_run(v: impl Fn(&str) -> String) -> String {
    format!(
        "status = {SUCCESS}, finished_on = {}, results = {}, percents_completed = 100, duration_ms = {},
         component_digest = {}, fuel_used = {}, logs = {}",
        v("f"),
        v("res"),
        v("ms"),
        v("dg"),
        v("fu"),
        v("lg")
    )
}

/// What a success writes to its task, finished at `finished`, and the condition its task must
/// meet. The unique key is released by [`RELEASE_KEY`], in the same statement or apart.
pub fn succeeded_task(finished: &str) -> String {
    format!("last_status = {SUCCESS}, task_runs_failed = 0, finished_on = {finished}")
}

/// Frees a finished task's unique key for a new task.
pub const RELEASE_KEY: &str = "active_unique_key = NULL";

/// The claimed runs, in claim order: each task's run as the claim started it (`started`: task
/// id → run id and attempt), or one created already running for a task that had no scheduled
/// run (which should not happen).
pub async fn claimed_runs<D: Dialect>(
    db: &D,
    mut tx: Option<&mut TxOf<D>>,
    req: &ClaimRequest<'_>,
    claimed: Vec<ClaimedTask>,
    mut started: HashMap<TaskId, (RunId, i64)>,
) -> Result<Vec<ClaimedRun>> {
    let mut out = Vec::with_capacity(claimed.len());
    for c in claimed {
        let (run_id, attempt) = match started.remove(&c.task_id) {
            Some(found) => found,
            None => {
                let timeout_on = c.timeout_on(req.now, req.default_timeout);
                insert_running(db, tx.as_deref_mut(), c.task_id, req.runner, req.now, timeout_on).await?
            }
        };
        out.push(c.into_run(run_id, attempt, req.now, req.default_timeout));
    }
    Ok(out)
}

async fn insert_running<D: Dialect>(
    db: &D,
    mut tx: Option<&mut TxOf<D>>,
    task_id: TaskId,
    runner: RunnerId,
    now: DateTime<Utc>,
    timeout_on: DateTime<Utc>,
) -> Result<(RunId, i64)> {
    let attempt = i64::from(last_attempt(db, tx.as_deref_mut(), task_id).await?) + 1;
    let sql = format!(
        "INSERT INTO task_runs (task_queue_id, attempt, created_on, started_on, status, task_runner_id, timeout_on)
         VALUES ($1, $2, $3, $3, {RUNNING}, $4, $5)"
    );
    let id = db.insert(tx, &sql, args![task_id, attempt, now, runner, timeout_on]).await?;
    Ok((id, attempt))
}

/// Insert a scheduled run of a task; its id.
async fn insert_run<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    task_id: TaskId,
    attempt: u32,
    now: DateTime<Utc>,
) -> Result<RunId> {
    let sql = "INSERT INTO task_runs (task_queue_id, attempt, created_on) VALUES ($1, $2, $3)";
    db.insert(Some(tx), sql, args![task_id, attempt, now]).await
}

/// The latest attempt number of a task's runs (0 when it has none).
async fn last_attempt<D: Dialect>(db: &D, tx: Option<&mut TxOf<D>>, task_id: TaskId) -> Result<u32> {
    let sql = "SELECT coalesce(max(attempt), 0) AS last FROM task_runs WHERE task_queue_id = $1";
    let found = db.rows(tx, sql, args![task_id]).await?;
    Ok(match found.first() {
        Some(r) => rows::n32(rows::id(r, "last")?),
        None => 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::DONE;

    #[test]
    fn the_finished_tasks_condition_is_the_partial_indexs_own() {
        assert_eq!(is_any(&[TaskState::Succeeded, TaskState::Cancelled]), DONE);
    }

    #[test]
    fn states_of_several_columns_are_alternatives() {
        assert_eq!(
            from(Transition::Cancel),
            "((last_status IN ('scheduled', 'running')) OR (last_status IN ('error', 'timeout') AND gave_up_on IS NULL))"
        );
        assert_eq!(from(Transition::Replay), "((last_status = 'cancelled') OR (gave_up_on IS NOT NULL))");
        assert_eq!(is(TaskState::Running), "last_status = 'running'");
    }
}
