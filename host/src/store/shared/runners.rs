//! Runners: registration under a limit, heartbeats, and timing out the dead.

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::Cells;
use super::super::rows;
use super::super::sql::{args, RUNNER_RUNNING, RUNNER_TIMEOUT, RUNNING};
use super::super::types::Served;
use super::runs::RUNNING_TASK_RUN;
use crate::error::{Error, Result};
use crate::model::*;

/// The `task_leases` row whose lock serializes registrations, so that two runners cannot both
/// take the last place under the limit (migration 0005 writes it).
const REGISTRATION: &str = "runner-registration";

/// The server's time, when the database has a clock of its own.
pub async fn server_time<D: Dialect>(db: &D) -> Result<Option<DateTime<Utc>>> {
    let Some(sql) = D::SERVER_TIME else { return Ok(None) };
    match db.rows(None, sql, &[]).await?.first() {
        Some(row) => row.time("t"),
        None => Err(Error::invalid("server time", "the database said nothing")),
    }
}

pub async fn register<D: Dialect>(db: &D, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId> {
    let lock = format!("SELECT name FROM task_leases WHERE name = $1{}", D::FOR_UPDATE);
    let count = format!("SELECT count(*) AS n FROM task_runners WHERE status = {RUNNER_RUNNING}");
    let insert = format!(
        "INSERT INTO task_runners (process_id, host_name, started_on, status, heartbeat_on)
         VALUES ($1, $2, $3, {RUNNER_RUNNING}, $3)"
    );
    let (count, insert, lock) = (&count, &insert, &lock);
    transaction(db, |tx| {
        Box::pin(async move {
            if db.rows(Some(&mut tx.tx), lock, args![REGISTRATION]).await?.is_empty() {
                let restore = "INSERT INTO task_leases (name, holder, expires_on) VALUES ($1, '', $2)";
                db.exec(Some(&mut tx.tx), restore, args![REGISTRATION, now]).await?;
            }
            let live = match db.rows(Some(&mut tx.tx), count, &[]).await?.first() {
                Some(r) => rows::id(r, "n")?.max(0) as u64,
                None => 0,
            };
            if live >= u64::from(limit) {
                return Err(Error::RunnerLimit { live, limit });
            }
            let id = db.insert(Some(&mut tx.tx), insert, args![i64::from(pid), host, now]).await?;
            Ok(id)
        })
    })
    .await
}

/// False when the runner is no longer running (the overseer timed it out).
pub async fn heartbeat<D: Dialect>(db: &D, runner: RunnerId, now: DateTime<Utc>) -> Result<bool> {
    let beat = format!("UPDATE task_runners SET heartbeat_on = $2 WHERE id = $1 AND status = {RUNNER_RUNNING}");
    if db.exec(None, &beat, args![runner, now]).await? == 1 {
        return Ok(true);
    }
    // MySQL counts changed rows: a heartbeat at the same time changes none.
    let live = format!("SELECT id FROM task_runners WHERE id = $1 AND status = {RUNNER_RUNNING}");
    Ok(!db.rows(None, &live, args![runner]).await?.is_empty())
}

pub async fn finish<D: Dialect>(db: &D, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()> {
    let sql =
        format!("UPDATE task_runners SET status = $2, finished_on = $3 WHERE id = $1 AND status = {RUNNER_RUNNING}");
    db.exec(None, &sql, args![runner, status.as_str(), now]).await?;
    Ok(())
}

pub async fn live<D: Dialect>(db: &D) -> Result<Vec<Runner>> {
    let sql = format!("SELECT * FROM task_runners WHERE status = {RUNNER_RUNNING} ORDER BY id");
    db.rows(None, &sql, &[]).await?.iter().map(rows::runner).collect()
}

/// Runners (live or not) whose latest heartbeat is at or after `since`.
pub async fn seen_since<D: Dialect>(db: &D, since: DateTime<Utc>) -> Result<Vec<Runner>> {
    let sql = "SELECT * FROM task_runners WHERE heartbeat_on >= $1 ORDER BY id";
    db.rows(None, sql, args![since]).await?.iter().map(rows::runner).collect()
}

/// Record the handlers a runner serves: a JSON object of name → component digest.
pub async fn set_handlers<D: Dialect>(db: &D, runner: RunnerId, handlers: &Served) -> Result<()> {
    let json = serde_json::to_string(handlers).map_err(|e| Error::invalid("handlers", e.to_string()))?;
    let (sql, json) = ("UPDATE task_runners SET handlers = $1 WHERE id = $2", &json);
    transaction(db, |tx| Box::pin(async move { db.exec(Some(&mut tx.tx), sql, args![json, runner]).await.map(drop) }))
        .await
}

/// Record the queues a runner claims from (`["*"]`: every queue).
pub async fn set_queues<D: Dialect>(db: &D, runner: RunnerId, queues: &[String]) -> Result<()> {
    let json = serde_json::to_string(queues).map_err(|e| Error::invalid("queues", e.to_string()))?;
    let sql = "UPDATE task_runners SET queues = $1 WHERE id = $2";
    db.exec(None, sql, args![json.as_str(), runner]).await.map(drop)
}

/// Mark runners timed out, and their running runs with them; how many runs.
pub async fn time_out<D: Dialect>(db: &D, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64> {
    if runners.is_empty() {
        return Ok(0);
    }
    let mark = format!(
        "UPDATE task_runners SET status = {RUNNER_TIMEOUT}, finished_on = $2
         WHERE id IN ($1) AND status = {RUNNER_RUNNING}"
    );
    let runs = format!(
        "SELECT {RUNNING_TASK_RUN} FROM task_queue WHERE last_status = {RUNNING} AND run_runner_id IN ($1){}",
        D::FOR_UPDATE
    );
    let (mark, runs) = (&mark, &runs);
    transaction(db, |tx| {
        Box::pin(async move {
            db.exec(Some(&mut tx.tx), mark, args![runners, now]).await?;
            let lost = db.rows(Some(&mut tx.tx), runs, args![runners]).await?;
            let lost = super::super::transitions::runs::pairs(&lost)?;
            super::super::transitions::runs::time_out(db, &mut tx.tx, &lost, now, super::super::transitions::LOST)
                .await?;
            Ok(lost.len() as u64)
        })
    })
    .await
}

/// Time out, as lost, up to `limit` runs still running under a runner that is not running; how
/// many. None should be there: a claim takes nothing for a runner no longer running, and a
/// runner is timed out with its runs. This sweeps up what a crash between the two, or an older
/// host's claim, may have left, which nothing else would ever end (a run's own timeout aside).
pub async fn time_out_orphans<D: Dialect>(db: &D, now: DateTime<Utc>, limit: u32) -> Result<u64> {
    let orphans = format!(
        "SELECT {RUNNING_TASK_RUN} FROM task_queue
         WHERE last_status = {RUNNING} AND NOT EXISTS (
             SELECT 1 FROM task_runners w WHERE w.id = task_queue.run_runner_id AND w.status = {RUNNER_RUNNING})
         LIMIT $1{}",
        D::SKIP_LOCKED
    );
    let orphans = &orphans;
    transaction(db, |tx| {
        Box::pin(async move {
            let lost =
                super::super::transitions::runs::pairs(&db.rows(Some(&mut tx.tx), orphans, args![limit]).await?)?;
            super::super::transitions::runs::time_out(db, &mut tx.tx, &lost, now, super::super::transitions::LOST)
                .await?;
            Ok(lost.len() as u64)
        })
    })
    .await
}
