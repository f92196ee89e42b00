//! Cancelling tasks, by id or by filter. A cancelled scheduled task never starts; its
//! running run is marked `cancelled` at once, and the worker executing it stops the guest when
//! it next checks its runs (woken at once on PostgreSQL by a notification sent with the commit).
//! The outcome that worker may still send is ignored: outcomes are written only to runs still
//! `running`. Cancelled tasks are finished: they are not retried, and rotation deletes them by age.

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg};
use super::super::transitions::{self, from, is_any};
use super::super::types::{BulkFilter, Cancelled, Unfinished};
use super::bulk::{filtered, BATCH};
use crate::error::Result;
use crate::model::{RunStatus, TaskId, TaskState, Transition};

/// The tasks of `which` kind, as a condition on `task_queue`.
fn unfinished<D: Dialect>(which: Unfinished) -> String {
    match which {
        Unfinished::Waiting => is_any::<D>(&[TaskState::Waiting, TaskState::Scheduled, TaskState::AwaitingRetry]),
        Unfinished::Running => is_any::<D>(&[TaskState::Running]),
        Unfinished::Any => from::<D>(Transition::Cancel),
    }
}

/// Cancel the unfinished tasks among `ids`; the ids cancelled (finished or unknown ones are not).
pub async fn by_ids<D: Dialect>(db: &D, ids: &[TaskId], now: DateTime<Utc>) -> Result<Vec<TaskId>> {
    let pick = format!(
        "SELECT id, last_status FROM task_queue WHERE id IN ($1) AND {} ORDER BY id{}",
        unfinished::<D>(Unfinished::Any),
        D::FOR_UPDATE
    );
    let mut done = Vec::new();
    for chunk in ids.chunks(BATCH as usize) {
        let values = args![chunk];
        let pick = &pick;
        let (ids, _) = transaction(db, |tx| Box::pin(batch(db, &mut tx.tx, pick, values, now))).await?;
        done.extend(ids);
    }
    Ok(done)
}

/// Cancel the unfinished tasks among `ids` and every unfinished task under them (their children,
/// the children's children, ...); the ids cancelled, those of `ids` first. Level by level from
/// the top: a task cancelled before its run ends queues no children (a cancelled run's end is
/// ignored), so no task can be added under one after its level was read. A finished task's
/// children are sought all the same (a succeeded fan-out's parts may still be running).
pub async fn with_children<D: Dialect>(db: &D, ids: &[TaskId], now: DateTime<Utc>) -> Result<Vec<TaskId>> {
    let mut done = by_ids(db, ids, now).await?;
    let mut level: Vec<TaskId> = ids.to_vec();
    // Children have larger ids than their parents: the walk ends, and needs no set of seen ones.
    let children = "SELECT id FROM task_queue WHERE parent_id IN ($1) ORDER BY id";
    while !level.is_empty() {
        let mut next = Vec::new();
        for chunk in level.chunks(BATCH as usize) {
            next.extend(rows::ids(&db.rows(None, children, args![chunk]).await?)?);
        }
        done.extend(by_ids(db, &next, now).await?);
        level = next;
    }
    Ok(done)
}

/// Cancel every task of `which` kind matching `f`, batch by batch.
pub async fn matching<D: Dialect>(db: &D, f: &BulkFilter, which: Unfinished, now: DateTime<Utc>) -> Result<Cancelled> {
    let mut values: Vec<Arg<'_>> = Vec::new();
    let filter = filtered(f, &mut values);
    values.push(Arg::from(BATCH));
    // Rows locked by a claim or an outcome are waited for, not skipped: every match is cancelled.
    let pick = format!(
        "SELECT id, last_status FROM task_queue WHERE {}{filter} ORDER BY id LIMIT ${}{}",
        unfinished::<D>(which),
        values.len(),
        D::FOR_UPDATE
    );
    let mut total = Cancelled::default();
    let (pick, values) = (&pick, &values);
    loop {
        let (ids, running) = transaction(db, |tx| Box::pin(batch(db, &mut tx.tx, pick, values, now))).await?;
        total.tasks += ids.len() as u64;
        total.running += running;
        if ids.len() < BATCH as usize {
            return Ok(total);
        }
    }
}

/// In one transaction: lock the tasks `pick` finds, end their scheduled or running run as
/// `cancelled` and finish them; the ids, and how many were running.
async fn batch<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    pick: &str,
    values: &[Arg<'_>],
    now: DateTime<Utc>,
) -> Result<(Vec<TaskId>, u64)> {
    let picked = db.rows(Some(&mut *tx), pick, values).await?;
    if picked.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let mut ids = Vec::with_capacity(picked.len());
    let mut running = 0;
    for r in &picked {
        ids.push(rows::id(r, "id")?);
        if r.text("last_status")?.as_deref() == Some(RunStatus::Running.as_str()) {
            running += 1;
        }
    }
    transitions::tasks::cancel(db, tx, &ids, now).await?;
    if running > 0 {
        db.notify_cancelled(tx).await?;
    }
    Ok((ids, running))
}
