//! A success that deletes its task: a queue's `on_success = delete` (issue 51, as BullMQ's
//! `removeOnComplete`). A succeeded task's row is the largest write of the hot path (its second
//! new version, with its index entries); a queue whose successes nobody reads back can have them
//! deleted instead, and their ends written in bulk to `task_ends`: one row for the tasks of a queue,
//! handler and span of ids ([`SPAN`]) a batch deletes, with when the batch ended and the tasks' ids as text
//! (`12,15,16`), their count, least and greatest id and sum. That row is what the event stream
//! tells of those ends (`shared::events`), what the counts count, and what a later `after` finds (a
//! dependency found there has succeeded: [`Lookup`]); it is rotated as finished tasks are. One
//! row a batch, not a row a task: a row a task, with its index entries, wrote a third as much
//! again to PostgreSQL's log as the rest of the task's life.
//!
//! A task is deleted only when nothing reads it again ([`DELETABLE`]), else its success is
//! written as any other:
//! - `keep_row` is set on a task that a wait (`GET /tasks/{id}?wait=`), a dependent
//!   (`after`, whose run may read its results; one queued in SQL by `taskhost_add`'s own write,
//!   migrations `*_sql_after_keeps.sql`) or a signal names, in the transaction that names it
//!   (locking the row the success locks, so the success sees it);
//! - a task with a unique key (which holds the key for its period and states), with a failed,
//!   timed-out or snoozed run before (its history), or whose run queued children (which read
//!   their parent's row) is kept.
//!
//! `show`, `retry`, a signal and a `GET` of a deleted task answer that it succeeded and was
//! deleted, and when (`Error::TaskDeleted`, the API's 410 `deleted`), from its end.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::super::dialect::{Dialect, Ended, RunOf};
use super::super::plumbing::{Cells, ConnOf, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg};
use super::{from, Transition};
use crate::error::{Error, Result};
use crate::model::{OnSuccess, RunEnd, RunId, RunOutcome, TaskId};

/// The condition on a running task's row that lets its success delete it. (A task deleted is
/// so at its first attempt: its end's attempt is 1.)
pub const DELETABLE: &str =
    "keep_row IS NULL AND unique_key IS NULL AND run_attempt = 1 AND snoozes = 0 AND task_runs_failed = 0";

/// The columns of `task_ends`, in the order [`write`] binds them (`max_id` is its key: a task is
/// in one row).
pub const END_COLUMNS: &str = "max_id, finished_on, queue, task_handler_class, n, min_id, ids_sum, ids";

/// The ids of a row of ends lie in one span of this many (`id / SPAN` alike: a batch's deleted
/// tasks are written a row a queue, handler and span), so a lookup reads the rows of one span:
/// at most this many ids in all, however long after newer ones a task ended. (`taskhost_add` in
/// SQL reads spans of this many too: migrations `*_sql_after_a_deleted_task.sql`. Never change it.)
pub const SPAN: i64 = 4096;

/// The rows that may hold tasks of one span from `$1` to `$2`: those whose greatest id lies from
/// `$1` to the span's last id, `$3`, and whose least is at most `$2` (by the key, `max_id`).
const COVERING: &str = "SELECT finished_on, queue, task_handler_class, ids FROM task_ends
     WHERE max_id >= $1 AND max_id <= $3 AND min_id <= $2";

/// A lookup of tasks of one span among the ends: [`COVERING`] with [`Lookup::args`].
#[derive(Debug)]
pub struct Lookup {
    /// The tasks looked for, ascending.
    pub ids: Vec<TaskId>,
    /// The span's last id.
    last: TaskId,
}

impl Lookup {
    /// The lookups of `ids` (any order, repeats allowed), a span each, in id order.
    pub fn of(ids: &[TaskId]) -> Vec<Lookup> {
        let mut spans: BTreeMap<i64, Vec<TaskId>> = BTreeMap::new();
        for &id in ids {
            spans.entry(id.div_euclid(SPAN)).or_default().push(id);
        }
        let lookup = |(span, mut ids): (i64, Vec<TaskId>)| {
            ids.sort_unstable();
            ids.dedup();
            Lookup { ids, last: span.saturating_mul(SPAN).saturating_add(SPAN - 1) }
        };
        spans.into_iter().map(lookup).collect()
    }

    /// The statement.
    pub fn sql(&self) -> &'static str {
        COVERING
    }

    /// Its arguments.
    pub fn args(&self) -> [Arg<'static>; 3] {
        let (first, last) = (self.ids.first().copied().unwrap_or(0), self.ids.last().copied().unwrap_or(0));
        [Arg::from(first), Arg::from(last), Arg::from(self.last)]
    }

    /// Of the rows the statement read, those holding tasks looked for, each narrowed to them.
    pub fn found(&self, rows: &[impl Cells]) -> Result<Vec<EndsRow>> {
        let mut found = Vec::new();
        for r in rows {
            let mut row = EndsRow::read(r)?;
            row.ids.retain(|id| self.ids.binary_search(id).is_ok());
            if !row.ids.is_empty() {
                found.push(row);
            }
        }
        Ok(found)
    }
}

