//! Actions on many tasks at once: replaying dead letters or cancelled tasks and deleting finished
//! tasks by filter (cancelling is in `cancel.rs`).
//! Each works in bounded batches, one transaction a batch, and is safe while workers run: the
//! rows a batch picks are locked (`FOR UPDATE SKIP LOCKED`; SQLite serializes writers).

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::sql::{args, Arg, DONE};
use super::super::transitions::ends::EndsRow;
use super::super::transitions::{self, is};
use super::super::types::{BulkFilter, Finished, Replay};
use crate::error::Result;
use crate::model::{TaskId, TaskState};

/// Tasks one batch touches at most.
pub const BATCH: u32 = 1000;

/// ` AND queue = $n AND task_handler_class = $m AND id IN ($k)` for the filter's parts, appended
/// to `values`.
pub(super) fn filtered<'a>(f: &'a BulkFilter, values: &mut Vec<Arg<'a>>) -> String {
    let mut sql = String::new();
    for (column, value) in [("queue", &f.queue), ("task_handler_class", &f.handler)] {
        if let Some(v) = value {
            values.push(Arg::Text(Some(v)));
            sql.push_str(&format!(" AND {column} = ${}", values.len()));
        }
    }
    if let Some(ids) = &f.ids {
        values.push(Arg::Ints(ids));
        sql.push_str(&format!(" AND id IN (${})", values.len()));
    }
    sql
}

/// Delete one batch of up to `batch` finished tasks (`which`) finished before `before`, with
/// their runs; how many.
pub async fn delete_finished_batch<D: Dialect>(
    db: &D,
    which: Finished,
    f: &BulkFilter,
    before: DateTime<Utc>,
    batch: u32,
) -> Result<u64> {
    // DONE stands in each condition on finished_on so that the partial index serves it.
    let finished = match which {
        Finished::Succeeded => format!("{DONE} AND {} AND finished_on < $1", is::<D>(TaskState::Succeeded)),
        Finished::Cancelled => format!("{DONE} AND {} AND finished_on < $1", is::<D>(TaskState::Cancelled)),
        Finished::Dead => format!("{} AND gave_up_on < $1", is::<D>(TaskState::Dead)),
        Finished::Any => {
            format!("(({DONE} AND finished_on < $1) OR ({} AND gave_up_on < $1))", is::<D>(TaskState::Dead))
        }
    };
    let order = if which == Finished::Dead || which == Finished::Any { "id" } else { "finished_on" };
    let n = delete_batch(db, &finished, order, f, before, batch).await?;
    // The successes that deleted their tasks too (`transitions::ends`).
    let ends = match which {
        Finished::Succeeded | Finished::Any => delete_ends_batch(db, f, before, batch).await?,
        Finished::Cancelled | Finished::Dead => 0,
    };
    Ok(n + ends)
}

/// The overseer's rotation: one batch of tasks that succeeded or were cancelled before `before`,
/// oldest first (dead letters are kept until deleted by hand).
pub async fn rotate_batch<D: Dialect>(db: &D, before: DateTime<Utc>, batch: u32) -> Result<u64> {
    let done = format!("{DONE} AND finished_on < $1");
    let n = delete_batch(db, &done, "finished_on", &BulkFilter::default(), before, batch).await?;
    Ok(n + delete_ends_batch(db, &BulkFilter::default(), before, batch).await?)
}

/// One batch of the rows of ends of successes that deleted their tasks (`transitions::ends`),
/// ended before `before`, with what those tasks ran after: how many tasks' ends. (A filter by
/// task ids matches none: those tasks are gone already.)
async fn delete_ends_batch<D: Dialect>(db: &D, f: &BulkFilter, before: DateTime<Utc>, batch: u32) -> Result<u64> {
    if f.ids.is_some() {
        return Ok(0);
    }
    let mut values: Vec<Arg<'_>> = args![before].to_vec();
    let filter = filtered(f, &mut values);
    values.push(Arg::from(batch));
    let pick = format!(
        "SELECT max_id, finished_on, queue, task_handler_class, ids FROM task_ends WHERE finished_on < $1{filter}
         ORDER BY finished_on LIMIT ${}{}",
        values.len(),
        D::SKIP_LOCKED
    );
    let (pick, values) = (&pick, &values);
    transaction(db, |tx| {
        Box::pin(async move {
            let found = db.rows(Some(&mut tx.tx), pick, values).await?;
            if found.is_empty() {
                return Ok(0);
            }
            let keys: Vec<i64> = found.iter().map(|r| super::super::rows::id(r, "max_id")).collect::<Result<_>>()?;
            let mut tasks = Vec::new();
            for r in &found {
                tasks.extend(EndsRow::read(r)?.ids);
            }
            for chunk in tasks.chunks(BATCH as usize) {
                db.exec(Some(&mut tx.tx), "DELETE FROM task_deps WHERE task_id IN ($1)", args![chunk]).await?;
            }
            db.exec(Some(&mut tx.tx), "DELETE FROM task_ends WHERE max_id IN ($1)", args![&keys]).await?;
            Ok(tasks.len() as u64)
        })
    })
    .await
}

