//! The transitions that end a running run: succeed, fail (and retry or give up), snooze, time
//! out, put back.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect, Ended};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, RUNNING, SCHEDULED, TIMEOUT};
use super::{from, Set, Why, RUN_COLUMNS, RUN_FROM_TASK};
use crate::error::Result;
use crate::model::*;

/// Apply how these claimed runs leave their worker, in one transaction: runs put back (in one
/// order, so that two transactions putting back the same rows do not deadlock), outcomes
/// written, stopped runs' records kept.
pub async fn release<D: Dialect>(db: &D, releases: &[RunRelease<'_>]) -> Result<Released> {
    let mut back: Vec<(RunId, DateTime<Utc>)> = Vec::new();
    let mut ended: Vec<&RunOutcome> = Vec::new();
    let mut stopped: Vec<&StoppedRun> = Vec::new();
    for r in releases {
        match *r {
            RunRelease::Ended(o) => ended.push(o),
            RunRelease::PutBack { run, at } => back.push((run, at)),
            RunRelease::Stopped(s) => stopped.push(s),
        }
    }
    if back.is_empty() && ended.is_empty() && stopped.is_empty() {
        return Ok(Released::default());
    }
    back.sort_unstable_by_key(|&(run, _)| run);
    let (back, ended, stopped) = (&back, &ended, &stopped);
    transaction(db, |tx| {
        Box::pin(async move {
            let put_back = put_back(db, &mut tx.tx, back).await?;
            let ended_here = finish(db, &mut tx.tx, ended).await?;
            let mut kept = Vec::new();
            // The fuel each run burnt, charged to its key where its queue weighs keys by fuel:
            // once, when this transaction ends it or keeps its record (an outcome written again,
            // or late for a run ended elsewhere, changes nothing).
            let ended_here = ended.iter().filter(|o| ended_here.contains(&o.run_id));
            let mut charges: Vec<(&FuelKey, i64)> =
                ended_here.filter_map(|o| Some((o.fuel_key.as_ref()?, o.fuel_used?))).collect();
            for s in stopped {
                if keep_stopped(db, &mut tx.tx, s).await? {
                    kept.push(s.run_id);
                    charges.extend(s.fuel_key.as_ref().zip(s.fuel_used));
                }
            }
            if !charges.is_empty() {
                super::fuel::charge(db, &mut tx.tx, &charges).await?;
            }
            Ok(Released { put_back, kept })
        })
    })
    .await
}

/// Write finished runs and move their tasks on (succeed, fail and retry, fail and give up,
/// snooze); the runs ended. A run no longer running (timed out, cancelled or put back
/// meanwhile) is left as it is, and so is its task.
async fn finish<D: Dialect>(db: &D, tx: &mut TxOf<D>, outcomes: &[&RunOutcome]) -> Result<HashSet<RunId>> {
    let mut ended_here = HashSet::new();
    if outcomes.is_empty() {
        return Ok(ended_here);
    }
    let latest = outcomes.iter().map(|o| o.finished_on).max().unwrap_or_default();
    // In task order, as progress is written (`shared::runs::coalesce_progress`): two writes of
    // the same running tasks lock them in one order, never each waiting for the other.
    let mut sorted = outcomes.to_vec();
    sorted.sort_by_key(|o| o.task_id);
    let (ok, rare): (Vec<&RunOutcome>, Vec<&RunOutcome>) =
        sorted.into_iter().partition(|o| matches!(o.end, RunEnd::Success { .. }));
    // The runs that ended well here (not ended elsewhere meanwhile): their children are queued.
    let mut well: Vec<&RunOutcome> = Vec::new();
    if !ok.is_empty() {
        let done = succeed(db, tx, &ok).await?;
        super::super::stats::record_successes(db, tx, &done, &ok, latest).await?;
        let done: HashSet<RunId> = done.iter().map(|e| e.run_id).collect();
        well.extend(ok.iter().copied().filter(|o| done.contains(&o.run_id)));
        ended_here.extend(done);
    }
    let succeeded: Vec<TaskId> = well.iter().map(|o| o.task_id).collect();
    // The tasks this transaction gives up on: the tasks waiting for them are ended.
    let mut dead = Vec::new();
    // The failed and snoozed runs this transaction ends, for the statistics.
    let mut ended = Vec::new();
    if !rare.is_empty() {
        // The tasks still running the runs that failed or snoozed, locked.
        let running = format!(
            "SELECT run_id AS id, id AS task_queue_id FROM task_queue WHERE id IN ($1) AND last_status = {RUNNING}{}",
            D::FOR_UPDATE
        );
        let ids: Vec<TaskId> = rare.iter().map(|o| o.task_id).collect();
        let outcomes: HashSet<(RunId, TaskId)> = rare.iter().map(|o| (o.run_id, o.task_id)).collect();
        let still = pairs(&db.rows(Some(&mut *tx), &running, args![&ids]).await?)?;
        let still: Vec<(RunId, TaskId)> = still.into_iter().filter(|pair| outcomes.contains(pair)).collect();
        write_running(db, tx, &still).await?;
        let still: HashSet<RunId> = still.iter().map(|(run, _)| *run).collect();
        ended_here.extend(&still);
        for o in rare.into_iter().filter(|o| still.contains(&o.run_id)) {
            match &o.end {
                RunEnd::Failure { failure, partial_results, next } => {
                    fail(db, tx, &Failed { o, failure, results: partial_results.as_deref(), next: *next }).await?;
                    ended.push(o.run_id);
                    if *next == NextStep::GiveUp {
                        dead.push(o.task_id);
                    }
                }
                RunEnd::Snoozed { until, awaiting, partial_results, .. } => {
                    snooze(db, tx, o, *until, partial_results.as_deref()).await?;
                    if let Some(name) = awaiting {
                        super::signals::awaiting(db, tx, o.task_id, name, *until, o.finished_on).await?;
                    }
                    ended.push(o.run_id);
                    well.push(o);
                }
                RunEnd::Success { .. } => {}
            }
        }
    }
    super::add::queue_children(db, tx, &well).await?;
    super::signals::read(db, tx, &well).await?;
    super::deps::succeeded(db, tx, &succeeded, latest).await?;
    super::deps::ended_badly(db, tx, &dead, latest).await?;
    super::super::stats::record(db, tx, &ended, latest).await?;
    Ok(ended_here)
}

/// Write these successes (`ok`, in task order): first those whose queue deletes its successes
/// (`ends`), then the rest, and those of them kept, as any success; the runs ended.
async fn succeed<D: Dialect>(db: &D, tx: &mut TxOf<D>, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
    let wanted = super::ends::wanted(ok);
    let mut done = match wanted.is_empty() {
        true => Vec::new(),
        false => match db.delete_successes(tx, &wanted).await? {
            Some(done) => done,
            None => super::ends::delete(db, tx, &wanted, ok).await?,
        },
    };
    let deleted: HashSet<RunId> = done.iter().map(|e| e.run_id).collect();
    let rest: Vec<&RunOutcome> = ok.iter().copied().filter(|o| !deleted.contains(&o.run_id)).collect();
    if !rest.is_empty() {
        done.extend(db.finish_successes(tx, &rest).await?);
    }
    Ok(done)
}

/// A failed run's outcome, its parts unpacked.
struct Failed<'a> {
    o: &'a RunOutcome,
    failure: &'a Failure,
    results: Option<&'a str>,
    next: NextStep,
}

