//! Intake: the tasks queued in SQL (`taskhost_add`, docs/clients.md) that need what only the
//! host computes, a key's turn (fair shares, [`super::fair`]) or waits for the tasks they run
//! after ([`super::deps`]), are given them here, as an add through the API gives them, so that
//! neither is written twice.
//!
//! Such a task arrives `waiting` with `waiting_for` -1 (outside the claim's index: it is not
//! claimed), its dependencies in `task_deps` with `met` -1, which the ends of those tasks do not
//! read (they look for `met` 0). Taking it in, in one transaction: its dependencies are checked
//! and written as an add writes them (a dependency that ended badly since the add cancels it,
//! `dependency-failed`, unless it runs anyway), its turn is its due time, and it is due (or
//! waits for its dependencies as any task does).

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::args;
use super::{from, Set, Why};
use crate::error::{Error, Result};
use crate::model::{codes, NewTask, TaskId, Transition};

/// Take in at most `batch` arriving tasks, the oldest first; how many.
pub async fn take_in<D: Dialect>(db: &D, now: DateTime<Utc>, batch: u32) -> Result<u64> {
    transaction(db, |tx| Box::pin(async move { take_in_tx(db, &mut tx.tx, now, batch).await })).await
}

async fn take_in_tx<D: Dialect>(db: &D, tx: &mut TxOf<D>, now: DateTime<Utc>, batch: u32) -> Result<u64> {
    let arrived = arrivals(db, tx, batch).await?;
    if arrived.is_empty() {
        return Ok(0);
    }
    let tasks: Vec<NewTask> = arrived.iter().map(|(_, t)| t.clone()).collect();
    // Turns first, for every keyed task due now, as an add takes them.
    let turned = super::fair::turns::<D>(D::conn(tx), &tasks, now).await?.unwrap_or(tasks);
    let (mut ready, mut refused) = (Vec::new(), Vec::new());
    for ((id, _), t) in arrived.iter().zip(&turned) {
        match super::deps::wait::<D>(D::conn(tx), *id, t).await {
            Ok(()) => ready.push((*id, t.scheduled_on.unwrap_or(now))),
            // A dependency that ended badly since the add checked it.
            Err(Error::Invalid { reason, .. }) => refused.push((*id, reason)),
            Err(e) => return Err(e),
        }
    }
    // Those left waiting by `deps::wait` count their dependencies now; the rest are due.
    let t = Transition::Ready;
    let due = format!(
        "UPDATE task_queue SET {}, waiting_for = 0 WHERE id = $1 AND {} AND waiting_for < 0",
        Set::of(t, "$2"),
        from::<D>(t)
    );
    let turn = "UPDATE task_queue SET scheduled_on = $2 WHERE id = $1";
    let mut made_due = 0;
    for (id, at) in &ready {
        let changed = db.exec(Some(&mut *tx), &due, args![*id, *at]).await?;
        if changed == 0 {
            db.exec(Some(&mut *tx), turn, args![*id, *at]).await?;
        }
        made_due += changed;
    }
    let mut cancelled = Vec::new();
    for (id, reason) in &refused {
        let why = Why { code: codes::DEPENDENCY_FAILED, message: reason };
        cancelled.extend(super::tasks::cancel_as(db, tx, &[*id], now, Transition::DependencyFailed, why).await?);
    }
    // And the tasks already waiting for those, in turn.
    super::deps::ended_badly(db, tx, &cancelled, now).await?;
    if made_due > 0 {
        db.notify_tasks(tx).await?;
    }
    Ok(arrived.len() as u64)
}

/// The oldest `batch` arriving tasks, locked, each as the add it was: its dependencies read from
/// their rows (deleted: they are written again as an add writes them).
async fn arrivals<D: Dialect>(db: &D, tx: &mut TxOf<D>, batch: u32) -> Result<Vec<(TaskId, NewTask)>> {
    let sql = format!(
        "SELECT id, task_handler_class, queue, priority, share_key, queued_on, scheduled_on, run_anyway FROM task_queue
         WHERE {} ORDER BY id LIMIT $1{}",
        D::ARRIVING,
        D::SKIP_LOCKED
    );
    let found = db.rows(Some(&mut *tx), &sql, args![batch]).await?;
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let mut arrived: Vec<(TaskId, NewTask)> = Vec::with_capacity(found.len());
    for r in &found {
        let mut t = NewTask::new(r.text("task_handler_class")?.unwrap_or_default(), String::new());
        t.queue = r.text("queue")?.unwrap_or_default();
        t.priority = i32::try_from(r.int("priority")?.unwrap_or(0)).unwrap_or(0);
        t.key = r.text("share_key")?;
        t.scheduled_on = r.time("scheduled_on")?;
        // A keyed task the add found due takes its turn now, whenever this pass's clock read (a
        // task due later keeps its time, as an add through the API leaves it).
        if t.key.is_some() && t.scheduled_on <= r.time("queued_on")? {
            t.scheduled_on = None;
        }
        t.run_anyway = r.int("run_anyway")?.unwrap_or(0) != 0;
        arrived.push((rows::id(r, "id")?, t));
    }
    let ids: Vec<TaskId> = arrived.iter().map(|(id, _)| *id).collect();
    let at: HashMap<TaskId, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let deps = "SELECT task_id, after_id FROM task_deps WHERE task_id IN ($1) AND met < 0 ORDER BY task_id, after_id";
    for r in &db.rows(Some(&mut *tx), deps, args![&ids]).await? {
        if let Some((_, t)) = at.get(&rows::id(r, "task_id")?).and_then(|&i| arrived.get_mut(i)) {
            t.after.push(rows::id(r, "after_id")?);
        }
    }
    db.exec(Some(&mut *tx), "DELETE FROM task_deps WHERE task_id IN ($1) AND met < 0", args![&ids]).await?;
    // The add found each dependency there: one gone since was deleted by its success (kept as
    // such, as an add through the API keeps it) or deleted finished (rotated), and counts as met
    // rather than as a task that never was.
    let named: BTreeSet<TaskId> = arrived.iter().flat_map(|(_, t)| t.after.iter().copied()).collect();
    if !named.is_empty() {
        let named: Vec<TaskId> = named.into_iter().collect();
        let mut there = HashSet::new();
        for chunk in named.chunks(1000) {
            for r in &db.rows(Some(&mut *tx), "SELECT id FROM task_queue WHERE id IN ($1)", args![chunk]).await? {
                there.insert(rows::id(r, "id")?);
            }
        }
        let gone: Vec<TaskId> = named.iter().copied().filter(|id| !there.contains(id)).collect();
        there.extend(super::ends::deleted(db, Some(&mut *tx), &gone).await?.into_keys());
        for (_, t) in &mut arrived {
            t.after.retain(|id| there.contains(id));
        }
    }
    Ok(arrived)
}
