//! Adding tasks: the start of a task's life (`scheduled`), for a caller's tasks and for those a
//! run queued ([`queue_children`], written with the run's end).

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, ConnOf, TxOf};
use super::super::rows;
use super::super::sql::{args, Lineage};
use crate::error::{Error, Result};
use crate::model::*;

/// Queue one task (its first run is made when it is claimed), waiting if it runs after tasks
/// that have not succeeded yet ([`super::deps::wait`]); a task with an unfinished task's unique
/// key is not added, and that task is returned.
pub(crate) async fn add_one<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    t: &NewTask,
    now: DateTime<Utc>,
) -> Result<Added> {
    match super::fair::turns::<D>(conn, std::slice::from_ref(t), now).await? {
        Some(turned) => add_one_under::<D>(conn, turned.first().unwrap_or(t), now, None).await,
        None => add_one_under::<D>(conn, t, now, None).await,
    }
}

/// [`add_one`], the task a child of `lineage`'s parent when it is added.
async fn add_one_under<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    t: &NewTask,
    now: DateTime<Utc>,
    lineage: Option<Lineage>,
) -> Result<Added> {
    if t.version.as_ref().is_some_and(|v| v.len() != 64) {
        // The start of a digest names a version only to the client, which resolves it.
        let reason = "the start of a digest must be resolved first (Client::add, or Client::pin_versions)";
        return Err(Error::invalid("version", reason));
    }
    let keys: Vec<String> = t.unique_key.iter().cloned().collect();
    // A few tries: between a refused insert and the look for its key's holder, the holder may
    // end (or, outside a transaction, a racing add may let its lapsed key go) and hold it no more.
    for _ in 0..3 {
        if let Some(id) = D::insert_task(conn, t, now, lineage).await? {
            super::deps::wait::<D>(conn, id, t).await?;
            return Ok(Added { id, created: true });
        }
        // Its key is taken: by a task whose period has passed, it is let go and this one added.
        if let_lapsed_go::<D>(conn, &keys, &[], now).await? > 0 {
            continue;
        }
        let holder =
            D::rows_on(conn, "SELECT id FROM task_queue WHERE active_unique_key = $1", args![&t.unique_key]).await?;
        if let Some(r) = holder.first() {
            return Ok(Added { id: rows::id(r, "id")?, created: false });
        }
    }
    Err(Error::CorruptRow { table: "task_queue", reason: "the task holding a unique key was not found".into() })
}

/// Let go the unique keys among `keys` held by tasks whose period ([`NewTask::unique_for`]) has
/// passed by `now`, but by those of `except` (about to take their own keys again); how many.
pub(crate) async fn let_lapsed_go<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    keys: &[String],
    except: &[TaskId],
    now: DateTime<Utc>,
) -> Result<u64> {
    if keys.is_empty() {
        return Ok(0);
    }
    let sql = "UPDATE task_queue SET active_unique_key = NULL
               WHERE active_unique_key IN ($1) AND unique_until <= $2 AND id NOT IN ($3)";
    D::exec_on(conn, sql, args![keys, now, except]).await
}

/// Queue validated tasks on `conn`: one by one when any has a unique key (each may clash) or
/// runs after others, else in bulk statements of at most [`Dialect::ADD_CHUNK`] tasks and
/// [`StoreOptions::BATCH_BYTES`](crate::store::StoreOptions::BATCH_BYTES) of data.
pub(crate) async fn add_tasks_in<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    tasks: &[NewTask],
    now: DateTime<Utc>,
) -> Result<Vec<Added>> {
    add_tasks_under::<D>(conn, tasks, now, None).await
}

/// [`add_tasks_in`], each task added a child of `lineage`'s parent.
async fn add_tasks_under<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    tasks: &[NewTask],
    now: DateTime<Utc>,
    lineage: Option<Lineage>,
) -> Result<Vec<Added>> {
    // Keyed tasks take their turns first (`fair`).
    let turned = super::fair::turns::<D>(conn, tasks, now).await?;
    let tasks = turned.as_deref().unwrap_or(tasks);
    let mut out = Vec::with_capacity(tasks.len());
    // The bulk statements leave out what few tasks have: unique keys, dependencies, versions.
    if tasks.len() == 1 || tasks.iter().any(|t| t.unique_key.is_some() || !t.after.is_empty() || t.version.is_some()) {
        for (index, t) in tasks.iter().enumerate() {
            match add_one_under::<D>(conn, t, now, lineage).await {
                Ok(added) => out.push(added),
                // A caller's task refused is named by its place, as the checks before name it.
                Err(e @ Error::Invalid { .. }) if lineage.is_none() && tasks.len() > 1 => {
                    return Err(Error::InBatch { index, error: Box::new(e) })
                }
                Err(e) => return Err(e),
            }
        }
        return Ok(out);
    }
    let mut rest = tasks;
    while !rest.is_empty() {
        let n = chunk_len(rest, D::ADD_CHUNK, super::super::connect::StoreOptions::BATCH_BYTES);
        let (chunk, after) = rest.split_at(n);
        out.extend(D::add_bulk(conn, chunk, now, lineage).await?);
        rest = after;
    }
    Ok(out)
}

/// How many of `tasks` (at least one) go in one statement: at most `count`, and no more data
/// than `bytes` unless the first task alone has more.
fn chunk_len(tasks: &[NewTask], count: usize, bytes: usize) -> usize {
    let mut total = 0;
    let fits = tasks.iter().take(count).take_while(|t| {
        total += t.data.len();
        total <= bytes
    });
    fits.count().max(1)
}

