//! Runs: finishing them, putting them back, timing them out, and what keeps a worker busy.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::super::dialect::{retrying, Cells, ClaimRequest, Dialect, TxOf};
use super::super::rows::{self, ClaimedTask};
use super::super::sql::{args, Arg, ERROR, RUNNING, SCHEDULED, TIMEOUT};
use crate::error::Result;
use crate::model::*;
use crate::sandbox::{codes, Failure};

/// What a run that outlived its run timeout ends with.
pub const RUN_TIMED_OUT_MESSAGE: &str = "the run did not finish within its run timeout";

/// `(id, task_queue_id)` rows.
pub(super) fn pairs<R: Cells>(found: &[R]) -> Result<Vec<(RunId, TaskId)>> {
    found.iter().map(|r| Ok((rows::id(r, "id")?, rows::id(r, "task_queue_id")?))).collect()
}

/// Time out these locked running runs with `code`, and count the failure on their tasks.
pub(super) async fn time_out_runs<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    runs: &[(RunId, TaskId)],
    now: DateTime<Utc>,
    code: &str,
    message: &str,
) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let (run_ids, task_ids): (Vec<RunId>, Vec<TaskId>) = runs.iter().copied().unzip();
    let end = format!(
        "UPDATE task_runs SET status = {TIMEOUT}, finished_on = $2, error_code = $3, error_message = $4,
             duration_ms = {}
         WHERE id IN ($1)",
        D::MS_SINCE_START
    );
    db.exec(Some(&mut *tx), &end, args![&run_ids, now, code, message]).await?;
    let count = format!(
        "UPDATE task_queue SET last_status = {TIMEOUT}, task_runs_failed = task_runs_failed + 1 WHERE id IN ($1)"
    );
    db.exec(Some(&mut *tx), &count, args![&task_ids]).await?;
    super::stats::record(db, tx, &run_ids, now).await
}

/// One update a run, the later reports of a run overriding the earlier (a report without
/// percent or results keeps the earlier's): a batch statement that met one run twice would
/// keep either (PostgreSQL's `UPDATE … FROM`), not the latest.
pub fn coalesce_progress(updates: &[ProgressUpdate]) -> Vec<ProgressUpdate> {
    let mut merged: Vec<ProgressUpdate> = Vec::with_capacity(updates.len());
    let mut at: std::collections::HashMap<RunId, usize> = std::collections::HashMap::with_capacity(updates.len());
    for u in updates {
        match at.get(&u.run_id) {
            Some(&i) => {
                let m = &mut merged[i];
                m.percent = u.percent.or(m.percent);
                if u.results.is_some() {
                    m.results.clone_from(&u.results);
                }
            }
            None => {
                at.insert(u.run_id, merged.len());
                merged.push(u.clone());
            }
        }
    }
    merged
}