/// End a locked running run as snoozed, and schedule its task again at `until` with the
/// attempt given back and the snooze counted (and no signal awaited: a wait marks it after).
async fn snooze<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    o: &RunOutcome,
    until: DateTime<Utc>,
    results: Option<&str>,
) -> Result<()> {
    end_run(db, tx, o, RunStatus::Snoozed, results, None).await?;
    let t = Transition::Snooze;
    let task = format!("UPDATE task_queue SET {} WHERE id = $1 AND {}", Set::of(t, "$2"), from::<D>(t));
    db.exec(Some(tx), &task, args![o.task_id, until]).await?;
    Ok(())
}

/// Write how a locked running run ended on its row (written from its task by [`write_running`]):
/// its status, what it reported and used, and its failure if it failed.
async fn end_run<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    o: &RunOutcome,
    status: RunStatus,
    results: Option<&str>,
    failure: Option<&Failure>,
) -> Result<()> {
    let run = "UPDATE task_runs SET status = $2, finished_on = $3, results = coalesce($4, results),
                   error_code = $5, error_message = $6, percents_completed = coalesce($7, percents_completed),
                   duration_ms = $8, component_digest = $9, fuel_used = $10, logs = $11
               WHERE id = $1";
    let values = args![
        o.run_id,
        status.as_str(),
        o.finished_on,
        results,
        failure.map(|f| f.code.as_str()),
        failure.map(|f| f.message.as_str()),
        o.percents_completed.map(i64::from),
        o.duration_ms,
        &o.component_digest,
        o.fuel_used,
        &o.logs,
    ];
    db.exec(Some(tx), run, values).await?;
    Ok(())
}

/// End a locked running run as failed, and retry its task or give up on it. A retry is the task
/// scheduled again: its next run is made by the claim that starts it.
async fn fail<D: Dialect>(db: &D, tx: &mut TxOf<D>, f: &Failed<'_>) -> Result<()> {
    let o = f.o;
    let status = f.failure.status().as_str();
    end_run(db, tx, o, f.failure.status(), f.results, Some(f.failure)).await?;
    match f.next {
        NextStep::RetryAt(at) => {
            let t = Transition::FailAndRetry;
            let task = format!("UPDATE task_queue SET {} WHERE id = $1 AND {}", Set::of(t, "$2"), from::<D>(t));
            db.exec(Some(tx), &task, args![o.task_id, at]).await?;
        }
        NextStep::GiveUp => {
            let t = Transition::FailAndGiveUp;
            let set = Set::of(t, "$3").ended_as("$2");
            let task = format!("UPDATE task_queue SET {set} WHERE id = $1 AND {}", from::<D>(t));
            db.exec(Some(tx), &task, args![o.task_id, status, o.finished_on]).await?;
        }
    }
    Ok(())
}

