//! The transitions the overseer and operators make: retry, give up, abandon, cancel, replay; and
//! the cancel of a task waiting for one that ended badly. A task that ends badly here (dead or
//! cancelled) ends the tasks waiting for it ([`super::deps::ended_badly`]).
//! Each takes tasks its caller has locked (or, on SQLite, reads in its write transaction).

use chrono::{DateTime, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::Cells;
use super::super::plumbing::TxOf;
use super::super::rows;
use super::super::sql::{args, Lit, CANCELLED, ERROR, KEPT};
use super::{from, Set, Why, CANCELLED_BY_OPERATOR, UNSERVED};
use crate::error::Result;
use crate::model::{RunId, RunStatus, TaskId, Transition};

/// Schedule a task awaiting its retry again, due at `at` (its next run is made by the claim
/// that starts it); false when it awaits none (another overseer decided first, or an operator
/// cancelled it).
pub async fn retry<D: Dialect>(db: &D, tx: &mut TxOf<D>, task: TaskId, at: DateTime<Utc>) -> Result<bool> {
    let t = Transition::Retry;
    let sql = format!("UPDATE task_queue SET {} WHERE id = $1 AND {}", Set::of(t, "$2"), from::<D>(t));
    Ok(db.exec(Some(tx), &sql, args![task, at]).await? == 1)
}

/// Give up on a task awaiting its retry: it becomes a dead letter; false when it awaits none.
pub async fn give_up<D: Dialect>(db: &D, tx: &mut TxOf<D>, task: TaskId, now: DateTime<Utc>) -> Result<bool> {
    let t = Transition::GiveUp;
    let sql = format!("UPDATE task_queue SET {} WHERE id = $1 AND {}", Set::of(t, "$2"), from::<D>(t));
    if db.exec(Some(&mut *tx), &sql, args![task, now]).await? != 1 {
        return Ok(false);
    }
    super::deps::ended_badly(db, tx, &[task], now).await?;
    Ok(true)
}

/// Give up on these scheduled tasks without running them: each gets a run ended in error
/// ([`UNSERVED`]), counted as failed.
pub async fn abandon<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], now: DateTime<Utc>) -> Result<()> {
    let (tasks, running) = &moving(db, tx, tasks, Transition::Abandon).await?;
    super::runs::write_running(db, tx, running).await?;
    let error = ERROR.to_string();
    let set = Set::of(Transition::Abandon, "$2").ended_as(&error);
    let task = format!("UPDATE task_queue SET {set} WHERE id IN ($1) AND {}", from::<D>(Transition::Abandon));
    db.exec(Some(&mut *tx), &task, args![tasks, now]).await?;
    end_active_runs(db, tx, tasks, running, ERROR, now, UNSERVED).await?;
    super::deps::ended_badly(db, tx, tasks, now).await
}

/// Cancel these unfinished tasks: their running run, or a run made for the purpose when none
/// runs, ends as cancelled ([`CANCELLED_BY_OPERATOR`]) (a running guest is stopped by its
/// worker), and they finish; so do the tasks waiting for them.
pub async fn cancel<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], now: DateTime<Utc>) -> Result<()> {
    let cancelled = cancel_as(db, tx, tasks, now, Transition::Cancel, CANCELLED_BY_OPERATOR).await?;
    super::deps::ended_badly(db, tx, &cancelled, now).await
}

/// Cancel those of these tasks `t` (a transition to `cancelled`) moves on, for `why`, as
/// [`cancel`] does, but not the tasks waiting for them; the tasks cancelled.
pub(super) async fn cancel_as<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    tasks: &[TaskId],
    now: DateTime<Utc>,
    t: Transition,
    why: Why<'_>,
) -> Result<Vec<TaskId>> {
    let (tasks, running) = moving(db, tx, tasks, t).await?;
    super::runs::write_running(db, tx, &running).await?;
    let task = format!("UPDATE task_queue SET {} WHERE id IN ($1) AND {}", Set::of(t, "$2"), from::<D>(t));
    db.exec(Some(&mut *tx), &task, args![&tasks, now]).await?;
    end_active_runs(db, tx, &tasks, &running, CANCELLED, now, why).await?;
    Ok(tasks)
}

/// Those of `tasks` that `t` moves on (the caller holds them locked), and the runs running among
/// them (run id, task id).
async fn moving<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    tasks: &[TaskId],
    t: Transition,
) -> Result<(Vec<TaskId>, Vec<(RunId, TaskId)>)> {
    if tasks.is_empty() {
        return Ok(Default::default());
    }
    let sql = format!("SELECT id, last_status, run_id FROM task_queue WHERE id IN ($1) AND {}", from::<D>(t));
    let (mut moving, mut running) = (Vec::new(), Vec::new());
    for r in &db.rows(Some(tx), &sql, args![tasks]).await? {
        let id = rows::id(r, "id")?;
        moving.push(id);
        if r.text("last_status")?.as_deref() == Some(RunStatus::Running.as_str()) {
            running.push((rows::id(r, "run_id")?, id));
        }
    }
    Ok((moving, running))
}

