//! Every change of a task's state, each written once: the [`Transition`]s of
//! [`crate::model::lifecycle`] as statements.
//!
//! The shared store's files pick and lock the rows a transition applies to (one task by id, a
//! batch by filter, the overdue runs); the functions here write the change. Each task update is
//! guarded by the condition of the states its transition starts from ([`from`], made from
//! [`Transition::from`]), and a running run by its task's status and run id, so a transition
//! whose task moved on meanwhile changes nothing: the late outcome of a cancelled run, the
//! replay of a running task, a second overseer's retry.
//!
//! **A running run lives on its task's row.** The claim writes it there ([`claimed_task`]: the
//! `run_*` columns of `task_queue`, with the task's status in one row written), and progress
//! updates it there. **A run that succeeds stays there**: its success writes its outcome to its
//! task's row with the task's status ([`kept_run`]: one row written, no run row inserted, the
//! hot path's largest saving), and it is read from there while the task stays succeeded
//! ([`KEPT`](super::sql::KEPT)); a replay writes it to `task_runs` ([`kept_to_runs`]) before the task runs again.
//! The rarer ends (fail, time out, cancel) write the running run to `task_runs` first
//! ([`runs::write_running`]) and then end it there. A run put back leaves no row. Run ids
//! are handed out by the claims (from the sequence of `task_runs` on PostgreSQL, from the
//! counter in `task_counters` elsewhere), so a worker knows its run's id from the start; the
//! `run_*` columns mean something only while the task is running, or succeeded with its run kept,
//! except `run_attempt`, the attempt of the task's latest run, which the next claim counts on from.
//!
//! | transition | written by |
//! |---|---|
//! | add | [`add::add_tasks_in`] (a caller's), [`add::queue_children`] (a run's, with its end); [`deps::wait`] |
//! | intake (a task queued in SQL with a key or `after`) | [`intake::take_in`] |
//! | ready, dependency failed | [`deps::succeeded`], [`deps::ended_badly`], with the end of a task it runs after |
//! | claim | each database's claim statement, with [`claimed_task`]; [`claimed_runs`] |
//! | succeed | each database's batched success, with [`Set`] and [`kept_run`] |
//! | fail, retry / fail, give up | [`runs::finish`] |
//! | time out | [`runs::time_out`] |
//! | put back | [`runs::put_back`] |
//! | retry, give up | [`tasks::retry`], [`tasks::give_up`] |
//! | abandon | [`tasks::abandon`] |
//! | cancel | [`tasks::cancel`] |
//! | replay | [`tasks::replay`], with [`kept_to_runs`] |
//! | signal (due at once) | [`signals::send`]; a run's wait: [`signals::awaiting`], with its snooze |
//!
//! Claims and successes are the hot path: each database writes a batch of them in one or two
//! statements of its own. Every `SET` list on `task_queue`, theirs too, comes from [`Set`],
//! which makes it from the state the transition enters.

pub mod add;
pub mod deps;
pub mod ends;
pub(crate) mod fair;
pub(crate) mod fuel;
pub mod intake;
pub mod runs;
mod set;
pub mod signals;
pub mod tasks;

#[cfg(feature = "sqlite")]
pub use set::release_key;
pub use set::Set;

use std::collections::HashMap;

use super::dialect::{ClaimRequest, Dialect};
use super::rows::ClaimedTask;
use super::sql::{CANCELLED, KEPT, RUNNING, SCHEDULED, SUCCESS, WAITING};
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
/// The overseer found the run's runner dead, or its runner stopped past its grace period
/// with the run unfinished.
pub const LOST: Why = Why {
    code: codes::RUNNER_LOST,
    message: "the runner running this run stopped before it ended (no heartbeat, process gone, or its shutdown grace \
              period over)",
};
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
            TaskState::Waiting => plain.push(WAITING),
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

/// What a claim writes to its task: running ([`Set`]), with its run's id, runner, start and
/// timeout (each an SQL expression), no progress yet, and no run kept (see [`kept_run`]: a
/// replay clears it, but an older version's did not).
pub fn claimed_task(run_id: &str, runner: &str, now: &str, timeout: &str) -> String {
    format!(
        "{}, run_id = {run_id}, run_runner_id = {runner}, run_started_on = {now}, run_timeout_on = {timeout},
         run_percent = 0, run_results = NULL, run_duration_ms = NULL, run_digest = NULL, run_fuel_used = NULL,
         run_logs = NULL",
        Set::of(Transition::Claim, now)
    )
}