/// The successes whose tasks may be deleted, by what their runs say (their rows say the rest).
pub fn wanted<'a>(ok: &[&'a RunOutcome]) -> Vec<&'a RunOutcome> {
    let alone = |o: &RunOutcome| match &o.end {
        RunEnd::Success { children, .. } => children.tasks.is_empty(),
        _ => false,
    };
    ok.iter().copied().filter(|o| o.delete_on_success && alone(o)).collect()
}

/// Delete the tasks of these successes (`wanted`) that [`DELETABLE`] lets go, still running these
/// runs, and write their ends: the runs so ended. Every task of the batch's successes (`all`) is
/// locked first, in id order, as every writer locks tasks: the rest are written after, and a
/// lock taken on one of a lower id after one deleted could deadlock with an add locking both.
/// (PostgreSQL deletes in one statement of its own, which locks only those it deletes: a lock
/// there is a write to its log.)
pub async fn delete<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    wanted: &[&RunOutcome],
    all: &[&RunOutcome],
) -> Result<Vec<Ended>> {
    let by_task: std::collections::HashMap<TaskId, &RunOutcome> = wanted.iter().map(|o| (o.task_id, *o)).collect();
    let lock = format!(
        "SELECT id, run_id, run_runner_id, run_started_on, task_handler_class, queue,
             CASE WHEN {} AND {DELETABLE} THEN 1 ELSE 0 END AS deletable
         FROM task_queue WHERE id IN ($1) ORDER BY id{}",
        from::<D>(Transition::Succeed),
        D::FOR_UPDATE
    );
    let mut gone: Vec<(TaskId, RunId, DateTime<Utc>, RunOf)> = Vec::new();
    let mut ids: Vec<TaskId> = all.iter().map(|o| o.task_id).collect();
    ids.sort_unstable();
    ids.dedup();
    for chunk in ids.chunks(CHUNK) {
        for r in &db.rows(Some(&mut *tx), &lock, args![chunk]).await? {
            let task = rows::id(r, "id")?;
            let deletable = r.int("deletable")? == Some(1);
            let run = r.int("run_id")?;
            let Some(o) = by_task.get(&task).filter(|o| deletable && run == Some(o.run_id)) else {
                continue;
            };
            let of = RunOf {
                handler: r.text("task_handler_class")?.unwrap_or_default(),
                queue: r.text("queue")?.unwrap_or_default(),
                runner: r.int("run_runner_id")?.unwrap_or(0),
                started_on: r.time("run_started_on")?,
            };
            gone.push((task, o.run_id, o.finished_on, of));
        }
    }
    let ids: Vec<TaskId> = gone.iter().map(|g| g.0).collect();
    for chunk in ids.chunks(CHUNK) {
        db.exec(Some(&mut *tx), "DELETE FROM task_queue WHERE id IN ($1)", args![chunk]).await?;
    }
    // One row of ends a queue, handler and span, ended when the batch's last one did.
    let mut ends: Batch<'_> = BTreeMap::new();
    for (task, _, at, of) in &gone {
        let end = ends.entry((&of.queue, &of.handler, task.div_euclid(SPAN))).or_insert((*at, Vec::new()));
        end.0 = end.0.max(*at);
        end.1.push(*task);
    }
    for ((queue, handler, _), (at, ids)) in &mut ends {
        ids.sort_unstable();
        write(db, tx, queue, handler, *at, ids).await?;
    }
    Ok(gone.into_iter().map(|(_, run_id, _, of)| Ended { run_id, of: Some(of) }).collect())
}

/// The ends of one batch: a queue, handler and span's, when the last ended and the tasks.
type Batch<'a> = BTreeMap<(&'a str, &'a str, i64), (DateTime<Utc>, Vec<TaskId>)>;

/// Ids in one statement at most.
const CHUNK: usize = 1_000;