/// Time out up to `limit` running runs whose `timeout_on` is at or before `cutoff`.
pub async fn time_out_overdue<D: Dialect>(
    db: &D,
    cutoff: DateTime<Utc>,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<u64> {
    let overdue = format!(
        "SELECT id, task_queue_id FROM task_runs WHERE status = {RUNNING} AND timeout_on <= $1 LIMIT $2{}",
        D::SKIP_LOCKED
    );
    retrying::<D, _, _, _>(|| async {
        let mut tx = db.begin().await?;
        let runs = pairs(&db.rows(Some(&mut tx), &overdue, args![cutoff, limit]).await?)?;
        time_out_runs(db, &mut tx, &runs, now, codes::RUN_TIMEOUT, RUN_TIMED_OUT_MESSAGE).await?;
        db.commit(tx).await?;
        Ok(runs.len() as u64)
    })
    .await
}

/// Return a running run to the queue, due at `at`, uncounted; false when it is not running.
pub async fn put_back<D: Dialect>(db: &D, run: RunId, at: DateTime<Utc>) -> Result<bool> {
    let find = format!("SELECT task_queue_id FROM task_runs WHERE id = $1 AND status = {RUNNING}{}", D::FOR_UPDATE);
    let unclaim = format!(
        "UPDATE task_runs SET status = {SCHEDULED}, started_on = NULL, task_runner_id = NULL, timeout_on = NULL
         WHERE id = $1"
    );
    let task = format!("UPDATE task_queue SET last_status = {SCHEDULED}, scheduled_on = $2 WHERE id = $1");
    retrying::<D, _, _, _>(|| async {
        let mut tx = db.begin().await?;
        let Some(found) = db.rows(Some(&mut tx), &find, args![run]).await?.into_iter().next() else {
            db.rollback(tx).await?;
            return Ok(false);
        };
        let task_id = rows::id(&found, "task_queue_id")?;
        db.exec(Some(&mut tx), &unclaim, args![run]).await?;
        db.exec(Some(&mut tx), &task, args![task_id, at]).await?;
        db.commit(tx).await?;
        Ok(true)
    })
    .await
}

pub async fn keep_stopped<D: Dialect>(db: &D, r: &StoppedRun) -> Result<bool> {
    let sql = format!(
        "UPDATE task_runs SET fuel_used = $2, logs = $3, component_digest = coalesce(component_digest, $4)
         WHERE id = $1 AND status NOT IN ({SCHEDULED}, {RUNNING}) AND fuel_used IS NULL AND logs IS NULL"
    );
    let kept = db.exec(None, &sql, args![r.run_id, r.fuel_used, &r.logs, &r.component_digest]).await?;
    Ok(kept > 0)
}

pub async fn running_of<D: Dialect>(db: &D, runner: RunnerId) -> Result<Vec<RunId>> {
    let sql = format!("SELECT id FROM task_runs WHERE task_runner_id = $1 AND status = {RUNNING}");
    db.rows(None, &sql, args![runner]).await?.iter().map(|r| rows::id(r, "id")).collect()
}

/// Whether a scheduled run of `queues` is due, a run of them is running, or a failed task
/// awaits its retry run. Three probes, each of a partial index (on PostgreSQL an OR of
/// statuses scanned the whole table).
pub async fn has_due_work<D: Dialect>(
    db: &D,
    queues: &[String],
    handlers: Option<&[String]>,
    now: DateTime<Utc>,
) -> Result<bool> {
    let of_handlers = if handlers.is_some() { " AND task_handler_class IN ($3)" } else { "" };
    let sql = format!(
        "SELECT CASE WHEN
             EXISTS (SELECT 1 FROM task_queue
                     WHERE last_status = {SCHEDULED} AND scheduled_on <= $1 AND queue IN ($2){of_handlers})
             OR EXISTS (SELECT 1 FROM task_runs r JOIN task_queue q ON q.id = r.task_queue_id
                        WHERE r.status = {RUNNING} AND q.queue IN ($2))
             OR EXISTS (SELECT 1 FROM task_queue
                        WHERE last_status IN ({ERROR}, {TIMEOUT}) AND gave_up_on IS NULL{of_handlers})
         THEN 1 ELSE 0 END AS due"
    );
    let values = [Arg::Time(now), Arg::Texts(queues), Arg::Texts(handlers.unwrap_or_default())];
    let found = db.rows(None, &sql, &values).await?;
    Ok(match found.first() {
        Some(r) => rows::id(r, "due")? != 0,
        None => false,
    })
}

/// Write finished runs and move their tasks on, in one transaction. A run no longer running
/// (timed out or ended elsewhere meanwhile) is left as it is.
pub async fn finish<D: Dialect>(db: &D, outcomes: &[RunOutcome]) -> Result<()> {
    let mut ok: Vec<&RunOutcome> = Vec::new();
    let mut failed: Vec<Failed> = Vec::new();
    for o in outcomes {
        match &o.end {
            RunEnd::Success { .. } => ok.push(o),
            RunEnd::Failure { failure, partial_results, next } => {
                failed.push(Failed { o, failure, results: partial_results.as_deref(), next: *next })
            }
        }
    }
    if outcomes.is_empty() {
        return Ok(());
    }
    let ids: Vec<RunId> = failed.iter().map(|f| f.o.run_id).collect();
    let running = format!("SELECT id, attempt FROM task_runs WHERE id IN ($1) AND status = {RUNNING}{}", D::FOR_UPDATE);
    let latest = outcomes.iter().map(|o| o.finished_on).max().unwrap_or_default();
    retrying::<D, _, _, _>(|| async {
        let mut tx = db.begin().await?;
        // The runs this transaction ends, for the statistics.
        let mut ended = if ok.is_empty() { Vec::new() } else { db.finish_successes(&mut tx, &ok).await? };
        if !failed.is_empty() {
            let attempts = db.rows(Some(&mut tx), &running, args![&ids]).await?;
            let attempts: std::collections::HashMap<RunId, i64> =
                attempts.iter().map(|r| Ok((rows::id(r, "id")?, rows::id(r, "attempt")?))).collect::<Result<_>>()?;
            for f in &failed {
                // Not running any more: the overseer already moved the task on.
                if let Some(attempt) = attempts.get(&f.o.run_id) {
                    write_failure(db, &mut tx, f, rows::n32(*attempt)).await?;
                    ended.push(f.o.run_id);
                }
            }
        }
        super::stats::record(db, &mut tx, &ended, latest).await?;
        db.commit(tx).await
    })
    .await
}

/// A failed run's outcome, its parts unpacked.
struct Failed<'a> {
    o: &'a RunOutcome,
    failure: &'a Failure,
    results: Option<&'a str>,
    next: NextStep,
}