/// Queue tasks in a transaction of their own.
pub(crate) async fn add_tasks_in_tx<D: Dialect + ?Sized>(
    db: &D,
    tasks: &[NewTask],
    now: DateTime<Utc>,
) -> Result<Vec<Added>> {
    transaction(db, |tx| {
        Box::pin(async move {
            let added = add_tasks_in::<D>(D::conn(&mut tx.tx), tasks, now).await?;
            Ok(added)
        })
    })
    .await
}

/// Queue the tasks these runs queued, now that they ended well, in their transaction: each as any
/// task is added (a unique key an unfinished task holds keeps that task, which stays no one's
/// child), naming the run's task its parent, one level deeper than it, in its parent's key's
/// share (a tenant's work stays the tenant's).
pub async fn queue_children<D: Dialect>(db: &D, tx: &mut TxOf<D>, ended: &[&RunOutcome]) -> Result<()> {
    let with: Vec<&RunOutcome> = ended.iter().copied().filter(|o| !o.children().is_empty()).collect();
    if with.is_empty() {
        return Ok(());
    }
    let parents: Vec<TaskId> = with.iter().map(|o| o.task_id).collect();
    let sql = "SELECT id, depth, share_key FROM task_queue WHERE id IN ($1)";
    let found = db.rows(Some(&mut *tx), sql, args![&parents]).await?;
    let mut of = HashMap::with_capacity(found.len());
    for r in &found {
        of.insert(rows::id(r, "id")?, (rows::id(r, "depth")?, r.text("share_key")?));
    }
    let mut queued = Vec::with_capacity(with.len());
    for o in with {
        let (depth, key) = of.get(&o.task_id).cloned().unwrap_or((0, None));
        let lineage = Lineage { parent: o.task_id, depth: depth + 1 };
        let children = match key {
            Some(key) => {
                let mut own = o.children().clone();
                own.tasks.iter_mut().filter(|t| t.key.is_none()).for_each(|t| t.key = Some(key.clone()));
                std::borrow::Cow::Owned(own)
            }
            None => std::borrow::Cow::Borrowed(o.children()),
        };
        queued.push((o, lineage, children));
    }
    // The keys' rows locked first, all in one order: runs ending on two workers at once, each
    // with children of keys in another order, do not deadlock.
    let slots: BTreeSet<super::fair::Slot> = queued
        .iter()
        .flat_map(|(_, _, c)| c.tasks.iter().filter_map(|t| t.key.clone().map(|k| (t.queue.clone(), k))))
        .collect();
    if !slots.is_empty() {
        super::fair::lock::<D>(D::conn(tx), &slots.into_iter().collect::<Vec<_>>()).await?;
    }
    for (o, lineage, children) in queued {
        add_queued::<D>(D::conn(tx), &children, o.finished_on, lineage).await?;
    }
    Ok(())
}

/// Add one run's tasks in their order, those between joins in bulk; a join (`enqueue-after`)
/// runs after the tasks its numbers name, added before it. A task kept out because another holds
/// its unique key is not waited for: a join waits only for tasks its run added, so a guest cannot
/// make one wait for (and read the results of) a task it did not queue by naming that task's key.
async fn add_queued<D: Dialect>(
    conn: &mut ConnOf<D>,
    queued: &QueuedTasks,
    now: DateTime<Utc>,
    lineage: Lineage,
) -> Result<Vec<Added>> {
    let lineage = Some(lineage);
    let mut added: Vec<Added> = Vec::with_capacity(queued.tasks.len());
    let mut start = 0;
    for (&n, after) in &queued.after {
        let n = n as usize;
        let Some(join) = queued.tasks.get(n).filter(|_| n >= start) else {
            return Err(Error::Invalid { what: "after", reason: format!("no task {n} was queued before it") });
        };
        added.extend(add_tasks_under::<D>(conn, &queued.tasks[start..n], now, lineage).await?);
        let mut join = join.clone();
        join.after = after.iter().filter_map(|&k| added.get(k as usize)).filter(|a| a.created).map(|a| a.id).collect();
        // Nothing left to wait for: it runs as any task (an empty list cannot run anyway).
        join.run_anyway &= !join.after.is_empty();
        added.push(add_one_under::<D>(conn, &join, now, lineage).await?);
        start = n + 1;
    }
    if start < queued.tasks.len() {
        added.extend(add_tasks_under::<D>(conn, &queued.tasks[start..], now, lineage).await?);
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::chunk_len;
    use crate::model::NewTask;

    #[test]
    fn a_bulk_statement_holds_at_most_its_count_and_bytes_but_always_one_task() {
        let tasks = |sizes: &[usize]| -> Vec<NewTask> {
            sizes.iter().map(|n| NewTask::new("h", format!("\"{}\"", "x".repeat(n - 2)))).collect()
        };
        assert_eq!(chunk_len(&tasks(&[10; 9]), 4, 1000), 4);
        assert_eq!(chunk_len(&tasks(&[400, 400, 400]), 10, 1000), 2);
        assert_eq!(chunk_len(&tasks(&[5000, 10]), 10, 1000), 1);
        assert_eq!(chunk_len(&tasks(&[10, 5000]), 10, 1000), 1);
    }
}