/// Write these running runs (run id, task id; their tasks locked and running them) from their
/// tasks' rows to `task_runs`, as running, for the transition that ends them.
pub async fn write_running<D: Dialect>(db: &D, tx: &mut TxOf<D>, runs: &[(RunId, TaskId)]) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let tasks: Vec<TaskId> = runs.iter().map(|(_, task)| *task).collect();
    let sql = format!(
        "INSERT INTO task_runs ({RUN_COLUMNS}, status, percents_completed, results)
         SELECT {RUN_FROM_TASK}, {RUNNING}, coalesce(q.run_percent, 0), q.run_results FROM task_queue q
         WHERE q.id IN ($1) AND q.last_status = {RUNNING}"
    );
    db.exec(Some(tx), &sql, args![&tasks]).await?;
    Ok(())
}

/// `(id, task_queue_id)` rows.
pub fn pairs<R: Cells>(found: &[R]) -> Result<Vec<(RunId, TaskId)>> {
    found.iter().map(|r| Ok((rows::id(r, "id")?, rows::id(r, "task_queue_id")?))).collect()
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
    write_running(db, tx, runs).await?;
    let (run_ids, task_ids): (Vec<RunId>, Vec<TaskId>) = runs.iter().copied().unzip();
    let end = format!(
        "UPDATE task_runs SET status = {TIMEOUT}, finished_on = $2, error_code = $3, error_message = $4,
             duration_ms = {}
         WHERE id IN ($1) AND status = {RUNNING}",
        D::MS_SINCE_START
    );
    db.exec(Some(&mut *tx), &end, args![&run_ids, now, why.code, why.message]).await?;
    let timeout = TIMEOUT.to_string();
    // It enters no state that is timed (awaiting retry): no time is written.
    let set = Set::of(Transition::TimeOut, "NULL").ended_as(&timeout);
    let count = format!("UPDATE task_queue SET {set} WHERE id IN ($1) AND {}", from::<D>(Transition::TimeOut));
    db.exec(Some(&mut *tx), &count, args![&task_ids]).await?;
    super::super::stats::record(db, tx, &run_ids, now).await
}

/// Return running runs to the queue, each due at its time, uncounted (sorted by run); the runs
/// put back (one no longer running needs nothing). A run put back leaves no run row: it ran no
/// guest to its end (it waited for a slot, or its worker lost its claim's answer or its
/// heartbeat, or was stopping), and the claim that starts the task again makes the run anew,
/// with the same attempt.
async fn put_back<D: Dialect>(db: &D, tx: &mut TxOf<D>, runs: &[(RunId, DateTime<Utc>)]) -> Result<Vec<RunId>> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    // Their tasks from one read of the running tasks (few, and indexed; no index holds run ids on
    // every task), then each updated by its key. (Updated by run id, each put-back ranged over
    // every running task and, on MariaDB and MySQL, waited on the rows other workers held: seconds
    // each, for the hundreds a claim of slow runs after fast ones sends back.)
    let look = format!(
        "SELECT run_id AS id, id AS task_queue_id FROM task_queue WHERE run_id IN ($1) AND last_status = {RUNNING}"
    );
    let ids: Vec<RunId> = runs.iter().map(|&(run, _)| run).collect();
    let tasks: HashMap<RunId, TaskId> =
        pairs(&db.rows(Some(&mut *tx), &look, args![&ids]).await?)?.into_iter().collect();
    let t = Transition::PutBack;
    let sql = format!("UPDATE task_queue SET {} WHERE id = $1 AND run_id = $2 AND {}", Set::of(t, "$3"), from::<D>(t));
    let mut back = Vec::with_capacity(runs.len());
    for &(run, at) in runs {
        let Some(&task) = tasks.get(&run) else { continue };
        if db.exec(Some(&mut *tx), &sql, args![task, run, at]).await? == 1 {
            back.push(run);
        }
    }
    Ok(back)
}

/// Keep what a run stopped from outside logged and used, on its row ended elsewhere; false when
/// the row is running or scheduled again, or already has them.
async fn keep_stopped<D: Dialect>(db: &D, tx: &mut TxOf<D>, r: &StoppedRun) -> Result<bool> {
    let sql = format!(
        "UPDATE task_runs SET fuel_used = $2, logs = $3, component_digest = coalesce(component_digest, $4)
         WHERE id = $1 AND status NOT IN ({SCHEDULED}, {RUNNING}) AND fuel_used IS NULL AND logs IS NULL"
    );
    let kept = db.exec(Some(tx), &sql, args![r.run_id, r.fuel_used, &r.logs, &r.component_digest]).await?;
    Ok(kept > 0)
}