/// Write the ends of `ids` (sorted), of one queue, handler and span, at `at`: one row.
async fn write<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    queue: &str,
    handler: &str,
    at: DateTime<Utc>,
    ids: &[TaskId],
) -> Result<()> {
    let (Some(&min), Some(&max)) = (ids.first(), ids.last()) else { return Ok(()) };
    let sum = ids.iter().fold(0i64, |s, id| s.wrapping_add(*id));
    let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let sql = format!("INSERT INTO task_ends ({END_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
    let values = [
        Arg::from(max),
        Arg::Time(at),
        Arg::from(queue),
        Arg::from(handler),
        Arg::from(ids.len() as i64),
        Arg::from(min),
        Arg::from(sum),
        Arg::from(list.as_str()),
    ];
    db.exec(Some(tx), &sql, &values).await?;
    Ok(())
}

/// A row of `task_ends`, read.
#[derive(Debug, Clone)]
pub struct EndsRow {
    pub finished_on: DateTime<Utc>,
    pub queue: String,
    pub handler: String,
    pub ids: Vec<TaskId>,
}

impl EndsRow {
    /// From a row of `finished_on`, `queue`, `task_handler_class` and `ids`.
    pub fn read(r: &impl Cells) -> Result<EndsRow> {
        let corrupt = |reason: String| Error::CorruptRow { table: "task_ends", reason };
        let list = r.text("ids")?.unwrap_or_default();
        let ids = list
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().parse::<TaskId>().map_err(|_| corrupt(format!("{s:?} is not a task id"))))
            .collect::<Result<Vec<_>>>()?;
        let finished_on = r.time("finished_on")?.ok_or_else(|| corrupt("no finished_on".into()))?;
        let (queue, handler) =
            (r.text("queue")?.unwrap_or_default(), r.text("task_handler_class")?.unwrap_or_default());
        Ok(EndsRow { finished_on, queue, handler, ids })
    }
}

/// Keep these tasks' rows when they succeed (a wait or a signal names them): those not finished
/// yet; only those of a queue that deletes its successes now when `only_deleting` (a wait: read
/// first, so that where no queue does, as by default, nothing is written). Within the caller's
/// transaction, which holds them locked where it must.
pub async fn keep<D: Dialect>(db: &D, tx: Option<&mut TxOf<D>>, tasks: &[TaskId], only_deleting: bool) -> Result<u64> {
    let mut tx = tx;
    let mut queues = Vec::new();
    if only_deleting {
        let sql = format!("SELECT name FROM task_run_limits WHERE on_success = '{}'", OnSuccess::Delete.as_str());
        for r in &db.rows(tx.as_deref_mut(), &sql, &[]).await? {
            queues.extend(r.text("name")?.as_deref().and_then(|n| n.strip_prefix("queue:")).map(str::to_string));
        }
        if queues.is_empty() {
            return Ok(0);
        }
    }
    let mut n = 0;
    for chunk in tasks.chunks(CHUNK) {
        n += match only_deleting {
            true => db.exec(tx.as_deref_mut(), &format!("{KEEP} AND queue IN ($2)"), args![chunk, &queues[..]]).await?,
            false => db.exec(tx.as_deref_mut(), KEEP, args![chunk]).await?,
        };
    }
    Ok(n)
}

/// Keep these tasks' rows when they succeed, as [`keep`] does whatever their queue, on the
/// caller's connection (an add's `after`, in its transaction).
pub async fn keep_on<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, tasks: &[TaskId]) -> Result<()> {
    for chunk in tasks.chunks(CHUNK) {
        D::exec_on(conn, KEEP, args![chunk]).await?;
    }
    Ok(())
}

/// Marks unfinished tasks to be kept when they succeed.
const KEEP: &str = "UPDATE task_queue SET keep_row = 1 WHERE id IN ($1) AND keep_row IS NULL AND finished_on IS NULL";

/// Of `tasks`, those whose success deleted them (`task_ends`), on the caller's connection, up to
/// the first span holding one that is not there (the caller refuses it: no more is read).
pub async fn ended_on<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, tasks: &[TaskId]) -> Result<Vec<TaskId>> {
    let mut found = Vec::new();
    for lookup in Lookup::of(tasks) {
        let rows = lookup.found(&D::rows_on(conn, lookup.sql(), &lookup.args()).await?)?;
        let before = found.len();
        found.extend(rows.into_iter().flat_map(|r| r.ids));
        if found.len() - before < lookup.ids.len() {
            break;
        }
    }
    Ok(found)
}

/// Of `tasks` (any order), those whose success deleted them, each with its handler: what is
/// said of a dependency no longer in `task_queue` (in `tx` when given).
pub async fn deleted<D: Dialect>(
    db: &D,
    mut tx: Option<&mut TxOf<D>>,
    tasks: &[TaskId],
) -> Result<BTreeMap<TaskId, String>> {
    let mut found = BTreeMap::new();
    for lookup in Lookup::of(tasks) {
        for row in lookup.found(&db.rows(tx.as_deref_mut(), lookup.sql(), &lookup.args()).await?)? {
            found.extend(row.ids.iter().map(|&id| (id, row.handler.clone())));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_are_a_span_each_in_id_order_with_the_ids_sorted_once() {
        let found = Lookup::of(&[SPAN + 5, 3, SPAN * 3, 7, 3, SPAN - 1]);
        let spans: Vec<(Vec<TaskId>, TaskId)> = found.iter().map(|l| (l.ids.clone(), l.last)).collect();
        assert_eq!(
            spans,
            [(vec![3, 7, SPAN - 1], SPAN - 1), (vec![SPAN + 5], 2 * SPAN - 1), (vec![SPAN * 3], 4 * SPAN - 1)]
        );
    }
}