/// End the running run of each of these tasks (`running`: run id, task id; written to
/// `task_runs` already) as `status`, for `why`, timed from its start, and count it in the
/// statistics. A task not running has no run now (a task's runs are made by its claims): it
/// gets one, numbered after its latest, to record why it ended.
async fn end_active_runs<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    tasks: &[TaskId],
    running: &[(RunId, TaskId)],
    status: Lit,
    now: DateTime<Utc>,
    why: Why<'_>,
) -> Result<()> {
    if tasks.is_empty() {
        return Ok(());
    }
    let mut ended: Vec<RunId> = running.iter().map(|(run, _)| *run).collect();
    let end = format!(
        "UPDATE task_runs SET status = {status}, finished_on = $2, error_code = $3, error_message = $4,
             duration_ms = {}
         WHERE id IN ($1)",
        D::MS_SINCE_START
    );
    db.exec(Some(&mut *tx), &end, args![&ended, now, why.code, why.message]).await?;
    let busy: std::collections::HashSet<TaskId> = running.iter().map(|(_, task)| *task).collect();
    let idle: Vec<TaskId> = tasks.iter().copied().filter(|t| !busy.contains(t)).collect();
    if !idle.is_empty() {
        // The runs made here are those of these tasks past the latest id before: ids are handed
        // out in increasing order, and the tasks are locked, so no other transaction writes runs
        // of them meanwhile.
        let before = db.rows(Some(&mut *tx), "SELECT coalesce(max(id), 0) AS id FROM task_runs", args![]).await?;
        let before = before.first().map(|r| rows::id(r, "id")).transpose()?.unwrap_or(0);
        let new_id = db.new_run_ids(tx, idle.len()).await?;
        let make = format!(
            "INSERT INTO task_runs (id, task_queue_id, attempt, created_on, finished_on, status, error_code,
                 error_message)
             SELECT {new_id}, q.id, q.run_attempt + 1, $2, $2, {status}, $3, $4 FROM task_queue q WHERE q.id IN ($1)"
        );
        db.exec(Some(&mut *tx), &make, args![&idle, now, why.code, why.message]).await?;
        let counted = "UPDATE task_queue SET run_attempt = run_attempt + 1 WHERE id IN ($1)";
        db.exec(Some(&mut *tx), counted, args![&idle]).await?;
        let made = "SELECT id FROM task_runs WHERE task_queue_id IN ($1) AND id > $2";
        ended.extend(ids(&db.rows(Some(&mut *tx), made, args![&idle, before]).await?)?);
    }
    super::super::stats::record(db, tx, &ended, now).await
}

/// Schedule these finished tasks again, due `now`, their failures forgotten and their
/// unique keys held again (each task's next run is made by the claim that starts it). How many.
///
/// A key an unfinished task holds meanwhile is a unique violation: an error, and the caller's
/// transaction is rolled back.
pub async fn replay<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], now: DateTime<Utc>) -> Result<u64> {
    let t = Transition::Replay;
    // The runs kept on their rows go to `task_runs` first, their tasks locked so that a replay
    // racing this one finds them gone rather than writing them twice.
    let kept = format!("SELECT id FROM task_queue WHERE id IN ($1) AND {}{}", KEPT, D::FOR_UPDATE);
    let kept = ids(&db.rows(Some(&mut *tx), &kept, args![tasks]).await?)?;
    if !kept.is_empty() {
        db.exec(Some(&mut *tx), &super::kept_to_runs(), args![&kept]).await?;
    }
    let revive = format!("UPDATE task_queue SET {} WHERE id IN ($1) AND {}", Set::of(t, "$2"), from::<D>(t));
    let n = db.exec(Some(&mut *tx), &revive, args![tasks, now]).await?;
    if n == 0 {
        return Ok(0);
    }
    super::deps::replayed(db, tx, tasks).await?;
    db.notify_tasks(tx).await?;
    Ok(n)
}

/// The attempt a task's next run will be (after [`replay`]).
pub async fn next_attempt<D: Dialect>(db: &D, tx: &mut TxOf<D>, task: TaskId) -> Result<Option<u32>> {
    let sql = "SELECT run_attempt + 1 AS attempt FROM task_queue WHERE id = $1";
    db.rows(Some(tx), sql, args![task]).await?.first().map(|r| Ok(rows::n32(rows::id(r, "attempt")?))).transpose()
}

fn ids<R: super::super::plumbing::Cells>(found: &[R]) -> Result<Vec<i64>> {
    found.iter().map(|r| rows::id(r, "id")).collect()
}
