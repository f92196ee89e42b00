//! The transitions that end a running run: succeed, fail (and retry or give up), time out, put back.

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::TxOf;
use super::super::rows;
use super::super::sql::{args, RUNNING, SCHEDULED, TIMEOUT};
use super::{from, Why, RELEASE_KEY};
use crate::error::Result;
use crate::model::*;

/// Write finished runs and move their tasks on (succeed, fail and retry, fail and give up), in
/// one transaction. A run no longer running (timed out, cancelled or put back meanwhile) is left
/// as it is, and so is its task.
pub async fn finish<D: Dialect>(db: &D, outcomes: &[RunOutcome]) -> Result<()> {
    if outcomes.is_empty() {
        return Ok(());
    }
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
    let ids: Vec<RunId> = failed.iter().map(|f| f.o.run_id).collect();
    let running = format!("SELECT id FROM task_runs WHERE id IN ($1) AND status = {RUNNING}{}", D::FOR_UPDATE);
    let latest = outcomes.iter().map(|o| o.finished_on).max().unwrap_or_default();
    let (ok, failed, running, ids) = (&ok, &failed, &running, &ids);
    transaction(db, |tx| {
        Box::pin(async move {
            if !ok.is_empty() {
                let done = db.finish_successes(&mut tx.tx, ok).await?;
                super::super::shared::stats::record_successes(db, &mut tx.tx, &done, ok, latest).await?;
            }
            // The failed runs this transaction ends, for the statistics.
            let mut ended = Vec::new();
            if !failed.is_empty() {
                let still = db.rows(Some(&mut tx.tx), running, args![ids]).await?;
                let still: std::collections::HashSet<RunId> =
                    still.iter().map(|r| rows::id(r, "id")).collect::<Result<_>>()?;
                for f in failed {
                    if still.contains(&f.o.run_id) {
                        fail(db, &mut tx.tx, f).await?;
                        ended.push(f.o.run_id);
                    }
                }
            }
            super::super::shared::stats::record(db, &mut tx.tx, &ended, latest).await
        })
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

/// End a locked running run as failed, and retry its task or give up on it. A retry is the task
/// scheduled again: its next run is made by the claim that starts it.
async fn fail<D: Dialect>(db: &D, tx: &mut TxOf<D>, f: &Failed<'_>) -> Result<()> {
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
                 WHERE id = $1 AND {}",
                from::<D>(Transition::FailAndRetry)
            );
            db.exec(Some(tx), &task, args![o.task_id, at]).await?;
        }
        NextStep::GiveUp => {
            let task = format!(
                "UPDATE task_queue SET last_status = $2, task_runs_failed = task_runs_failed + 1,
                     finished_on = $3, gave_up_on = $3, {RELEASE_KEY}
                 WHERE id = $1 AND {}",
                from::<D>(Transition::FailAndGiveUp)
            );
            db.exec(Some(tx), &task, args![o.task_id, status, o.finished_on]).await?;
        }
    }
    Ok(())
}

/// Time out these locked running runs for `why`, and count the failure on their tasks, which
/// await the overseer's decision (retry or give up); the statistics record them.
pub async fn time_out<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    runs: &[(RunId, TaskId)],
    now: DateTime<Utc>,
    why: Why<'_>,
) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let (run_ids, task_ids): (Vec<RunId>, Vec<TaskId>) = runs.iter().copied().unzip();
    let end = format!(
        "UPDATE task_runs SET status = {TIMEOUT}, finished_on = $2, error_code = $3, error_message = $4,
             duration_ms = {}
         WHERE id IN ($1) AND status = {RUNNING}",
        D::MS_SINCE_START
    );
    db.exec(Some(&mut *tx), &end, args![&run_ids, now, why.code, why.message]).await?;
    let count = format!(
        "UPDATE task_queue SET last_status = {TIMEOUT}, task_runs_failed = task_runs_failed + 1
         WHERE id IN ($1) AND {}",
        from::<D>(Transition::TimeOut)
    );
    db.exec(Some(&mut *tx), &count, args![&task_ids]).await?;
    super::super::shared::stats::record(db, tx, &run_ids, now).await
}

/// Return a running run to the queue, due at `at`, uncounted; false when it is not running. The
/// run is deleted, not kept: it ran no guest to its end (it waited for a slot, or its worker lost
/// its claim's answer or its heartbeat), and the claim that starts the task again makes the run
/// anew, with the same attempt.
pub async fn put_back<D: Dialect>(db: &D, run: RunId, at: DateTime<Utc>) -> Result<bool> {
    let find = format!("SELECT task_queue_id FROM task_runs WHERE id = $1 AND status = {RUNNING}{}", D::FOR_UPDATE);
    let unclaim = "DELETE FROM task_runs WHERE id = $1";
    let task = format!(
        "UPDATE task_queue SET last_status = {SCHEDULED}, scheduled_on = $2 WHERE id = $1 AND {}",
        from::<D>(Transition::PutBack)
    );
    let (find, task) = (&find, &task);
    transaction(db, |tx| {
        Box::pin(async move {
            let Some(found) = db.rows(Some(&mut tx.tx), find, args![run]).await?.into_iter().next() else {
                return Ok(false);
            };
            let task_id = rows::id(&found, "task_queue_id")?;
            db.exec(Some(&mut tx.tx), unclaim, args![run]).await?;
            db.exec(Some(&mut tx.tx), task, args![task_id, at]).await?;
            Ok(true)
        })
    })
    .await
}