/// The version a claimed task's run runs, read in the claim's own statement (as `run_digest`,
/// on `task_queue` unaliased): the one its task is pinned to, or its handler's newest release's;
/// NULL when the handler was never deployed (its plugin is a file of the plugins directory).
pub const RUN_DIGEST: &str = "coalesce(task_queue.pinned_digest, (SELECT r.digest FROM task_handler_releases r
     WHERE r.handler = task_queue.task_handler_class ORDER BY r.id DESC LIMIT 1)) AS run_digest";

/// The columns of `task_runs` a run row takes from its task's running run, as [`RUN_FROM_TASK`]
/// gives them; each insert of a run ended adds the columns of its end.
pub const RUN_COLUMNS: &str = "id, task_queue_id, attempt, created_on, started_on, task_runner_id, timeout_on";

/// The values of [`RUN_COLUMNS`] from the running task `q` (a row of `task_queue`).
pub const RUN_FROM_TASK: &str =
    "q.run_id, q.id, q.run_attempt, q.run_started_on, q.run_started_on, q.run_runner_id, q.run_timeout_on";

/// What a success writes to its task besides [`Set`]: its run's outcome, kept on the row (each
/// argument an SQL expression: results, duration in ms, component digest, fuel used, logs;
/// every column qualified with `q`). Its status is the task's, its end the task's `finished_on`.
pub fn kept_run(q: &str, results: &str, ms: &str, digest: &str, fuel: &str, logs: &str) -> String {
    format!(
        "{q}run_results = {results}, {q}run_percent = 100, {q}run_duration_ms = {ms}, {q}run_digest = {digest}, \
         {q}run_fuel_used = {fuel}, {q}run_logs = {logs}"
    )
}

/// The statement that writes the runs kept on the rows of the tasks `$1` (those
/// [`KEPT`](super::sql::KEPT)) to `task_runs`, as they ended: a replay's first step, before its
/// [`Set`] clears them.
pub fn kept_to_runs() -> String {
    format!(
        "INSERT INTO task_runs ({RUN_COLUMNS}, status, finished_on, results, percents_completed, duration_ms,
             component_digest, fuel_used, logs)
         SELECT {RUN_FROM_TASK}, q.last_status, q.finished_on, q.run_results, 100, q.run_duration_ms, q.run_digest,
             q.run_fuel_used, q.run_logs
         FROM task_queue q WHERE q.id IN ($1) AND {KEPT}"
    )
}

/// The claimed runs, in claim order: each task's run (`started`: task id → run id and attempt,
/// as the claim statement wrote them on the task). A run is made by its claim, never before, and
/// lives on its task's row until it ends (see the module's documentation).
pub fn claimed_runs(
    req: &ClaimRequest<'_>,
    claimed: Vec<ClaimedTask>,
    mut started: HashMap<TaskId, (RunId, i64)>,
) -> Result<Vec<ClaimedRun>> {
    let mut out = Vec::with_capacity(claimed.len());
    for c in claimed {
        let Some((run_id, attempt)) = started.remove(&c.task_id) else {
            let reason = format!("claimed task {} has no run", c.task_id);
            return Err(crate::error::Error::CorruptRow { table: "task_queue", reason });
        };
        out.push(c.into_run(run_id, attempt, req.now, req.default_timeout));
    }
    Ok(out)
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
    fn a_failed_task_is_found_as_each_database_indexes_it() {
        for awaiting in [PostgresDb::AWAITING_RETRY, SqliteDb::AWAITING_RETRY] {
            assert_eq!(Some(awaiting), index("task_queue_failed").filter);
        }
        // MySQL's stand-in is a generated column, NULL outside the partial index's filter.
        let OnMySql::Generated { column, .. } = index("task_queue_failed").mysql else { panic!("not generated") };
        assert_eq!(MySqlDb::AWAITING_RETRY, format!("{column} IS NOT NULL"));
    }

    #[test]
    fn states_of_several_columns_are_alternatives() {
        assert_eq!(
            from::<PostgresDb>(Transition::Cancel),
            "((last_status IN ('waiting', 'scheduled', 'running')) OR (last_status IN ('error', 'timeout') AND gave_up_on IS NULL))"
        );
        assert_eq!(
            from::<PostgresDb>(Transition::Replay),
            "((last_status IN ('success', 'cancelled')) OR (gave_up_on IS NOT NULL))"
        );
        assert_eq!(is::<SqliteDb>(TaskState::Running), "last_status = 'running'");
    }
}
