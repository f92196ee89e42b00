//! The transitions the overseer and operators make: retry, give up, abandon, cancel, replay.
//! Each takes tasks its caller has locked (or, on SQLite, reads in its write transaction).

use chrono::{DateTime, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::TxOf;
use super::super::rows;
use super::super::sql::{args, Lit, CANCELLED, ERROR, RUNNING, SCHEDULED};
use super::{from, insert_run, is, Why, CANCELLED_BY_OPERATOR, RELEASE_KEY, UNSERVED};
use crate::error::Result;
use crate::model::{RunId, TaskId, TaskState, Transition};

/// Schedule attempt `attempt` of a task awaiting its retry, due at `at`; false when it awaits
/// none (another overseer decided first, or an operator cancelled it).
pub async fn retry<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    task: TaskId,
    attempt: u32,
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<bool> {
    let sql = format!(
        "UPDATE task_queue SET last_status = {SCHEDULED}, scheduled_on = $2 WHERE id = $1 AND {}",
        from::<D>(Transition::Retry)
    );
    if db.exec(Some(&mut *tx), &sql, args![task, at]).await? != 1 {
        return Ok(false);
    }
    insert_run(db, tx, task, attempt, now).await?;
    Ok(true)
}

/// Give up on a task awaiting its retry: it becomes a dead letter; false when it awaits none.
pub async fn give_up<D: Dialect>(db: &D, tx: &mut TxOf<D>, task: TaskId, now: DateTime<Utc>) -> Result<bool> {
    let sql = format!(
        "UPDATE task_queue SET gave_up_on = $2, finished_on = $2, {RELEASE_KEY} WHERE id = $1 AND {}",
        from::<D>(Transition::GiveUp)
    );
    Ok(db.exec(Some(tx), &sql, args![task, now]).await? == 1)
}

/// Give up on these scheduled tasks without running them: their scheduled runs end in error
/// ([`UNSERVED`]), and count as failed.
pub async fn abandon<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], now: DateTime<Utc>) -> Result<()> {
    let task = format!(
        "UPDATE task_queue SET last_status = {ERROR}, task_runs_failed = task_runs_failed + 1,
             finished_on = $2, gave_up_on = $2, {RELEASE_KEY}
         WHERE id IN ($1) AND {}",
        from::<D>(Transition::Abandon)
    );
    db.exec(Some(&mut *tx), &task, args![tasks, now]).await?;
    end_active_runs(db, tx, tasks, ERROR, now, UNSERVED).await
}

/// Cancel these unfinished tasks: their scheduled or running run ends as cancelled ([`CANCELLED_BY_OPERATOR`]) (a
/// running guest is stopped by its worker), and they finish.
pub async fn cancel<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], now: DateTime<Utc>) -> Result<()> {
    let task = format!(
        "UPDATE task_queue SET last_status = {CANCELLED}, finished_on = $2, {RELEASE_KEY} WHERE id IN ($1) AND {}",
        from::<D>(Transition::Cancel)
    );
    db.exec(Some(&mut *tx), &task, args![tasks, now]).await?;
    end_active_runs(db, tx, tasks, CANCELLED, now, CANCELLED_BY_OPERATOR).await
}

/// End the active run (scheduled or running) of each of these tasks as `status`, for `why`,
/// timed from its start when it had one, and count it in the statistics. A task never claimed
/// has no run yet (its first is made by its claim): it gets its first, to record why it ended.
async fn end_active_runs<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    tasks: &[TaskId],
    status: Lit,
    now: DateTime<Utc>,
    why: Why<'_>,
) -> Result<()> {
    let first = format!(
        "INSERT INTO task_runs (task_queue_id, attempt, created_on)
         SELECT q.id, 1, $2 FROM task_queue q
         WHERE q.id IN ($1) AND q.last_status = {status}
           AND NOT EXISTS (SELECT 1 FROM task_runs r WHERE r.task_queue_id = q.id)"
    );
    db.exec(Some(&mut *tx), &first, args![tasks, now]).await?;
    let active = format!("SELECT id FROM task_runs WHERE task_queue_id IN ($1) AND status IN ({SCHEDULED}, {RUNNING})");
    let ended = ids(&db.rows(Some(&mut *tx), &active, args![tasks]).await?)?;
    let end = format!(
        "UPDATE task_runs SET status = {status}, finished_on = $2, error_code = $3, error_message = $4,
             duration_ms = {}
         WHERE id IN ($1)",
        D::MS_SINCE_START
    );
    db.exec(Some(&mut *tx), &end, args![&ended, now, why.code, why.message]).await?;
    super::super::shared::stats::record(db, tx, &ended, now).await
}

/// Schedule these dead or cancelled tasks again, due `now`, their failures forgotten and their
/// unique keys held again; each gets a run numbered after its latest. How many.
///
/// A key an unfinished task holds meanwhile is a unique violation: an error, and the caller's
/// transaction is rolled back.
pub async fn replay<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], now: DateTime<Utc>) -> Result<u64> {
    let revive = format!(
        "UPDATE task_queue SET last_status = {SCHEDULED}, scheduled_on = $2, task_runs_failed = 0,
             gave_up_on = NULL, finished_on = NULL, active_unique_key = unique_key
         WHERE id IN ($1) AND {}",
        from::<D>(Transition::Replay)
    );
    let n = db.exec(Some(&mut *tx), &revive, args![tasks, now]).await?;
    if n == 0 {
        return Ok(0);
    }
    let runs = format!(
        "INSERT INTO task_runs (task_queue_id, attempt, created_on)
         SELECT q.id, (SELECT coalesce(max(r.attempt), 0) + 1 FROM task_runs r WHERE r.task_queue_id = q.id), $2
         FROM task_queue q WHERE q.id IN ($1) AND q.{}",
        is::<D>(TaskState::Scheduled)
    );
    db.exec(Some(&mut *tx), &runs, args![tasks, now]).await?;
    db.notify_tasks(tx).await?;
    Ok(n)
}

/// The scheduled run of a task (the one [`replay`] made).
pub async fn scheduled_run<D: Dialect>(db: &D, tx: &mut TxOf<D>, task: TaskId) -> Result<Option<RunId>> {
    let sql = format!("SELECT id FROM task_runs WHERE task_queue_id = $1 AND status = {SCHEDULED}");
    db.rows(Some(tx), &sql, args![task]).await?.first().map(|r| rows::id(r, "id")).transpose()
}

fn ids<R: super::super::plumbing::Cells>(found: &[R]) -> Result<Vec<i64>> {
    found.iter().map(|r| rows::id(r, "id")).collect()
}
