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
//! | claim | each database's claim statement, with [`claimed_task`] and [`new_run`]; [`claimed_runs`] |
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
use super::sql::{args, CANCELLED, RUNNING, SCHEDULED, SUCCESS};
use crate::error::Result;
use crate::model::{codes, ClaimedRun, RunId, TaskId, TaskState, Transition};

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

/// The condition on `task_queue` of the tasks of queues not paused: part of every claim's pick,
/// so a pause holds from the next claim on without a read of its own before each claim.
pub const NOT_PAUSED: &str = "queue NOT IN (SELECT queue FROM task_queue_pauses)";

/// The condition on `task_queue` (unaliased) of the tasks in `state`.
pub fn is<D: Dialect + ?Sized>(state: TaskState) -> String {
    is_any::<D>(&[state])
}

/// The condition on `task_queue` of the tasks in any of `states`. States that are one
/// `last_status` each are one `IN` list (spelled as the partial indexes' conditions are, so that
/// SQLite uses them); the others are alternatives, a failed task awaiting its retry spelled as
/// the database indexes it ([`Dialect::AWAITING_RETRY`]).
pub fn is_any<D: Dialect + ?Sized>(states: &[TaskState]) -> String {
    let mut plain = Vec::new();
    let mut other = Vec::new();
    for s in states {
        match s {
            TaskState::Scheduled => plain.push(SCHEDULED),
            TaskState::Running => plain.push(RUNNING),
            TaskState::Succeeded => plain.push(SUCCESS),
            TaskState::Cancelled => plain.push(CANCELLED),
            TaskState::AwaitingRetry => other.push(D::AWAITING_RETRY.to_string()),
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
pub fn from<D: Dialect + ?Sized>(t: Transition) -> String {
    is_any::<D>(t.from())
}

/// What a claim writes to its task.
pub fn claimed_task() -> String {
    format!("last_status = {RUNNING}")
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

/// The claimed runs, in claim order: each task's run, made now, already running (`started`:
/// task id → run id and attempt, when the database's claim statement made them itself). A run is
/// made by its claim, never before: a task awaiting its first run or a retry has no run row, so
/// a claim writes one row a run (no insert at the add or the failure, then its update here).
/// Its attempt follows the task's latest run, if any.
pub async fn claimed_runs<D: Dialect>(
    db: &D,
    tx: Option<&mut TxOf<D>>,
    req: &ClaimRequest<'_>,
    claimed: Vec<ClaimedTask>,
    mut started: HashMap<TaskId, (RunId, i64)>,
) -> Result<Vec<ClaimedRun>> {
    let unstarted: Vec<&ClaimedTask> = claimed.iter().filter(|c| !started.contains_key(&c.task_id)).collect();
    if !unstarted.is_empty() {
        started.extend(db.start_runs(tx, req, &unstarted).await?);
    }
    let mut out = Vec::with_capacity(claimed.len());
    for c in claimed {
        let Some((run_id, attempt)) = started.remove(&c.task_id) else {
            let reason = format!("claimed task {} has no running run", c.task_id);
            return Err(crate::error::Error::CorruptRow { table: "task_runs", reason });
        };
        out.push(c.into_run(run_id, attempt, req.now, req.default_timeout));
    }
    Ok(out)
}

/// The table and columns of the run a claim starts; see [`new_run`].
pub const NEW_RUN: &str =
    "task_runs (task_queue_id, attempt, created_on, started_on, status, task_runner_id, timeout_on)";

/// The values of [`NEW_RUN`] for the task whose id is `task`, started at `now` by `runner`,
/// timing out at `timeout` (each an SQL expression): numbered after the task's latest run.
pub fn new_run(task: &str, now: &str, runner: &str, timeout: &str) -> String {
    format!(
        "{task}, 1 + coalesce((SELECT max(p.attempt) FROM task_runs p WHERE p.task_queue_id = {task}), 0),
         {now}, {now}, {RUNNING}, {runner}, {timeout}"
    )
}

/// Insert a running run of each of `tasks` (claimed): one statement
/// a distinct timeout (most claims have one), returning the runs' ids (MySQL, which cannot
/// return them, has its own).
pub async fn start_runs<D: Dialect + ?Sized>(
    db: &D,
    mut tx: Option<&mut TxOf<D>>,
    req: &ClaimRequest<'_>,
    tasks: &[&ClaimedTask],
) -> Result<HashMap<TaskId, (RunId, i64)>> {
    let mut by_timeout: std::collections::BTreeMap<DateTime<Utc>, Vec<TaskId>> = Default::default();
    for c in tasks {
        by_timeout.entry(c.timeout_on(req.now, req.default_timeout)).or_default().push(c.task_id);
    }
    let insert = format!(
        "INSERT INTO {NEW_RUN} SELECT {} FROM task_queue q WHERE q.id IN ($1)
         RETURNING task_queue_id, id, attempt",
        new_run("q.id", "$2", "$3", "$4")
    );
    let mut found = HashMap::with_capacity(tasks.len());
    for (timeout_on, ids) in &by_timeout {
        for r in &db.rows(tx.as_deref_mut(), &insert, args![ids, req.now, req.runner, *timeout_on]).await? {
            found.insert(rows::id(r, "task_queue_id")?, (rows::id(r, "id")?, rows::id(r, "attempt")?));
        }
    }
    Ok(found)
}

#[cfg(all(test, feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod tests {
    use super::*;
    use crate::store::mysql::MySqlDb;
    use crate::store::postgres::PostgresDb;
    use crate::store::schema::{OnMySql, INDEXES};
    use crate::store::sql::DONE;
    use crate::store::sqlite::SqliteDb;

    fn index(name: &str) -> &'static crate::store::schema::Index {
        INDEXES.iter().find(|i| i.name == name).expect("index")
    }

    #[test]
    fn the_finished_tasks_condition_is_the_partial_indexs_own() {
        assert_eq!(is_any::<PostgresDb>(&[TaskState::Succeeded, TaskState::Cancelled]), DONE);
    }

    #[test]
    fn a_failed_task_and_a_running_run_are_found_as_each_database_indexes_them() {
        for (awaiting, running) in
            [(PostgresDb::AWAITING_RETRY, PostgresDb::RUNNING_RUN), (SqliteDb::AWAITING_RETRY, SqliteDb::RUNNING_RUN)]
        {
            assert_eq!(Some(awaiting), index("task_queue_failed").filter);
            assert_eq!(Some(running), index("task_runs_running").filter);
        }
        // MySQL's stand-ins are generated columns, NULL outside the partial index's filter.
        for (condition, name) in
            [(MySqlDb::AWAITING_RETRY, "task_queue_failed"), (MySqlDb::RUNNING_RUN, "task_runs_running")]
        {
            let OnMySql::Generated { column, .. } = index(name).mysql else { panic!("{name} is not generated") };
            assert_eq!(condition, format!("{column} IS NOT NULL"));
        }
        assert_eq!(MySqlDb::overdue_run("$1"), "running_timeout_on <= $1");
    }

    #[test]
    fn states_of_several_columns_are_alternatives() {
        assert_eq!(
            from::<PostgresDb>(Transition::Cancel),
            "((last_status IN ('scheduled', 'running')) OR (last_status IN ('error', 'timeout') AND gave_up_on IS NULL))"
        );
        assert_eq!(from::<PostgresDb>(Transition::Replay), "((last_status = 'cancelled') OR (gave_up_on IS NOT NULL))");
        assert_eq!(is::<SqliteDb>(TaskState::Running), "last_status = 'running'");
    }
}