async fn delete_batch<D: Dialect>(
    db: &D,
    finished: &str,
    order: &str,
    f: &BulkFilter,
    before: DateTime<Utc>,
    batch: u32,
) -> Result<u64> {
    let mut values: Vec<Arg<'_>> = args![before].to_vec();
    let filter = filtered(f, &mut values);
    values.push(Arg::from(batch));
    let pick = format!(
        "SELECT id FROM task_queue WHERE {finished}{filter} ORDER BY {order} LIMIT ${}{}",
        values.len(),
        D::SKIP_LOCKED
    );
    let (pick, values) = (&pick, &values);
    transaction(db, |tx| {
        Box::pin(async move {
            let ids = super::super::rows::ids(&db.rows(Some(&mut tx.tx), pick, values).await?)?;
            if ids.is_empty() {
                return Ok(0);
            }
            db.exec(Some(&mut tx.tx), "DELETE FROM task_runs WHERE task_queue_id IN ($1)", args![&ids]).await?;
            db.exec(Some(&mut tx.tx), "DELETE FROM task_deps WHERE task_id IN ($1)", args![&ids]).await?;
            db.exec(Some(&mut tx.tx), "DELETE FROM task_signals WHERE task_id IN ($1)", args![&ids]).await?;
            let n = db.exec(Some(&mut tx.tx), "DELETE FROM task_queue WHERE id IN ($1)", args![&ids]).await?;
            Ok(n)
        })
    })
    .await
}

/// Delete every finished task (`which`) matching `f` finished before `before`, batch by batch.
pub async fn delete_finished<D: Dialect>(
    db: &D,
    which: Finished,
    f: &BulkFilter,
    before: DateTime<Utc>,
) -> Result<u64> {
    let mut total = 0;
    loop {
        let n = delete_finished_batch(db, which, f, before, BATCH).await?;
        total += n;
        if n < u64::from(BATCH) {
            return Ok(total);
        }
    }
}

/// The tasks [`Replay`] picks, as a condition on `task_queue`.
fn replayable<D: Dialect>(which: Replay) -> String {
    is::<D>(match which {
        Replay::Dead => TaskState::Dead,
        Replay::Cancelled => TaskState::Cancelled,
    })
}

/// Replay every dead letter (or cancelled task) matching `f`, due `now`, batch by batch; how
/// many. One whose unique key another task holds is left as it is (as `retry` would
/// refuse it).
pub async fn replay<D: Dialect>(db: &D, which: Replay, f: &BulkFilter, now: DateTime<Utc>) -> Result<u64> {
    let cond = replayable::<D>(which);
    let mut values: Vec<Arg<'_>> = Vec::new();
    let filter = filtered(f, &mut values);
    values.push(Arg::Int(Some(0))); // the last id seen: batches move forward past refused ones
    let after = values.len();
    values.push(Arg::from(BATCH));
    let pick = format!(
        "SELECT id, unique_key FROM task_queue WHERE {cond}{filter} AND id > ${after}
         ORDER BY id LIMIT ${}{}",
        values.len(),
        D::SKIP_LOCKED
    );
    let mut total = 0;
    loop {
        let (pick, batch) = (&pick, &values);
        let (replayed, last) = transaction(db, |tx| Box::pin(replay_batch(db, &mut tx.tx, pick, batch, now))).await?;
        total += replayed;
        let Some(last) = last else { return Ok(total) };
        values[after - 1] = Arg::Int(Some(last));
    }
}

/// One batch of [`replay`]: how many were replayed, and the last id picked (None: none).
async fn replay_batch<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    pick: &str,
    values: &[Arg<'_>],
    now: DateTime<Utc>,
) -> Result<(u64, Option<TaskId>)> {
    let picked = db.rows(Some(&mut *tx), pick, values).await?;
    let Some(last) = picked.last().map(|r| super::super::rows::id(r, "id")).transpose()? else {
        return Ok((0, None));
    };
    // Keys held by a task past its period are let go; then a key another task holds (one of
    // these may hold its own: `unique_states`), and a key two of these share, keep those dead.
    let keys: Vec<String> = picked.iter().filter_map(|r| r.text("unique_key").ok().flatten()).collect();
    let picked_ids = super::super::rows::ids(&picked)?;
    let mut held: std::collections::HashMap<String, TaskId> = std::collections::HashMap::new();
    if !keys.is_empty() {
        transitions::add::let_lapsed_go::<D>(D::conn(&mut *tx), &keys, &picked_ids, now).await?;
        let sql = "SELECT id, active_unique_key FROM task_queue WHERE active_unique_key IN ($1)";
        for r in db.rows(Some(&mut *tx), sql, args![keys.as_slice()]).await? {
            if let Some(k) = r.text("active_unique_key")? {
                held.insert(k, super::super::rows::id(&r, "id")?);
            }
        }
    }
    let mut ids = Vec::with_capacity(picked.len());
    for (r, id) in picked.iter().zip(&picked_ids) {
        let fresh = match r.text("unique_key")? {
            // Free, or its own: taken now by this one, so no other of the batch takes it.
            Some(k) => match held.get(&k) {
                None => held.insert(k, *id).is_none(),
                Some(holder) => holder == id,
            },
            None => true,
        };
        if fresh {
            ids.push(*id);
        }
    }
    if ids.is_empty() {
        return Ok((0, Some(last)));
    }
    // (A task queued meanwhile with one of these keys makes this a unique violation: an error,
    // and nothing of the batch is replayed.)
    let n = transitions::tasks::replay(db, tx, &ids, now).await?;
    Ok((n, Some(last)))
}