/// A failed run, and its task scheduled again or given up on.
async fn write_failure<D: Dialect>(db: &D, tx: &mut TxOf<D>, f: &Failed<'_>, attempt: u32) -> Result<()> {
    let o = f.o;
    let status = f.failure.status().as_str();
    let run = "UPDATE task_runs SET status = $2, finished_on = $3, results = coalesce($4, results),
                   error_code = $5, error_message = $6, percents_completed = coalesce($7, percents_completed),
                   duration_ms = $8, component_digest = $9, fuel_used = $10, logs = $11
               WHERE id = $1";
    let values = args![
        o.run_id,
        status,
        o.finished_on,
        f.results,
        f.failure.code.as_str(),
        f.failure.message.as_str(),
        o.percents_completed.map(i64::from),
        o.duration_ms,
        &o.component_digest,
        o.fuel_used,
        &o.logs,
    ];
    db.exec(Some(&mut *tx), run, values).await?;
    match f.next {
        NextStep::RetryAt(at) => {
            let task = format!(
                "UPDATE task_queue SET last_status = {SCHEDULED}, task_runs_failed = task_runs_failed + 1,
                     scheduled_on = $2
                 WHERE id = $1"
            );
            db.exec(Some(&mut *tx), &task, args![o.task_id, at]).await?;
            super::insert_run(db, tx, o.task_id, attempt + 1, o.finished_on).await?;
        }
        NextStep::GiveUp => {
            let task = "UPDATE task_queue SET last_status = $2, task_runs_failed = task_runs_failed + 1,
                            finished_on = $3, gave_up_on = $3, active_unique_key = NULL
                        WHERE id = $1";
            db.exec(Some(tx), task, args![o.task_id, status, o.finished_on]).await?;
        }
    }
    Ok(())
}

/// The claimed runs, in claim order: each task's run as the claim started it (`started`: task
/// id → run id and attempt), or one created already running for a task that had no scheduled
/// run (which should not happen).
pub async fn claimed_runs<D: Dialect>(
    db: &D,
    mut tx: Option<&mut TxOf<D>>,
    req: &ClaimRequest<'_>,
    claimed: Vec<ClaimedTask>,
    mut started: HashMap<TaskId, (RunId, i64)>,
) -> Result<Vec<ClaimedRun>> {
    let mut out = Vec::with_capacity(claimed.len());
    for c in claimed {
        let (run_id, attempt) = match started.remove(&c.task_id) {
            Some(found) => found,
            None => {
                let timeout_on = c.timeout_on(req.now, req.default_timeout);
                insert_running(db, tx.as_deref_mut(), c.task_id, req.runner, req.now, timeout_on).await?
            }
        };
        out.push(c.into_run(run_id, attempt, req.now, req.default_timeout));
    }
    Ok(out)
}

async fn insert_running<D: Dialect>(
    db: &D,
    mut tx: Option<&mut TxOf<D>>,
    task_id: TaskId,
    runner: RunnerId,
    now: DateTime<Utc>,
    timeout_on: DateTime<Utc>,
) -> Result<(RunId, i64)> {
    let attempt = i64::from(super::last_attempt(db, tx.as_deref_mut(), task_id).await?) + 1;
    let sql = format!(
        "INSERT INTO task_runs (task_queue_id, attempt, created_on, started_on, status, task_runner_id, timeout_on)
         VALUES ($1, $2, $3, $3, {RUNNING}, $4, $5)"
    );
    let id = db.insert(tx, &sql, args![task_id, attempt, now, runner, timeout_on]).await?;
    Ok((id, attempt))
}
