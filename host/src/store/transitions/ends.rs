//! A success that deletes its task: a queue's `on_success = delete` (issue 51, as BullMQ's
//! `removeOnComplete`). A succeeded task's row is the largest write of the hot path (its second
//! new version, with its index entries); a queue whose successes nobody reads back can have them
//! deleted instead, and a narrow row of `task_ends` written in its place: the task's id, when it
//! ended, its queue, handler and attempt. That row is what the event stream tells of the end
//! (`shared::events`), what the counts count, and what a later `after` finds (a dependency
//! found there has succeeded); it is rotated as finished tasks are.
//!
//! A task is deleted only when nothing reads it again ([`DELETABLE`]), else its success is
//! written as any other:
//! - `keep_row` is set on a task that a wait (`GET /tasks/{id}?wait=`), a dependent
//!   (`after`, whose run may read its results) or a signal names, in the transaction that names it
//!   (locking the row the success locks, so the success sees it);
//! - a task with a unique key (which holds the key for its period and states), with a failed,
//!   timed-out or snoozed run before (its history), or whose run queued children (which read
//!   their parent's row) is kept.
//!
//! `show`, `retry` and a plain `GET` of a deleted task answer that there is no such task.

use std::collections::HashMap;

use super::super::dialect::{Dialect, Ended, RunOf};
use super::super::plumbing::{Cells, ConnOf, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg};
use super::{from, Transition};
use crate::error::Result;
use crate::model::{RunEnd, RunId, RunOutcome, TaskId};

/// The condition on a running task's row that lets its success delete it.
pub const DELETABLE: &str =
    "keep_row IS NULL AND unique_key IS NULL AND run_attempt = 1 AND snoozes = 0 AND task_runs_failed = 0";

/// The columns of `task_ends`, in the order [`write`] binds them.
pub const END_COLUMNS: &str = "id, finished_on, queue, task_handler_class, run_attempt";

/// The successes whose tasks may be deleted, by what their runs say (their rows say the rest).
pub fn wanted<'a>(ok: &[&'a RunOutcome]) -> Vec<&'a RunOutcome> {
    let alone = |o: &RunOutcome| match &o.end {
        RunEnd::Success { children, .. } => children.tasks.is_empty(),
        _ => false,
    };
    ok.iter().copied().filter(|o| o.delete_on_success && alone(o)).collect()
}

/// Delete the tasks of these successes that [`DELETABLE`] lets go, still running these runs, and
/// write their ends: the runs so ended. (PostgreSQL does this in one statement of its own.)
pub async fn delete<D: Dialect>(db: &D, tx: &mut TxOf<D>, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
    let by_task: HashMap<TaskId, &RunOutcome> = ok.iter().map(|o| (o.task_id, *o)).collect();
    let lock = format!(
        "SELECT id, run_id, run_runner_id, run_started_on, task_handler_class, queue, run_attempt FROM task_queue
         WHERE id IN ($1) AND {} AND {DELETABLE} ORDER BY id{}",
        from::<D>(Transition::Succeed),
        D::FOR_UPDATE
    );
    let mut gone: Vec<Gone> = Vec::new();
    let ids: Vec<TaskId> = by_task.keys().copied().collect();
    for chunk in ids.chunks(CHUNK) {
        for r in &db.rows(Some(&mut *tx), &lock, args![chunk]).await? {
            let task = rows::id(r, "id")?;
            let Some(o) = by_task.get(&task).filter(|o| r.int("run_id").ok().flatten() == Some(o.run_id)) else {
                continue;
            };
            let of = RunOf {
                handler: r.text("task_handler_class")?.unwrap_or_default(),
                queue: r.text("queue")?.unwrap_or_default(),
                runner: r.int("run_runner_id")?.unwrap_or(0),
                started_on: r.time("run_started_on")?,
            };
            gone.push(Gone {
                run_id: o.run_id,
                task,
                finished_on: o.finished_on,
                attempt: rows::id(r, "run_attempt")?,
                of,
            });
        }
    }
    let ids: Vec<TaskId> = gone.iter().map(|g| g.task).collect();
    for chunk in ids.chunks(CHUNK) {
        db.exec(Some(&mut *tx), "DELETE FROM task_queue WHERE id IN ($1)", args![chunk]).await?;
    }
    write(db, tx, &gone).await?;
    Ok(gone.into_iter().map(|g| Ended { run_id: g.run_id, of: Some(g.of) }).collect())
}

/// Ids in one statement at most.
const CHUNK: usize = 1_000;

/// A task deleted by its success.
struct Gone {
    run_id: RunId,
    task: TaskId,
    finished_on: chrono::DateTime<chrono::Utc>,
    attempt: i64,
    of: RunOf,
}

/// Write the ends of the tasks deleted, by value.
async fn write<D: Dialect>(db: &D, tx: &mut TxOf<D>, gone: &[Gone]) -> Result<()> {
    for chunk in gone.chunks(CHUNK) {
        let tuples: Vec<String> = (0..chunk.len())
            .map(|i| format!("(${}, ${}, ${}, ${}, ${})", 5 * i + 1, 5 * i + 2, 5 * i + 3, 5 * i + 4, 5 * i + 5))
            .collect();
        let sql = format!("INSERT INTO task_ends ({END_COLUMNS}) VALUES {}", tuples.join(", "));
        let mut values: Vec<Arg<'_>> = Vec::with_capacity(5 * chunk.len());
        for g in chunk {
            values.extend([
                Arg::from(g.task),
                Arg::Time(g.finished_on),
                Arg::from(g.of.queue.as_str()),
                Arg::from(g.of.handler.as_str()),
                Arg::from(g.attempt),
            ]);
        }
        db.exec(Some(&mut *tx), &sql, &values).await?;
    }
    Ok(())
}

/// Keep these tasks' rows when they succeed (a wait, a dependent or a signal names them): those
/// not finished yet. Within the caller's transaction, which holds them locked where it must.
pub async fn keep<D: Dialect>(db: &D, tx: Option<&mut TxOf<D>>, tasks: &[TaskId]) -> Result<u64> {
    let mut n = 0;
    let mut tx = tx;
    for chunk in tasks.chunks(CHUNK) {
        let sql = "UPDATE task_queue SET keep_row = 1 WHERE id IN ($1) AND keep_row IS NULL AND finished_on IS NULL";
        n += db.exec(tx.as_deref_mut(), sql, args![chunk]).await?;
    }
    Ok(n)
}

/// Of `tasks`, those whose success deleted them (`task_ends`), on the caller's connection (a
/// locking read: it sees an end committed since its transaction began).
pub async fn ended_on<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, tasks: &[TaskId]) -> Result<Vec<TaskId>> {
    let sql = format!("SELECT id FROM task_ends WHERE id IN ($1){}", D::FOR_UPDATE);
    let mut found = Vec::new();
    for chunk in tasks.chunks(CHUNK) {
        found.extend(rows::ids(&D::rows_on(conn, &sql, args![chunk]).await?)?);
    }
    Ok(found)
}
