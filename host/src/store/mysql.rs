//! The MySQL 8 / MariaDB 10.6+ store.
//!
//! Claims select due tasks `FOR UPDATE SKIP LOCKED` and mark them in the same transaction.
//! There is no `UPDATE … RETURNING` here, so rows are locked and read first, then updated.
//! Batches travel as one JSON parameter unpacked with `JSON_TABLE`. InnoDB deadlocks and lock
//! wait timeouts are retried, not fatal.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{MySql, MySqlConnection, QueryBuilder, Row};

use super::{n32, status, Backend, RetryCandidate, RetryPlan, Store, StoreOptions};
use crate::error::{Error, Result};
use crate::model::*;

super::native_row_decoders!(MySqlRow);

/// Deadlocks and lock waits are tried again this many times.
const DEADLOCK_RETRIES: u32 = 8;

/// JSON time format for JSON_TABLE's DATETIME(6) columns.
fn jts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
}

fn is_deadlock(e: &Error) -> bool {
    match e {
        Error::Database(sqlx::Error::Database(db)) => {
            matches!(db.code().as_deref(), Some("40001") | Some("HY000"))
                && db
                    .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|m| matches!(m.number(), 1213 | 1205))
        }
        _ => false,
    }
}

async fn retry_deadlocks<T, F, Fut>(mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempt = 0;
    loop {
        match f().await {
            Err(e) if attempt < DEADLOCK_RETRIES && is_deadlock(&e) => {
                attempt += 1;
                tracing::debug!(attempt, "deadlock, trying again: {e}");
                tokio::time::sleep(Duration::from_millis(2u64 << attempt.min(6))).await;
            }
            other => return other,
        }
    }
}

/// `(?, ?, ...)` with one placeholder per value.
fn push_in<'a, T: 'a + sqlx::Encode<'a, MySql> + sqlx::Type<MySql> + Send + Clone>(
    qb: &mut QueryBuilder<'a, MySql>,
    values: &'a [T],
) {
    qb.push("(");
    let mut sep = qb.separated(", ");
    for v in values {
        sep.push_bind(v.clone());
    }
    sep.push_unseparated(")");
}

/// ` AND task_handler_class IN (…)` when there is a filter; an empty list matches nothing.
fn push_handler_filter<'a>(qb: &mut QueryBuilder<'a, MySql>, handlers: Option<&'a [String]>) {
    if let Some(h) = handlers {
        qb.push(" AND task_handler_class IN ");
        if h.is_empty() {
            qb.push("(NULL)");
        } else {
            push_in(qb, h);
        }
    }
}

/// The MySQL/MariaDB implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
}

impl MySqlStore {
    /// Connect to the database a `mysql://` (or `mariadb://`) URL names.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self> {
        let url_ = url.replacen("mariadb://", "mysql://", 1);
        let opts: MySqlConnectOptions =
            url_.parse().map_err(|e: sqlx::Error| Error::BadUrl { url: super::redact(url), reason: e.to_string() })?;
        super::first_connection::<sqlx::MySqlConnection>(url, &opts, options.connect_timeout).await?;
        let pool = MySqlPoolOptions::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(opts);
        Ok(MySqlStore { pool })
    }

    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Queue validated tasks on the caller's connection or transaction.
    pub async fn add_tasks_in(conn: &mut MySqlConnection, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        let mut out = Vec::with_capacity(tasks.len());
        if tasks.iter().any(|t| t.unique_key.is_some()) || tasks.len() == 1 {
            for t in tasks {
                out.push(add_one(conn, t, now).await?);
            }
            return Ok(out);
        }
        for chunk in tasks.chunks(2_000) {
            let mut qb = QueryBuilder::<MySql>::new(
                "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
                     max_retries, queue, priority, run_timeout, backoff_base_ms, backoff_max_ms) ",
            );
            qb.push_values(chunk, |mut b, t| {
                b.push_bind(now)
                    .push_bind(t.queued_by.clone())
                    .push_bind(t.scheduled_on.unwrap_or(now))
                    .push_bind(t.handler.clone())
                    .push_bind(t.data.clone())
                    .push_bind(t.max_retries as i64)
                    .push_bind(t.queue.clone())
                    .push_bind(t.priority as i64)
                    .push_bind(t.run_timeout.map(|d| d.as_secs() as i64))
                    .push_bind(t.backoff.base_ms)
                    .push_bind(t.backoff.max_ms);
            });
            let r = qb.build().execute(&mut *conn).await?;
            // One multi-row INSERT gets its ids in one block (InnoDB, any auto-increment lock
            // mode, for a simple insert), from LAST_INSERT_ID, `auto_increment_increment` apart.
            let step: i64 = sqlx::query_scalar("SELECT CAST(@@SESSION.auto_increment_increment AS SIGNED)")
                .fetch_one(&mut *conn)
                .await?;
            let first = r.last_insert_id() as i64;
            let ids: Vec<i64> = (0..chunk.len() as i64).map(|i| first + i * step.max(1)).collect();
            let mut qb = QueryBuilder::<MySql>::new("INSERT INTO task_runs (task_queue_id, attempt, created_on) ");
            qb.push_values(&ids, |mut b, id| {
                b.push_bind(*id).push_bind(1i64).push_bind(now);
            });
            qb.build().execute(&mut *conn).await?;
            out.extend(ids.into_iter().map(|id| Added { id, created: true }));
        }
        Ok(out)
    }
}

/// One task and its first run. Only a duplicate unique key is tolerated (it returns the task
/// holding the key): every other error is an error (no `INSERT IGNORE`, which turns over-long
/// values into silent truncation).
async fn add_one(conn: &mut MySqlConnection, t: &NewTask, now: DateTime<Utc>) -> Result<Added> {
    let r = sqlx::query(
        "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
             max_retries, queue, priority, unique_key, active_unique_key, run_timeout,
             backoff_base_ms, backoff_max_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(now)
    .bind(&t.queued_by)
    .bind(t.scheduled_on.unwrap_or(now))
    .bind(&t.handler)
    .bind(&t.data)
    .bind(t.max_retries as i64)
    .bind(&t.queue)
    .bind(t.priority as i64)
    .bind(&t.unique_key)
    .bind(&t.unique_key)
    .bind(t.run_timeout.map(|d| d.as_secs() as i64))
    .bind(t.backoff.base_ms)
    .bind(t.backoff.max_ms)
    .execute(&mut *conn)
    .await;
    let duplicate = match &r {
        Err(sqlx::Error::Database(db)) => db.is_unique_violation() && t.unique_key.is_some(),
        _ => false,
    };
    if !duplicate {
        let id = r?.last_insert_id() as i64;
        sqlx::query("INSERT INTO task_runs (task_queue_id, attempt, created_on) VALUES (?, 1, ?)")
            .bind(id)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        return Ok(Added { id, created: true });
    }
    let id: i64 = sqlx::query_scalar("SELECT id FROM task_queue WHERE active_unique_key = ?")
        .bind(&t.unique_key)
        .fetch_one(&mut *conn)
        .await?;
    Ok(Added { id, created: false })
}

async fn mark_tasks_timed_out(tx: &mut MySqlConnection, task_ids: &[i64]) -> Result<()> {
    if task_ids.is_empty() {
        return Ok(());
    }
    let mut qb = QueryBuilder::<MySql>::new(
        "UPDATE task_queue SET last_status = 'timeout', task_runs_failed = task_runs_failed + 1 WHERE id IN ",
    );
    push_in(&mut qb, task_ids);
    qb.build().execute(&mut *tx).await?;
    Ok(())
}

async fn insert_run(tx: &mut MySqlConnection, task_id: TaskId, attempt: u32, now: DateTime<Utc>) -> Result<RunId> {
    let r = sqlx::query("INSERT INTO task_runs (task_queue_id, attempt, created_on) VALUES (?, ?, ?)")
        .bind(task_id)
        .bind(attempt as i64)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    Ok(r.last_insert_id() as i64)
}

const RUNNER_LOST: &str = "the runner running this run stopped (no heartbeat or process gone)";
const RUN_TIMED_OUT: &str = "the run did not finish within its run timeout";

/// Time out these locked `(run id, task id)` runs with `code`, and count the failure on their tasks.
async fn time_out_runs(
    tx: &mut MySqlConnection,
    runs: &[(i64, i64)],
    now: DateTime<Utc>,
    code: &str,
    message: &str,
) -> Result<()> {
    if runs.is_empty() {
        return Ok(());
    }
    let run_ids: Vec<i64> = runs.iter().map(|(r, _)| *r).collect();
    let mut qb = QueryBuilder::<MySql>::new("UPDATE task_runs SET status = 'timeout', finished_on = ");
    qb.push_bind(now).push(", error_code = ").push_bind(code).push(", error_message = ").push_bind(message);
    qb.push(" WHERE id IN ");
    push_in(&mut qb, &run_ids);
    qb.build().execute(&mut *tx).await?;
    let tasks: Vec<i64> = runs.iter().map(|(_, t)| *t).collect();
    mark_tasks_timed_out(tx, &tasks).await
}

/// Running runs (locked) of these runs' ids: (run id, task id, attempt).
async fn lock_running(tx: &mut MySqlConnection, run_ids: &[i64]) -> Result<Vec<(i64, i64, i64)>> {
    let mut qb = QueryBuilder::<MySql>::new(
        "SELECT id, task_queue_id, attempt FROM task_runs WHERE status = 'running' AND id IN ",
    );
    push_in(&mut qb, run_ids);
    qb.push(" FOR UPDATE");
    Ok(qb.build_query_as().fetch_all(&mut *tx).await?)
}

impl MySqlStore {
    async fn claim_once(
        &self,
        runner: RunnerId,
        queues: &[String],
        handlers: Option<&[String]>,
        limit: u32,
        now: DateTime<Utc>,
        default_timeout: Duration,
    ) -> Result<Vec<ClaimedRun>> {
        let mut tx = self.pool.begin().await?;
        let mut qb = QueryBuilder::<MySql>::new(
            "SELECT id, task_handler_class, task_data, queued_by_id, max_retries, task_runs_failed, run_timeout,
                    backoff_base_ms, backoff_max_ms
             FROM task_queue WHERE last_status = 'scheduled' AND queue IN ",
        );
        push_in(&mut qb, queues);
        if let Some(handlers) = handlers {
            qb.push(" AND task_handler_class IN ");
            push_in(&mut qb, handlers);
        }
        qb.push(" AND scheduled_on <= ").push_bind(now);
        qb.push(" ORDER BY priority, scheduled_on, id LIMIT ").push_bind(limit as i64);
        qb.push(" FOR UPDATE SKIP LOCKED");
        let rows = qb.build().fetch_all(&mut *tx).await?;
        if rows.is_empty() {
            tx.rollback().await?;
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.try_get("id")).collect::<std::result::Result<_, _>>()?;
        let mut qb = QueryBuilder::<MySql>::new("UPDATE task_queue SET last_status = 'running' WHERE id IN ");
        push_in(&mut qb, &ids);
        qb.build().execute(&mut *tx).await?;
        let mut timeouts = Vec::with_capacity(rows.len());
        for r in &rows {
            let at = super::timeout_on(now, r.try_get("run_timeout")?, default_timeout);
            timeouts.push(json!({"id": r.try_get::<i64, _>("id")?, "t": jts(at)}));
        }
        sqlx::query(
            "UPDATE task_runs r
             JOIN JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$.id', t DATETIME(6) PATH '$.t')) AS j
               ON r.task_queue_id = j.id
             SET r.status = 'running', r.started_on = ?, r.task_runner_id = ?, r.timeout_on = j.t
             WHERE r.status = 'scheduled'",
        )
        .bind(serde_json::Value::Array(timeouts).to_string())
        .bind(now)
        .bind(runner)
        .execute(&mut *tx)
        .await?;
        let mut qb = QueryBuilder::<MySql>::new(
            "SELECT task_queue_id, id, attempt FROM task_runs WHERE status = 'running' AND task_runner_id = ",
        );
        qb.push_bind(runner).push(" AND task_queue_id IN ");
        push_in(&mut qb, &ids);
        let run_rows: Vec<(i64, i64, i64)> = qb.build_query_as().fetch_all(&mut *tx).await?;
        let by_task: std::collections::HashMap<i64, (i64, i64)> =
            run_rows.into_iter().map(|(t, r, a)| (t, (r, a))).collect();
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let task_id: i64 = r.try_get("id")?;
            let (run_id, attempt) = match by_task.get(&task_id) {
                Some(found) => *found,
                None => {
                    // A scheduled task without its scheduled run (should not happen): make one.
                    let last: Option<i64> =
                        sqlx::query_scalar("SELECT max(attempt) FROM task_runs WHERE task_queue_id = ?")
                            .bind(task_id)
                            .fetch_one(&mut *tx)
                            .await?;
                    let attempt = last.unwrap_or(0) + 1;
                    let res = sqlx::query(
                        "INSERT INTO task_runs (task_queue_id, attempt, created_on, started_on, status, task_runner_id)
                         VALUES (?, ?, ?, ?, 'running', ?)",
                    )
                    .bind(task_id)
                    .bind(attempt)
                    .bind(now)
                    .bind(now)
                    .bind(runner)
                    .execute(&mut *tx)
                    .await?;
                    (res.last_insert_id() as i64, attempt)
                }
            };
            out.push(ClaimedRun {
                run_id,
                task_id,
                attempt: n32(attempt).max(1),
                handler: r.try_get_unchecked("task_handler_class")?,
                data: r.try_get_unchecked("task_data")?,
                queued_by: r.try_get_unchecked("queued_by_id")?,
                max_retries: n32(r.try_get("max_retries")?),
                task_runs_failed: n32(r.try_get("task_runs_failed")?),
                backoff: BackoffSettings {
                    base_ms: r.try_get("backoff_base_ms")?,
                    max_ms: r.try_get("backoff_max_ms")?,
                },
                started_on: now,
                timeout_on: super::timeout_on(now, r.try_get("run_timeout")?, default_timeout),
            });
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn finish_once(&self, outcomes: &[RunOutcome]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let ids: Vec<i64> = outcomes.iter().map(|o| o.run_id).collect();
        let running = lock_running(&mut tx, &ids).await?;
        let attempts: std::collections::HashMap<i64, i64> = running.iter().map(|(r, _, a)| (*r, *a)).collect();
        // Successes, the common case, in two statements for the whole batch.
        let ok: Vec<&RunOutcome> =
            outcomes.iter().filter(|o| o.next == NextStep::Done && attempts.contains_key(&o.run_id)).collect();
        if !ok.is_empty() {
            let rows = serde_json::Value::Array(
                ok.iter()
                    .map(|o| {
                        let mut v =
                            json!({"id": o.run_id, "t": o.task_id, "f": jts(o.finished_on), "ms": o.duration_ms});
                        // Absent keys read as NULL; JSON null might read as the text "null".
                        if let Some(r) = &o.results {
                            v["r"] = json!(r);
                        }
                        if let Some(d) = &o.component_digest {
                            v["dg"] = json!(d);
                        }
                        if let Some(f) = o.fuel_used {
                            v["fu"] = json!(f);
                        }
                        if let Some(l) = &o.logs {
                            v["lg"] = json!(l);
                        }
                        v
                    })
                    .collect(),
            )
            .to_string();
            sqlx::query(
                "UPDATE task_runs r
                 JOIN JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$.id', f DATETIME(6) PATH '$.f',
                      res LONGTEXT PATH '$.r', ms BIGINT PATH '$.ms', dg VARCHAR(64) PATH '$.dg',
                      fu BIGINT PATH '$.fu', lg LONGTEXT PATH '$.lg')) AS j ON r.id = j.id
                 SET r.status = 'success', r.finished_on = j.f, r.results = j.res, r.percents_completed = 100,
                     r.duration_ms = j.ms, r.component_digest = j.dg, r.fuel_used = j.fu, r.logs = j.lg",
            )
            .bind(&rows)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE task_queue q
                 JOIN JSON_TABLE(?, '$[*]' COLUMNS (t BIGINT PATH '$.t', f DATETIME(6) PATH '$.f')) AS j ON q.id = j.t
                 SET q.last_status = 'success', q.task_runs_failed = 0, q.finished_on = j.f, q.active_unique_key = NULL",
            )
            .bind(&rows)
            .execute(&mut *tx)
            .await?;
        }
        for o in outcomes.iter().filter(|o| o.next != NextStep::Done) {
            let Some(attempt) = attempts.get(&o.run_id) else {
                continue; // timed out meanwhile: the overseer already moved the task on
            };
            sqlx::query(
                "UPDATE task_runs SET status = ?, finished_on = ?, results = coalesce(?, results),
                     error_code = ?, error_message = ?, percents_completed = coalesce(?, percents_completed),
                     duration_ms = ?, component_digest = ?, fuel_used = ?, logs = ?
                 WHERE id = ?",
            )
            .bind(o.status.as_str())
            .bind(o.finished_on)
            .bind(&o.results)
            .bind(&o.error_code)
            .bind(&o.error_message)
            .bind(o.percents_completed.map(i64::from))
            .bind(o.duration_ms)
            .bind(&o.component_digest)
            .bind(o.fuel_used)
            .bind(&o.logs)
            .bind(o.run_id)
            .execute(&mut *tx)
            .await?;
            match o.next {
                NextStep::RetryAt(at) => {
                    sqlx::query(
                        "UPDATE task_queue SET last_status = 'scheduled', task_runs_failed = task_runs_failed + 1,
                             scheduled_on = ? WHERE id = ?",
                    )
                    .bind(at)
                    .bind(o.task_id)
                    .execute(&mut *tx)
                    .await?;
                    insert_run(&mut tx, o.task_id, n32(*attempt) + 1, o.finished_on).await?;
                }
                NextStep::GiveUp | NextStep::Done => {
                    sqlx::query(
                        "UPDATE task_queue SET last_status = ?, task_runs_failed = task_runs_failed + 1,
                             finished_on = ?, gave_up_on = ?, active_unique_key = NULL WHERE id = ?",
                    )
                    .bind(o.status.as_str())
                    .bind(o.finished_on)
                    .bind(o.finished_on)
                    .bind(o.task_id)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }
}

#[async_trait]
impl Store for MySqlStore {
    fn backend(&self) -> Backend {
        Backend::MySql
    }

    async fn migrate(&self) -> Result<()> {
        sqlx::migrate!("../migrations/mysql").run(&self.pool).await?;
        Ok(())
    }

    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        retry_deadlocks(|| async {
            let mut tx = self.pool.begin().await?;
            let added = Self::add_tasks_in(&mut tx, tasks, now).await?;
            tx.commit().await?;
            Ok(added)
        })
        .await
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<Task>> {
        let row = sqlx::query("SELECT * FROM task_queue WHERE id = ?").bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(task_from_row).transpose()
    }

    async fn runs_of(&self, task_id: TaskId) -> Result<Vec<Run>> {
        let rows = sqlx::query("SELECT * FROM task_runs WHERE task_queue_id = ? ORDER BY id")
            .bind(task_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn list_tasks(&self, f: &TaskFilter) -> Result<Vec<Task>> {
        let rows = sqlx::query(
            "SELECT * FROM task_queue
             WHERE (? IS NULL OR last_status = ?) AND (? IS NULL OR queue = ?)
               AND (? IS NULL OR task_handler_class = ?) AND (NOT ? OR gave_up_on IS NOT NULL)
             ORDER BY id LIMIT ?",
        )
        .bind(f.status.map(|s| s.as_str()))
        .bind(f.status.map(|s| s.as_str()))
        .bind(&f.queue)
        .bind(&f.queue)
        .bind(&f.handler)
        .bind(&f.handler)
        .bind(f.dead)
        .bind(f.limit.map(i64::from).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(task_from_row).collect()
    }

    async fn counts(&self) -> Result<QueueCounts> {
        let rows = sqlx::query("SELECT last_status, count(*) AS n FROM task_queue GROUP BY last_status")
            .fetch_all(&self.pool)
            .await?;
        let mut c = QueueCounts::default();
        for r in rows {
            let (s, n): (String, i64) = (r.try_get_unchecked("last_status")?, r.try_get("n")?);
            c.set(status("task_queue", &s)?, n.max(0) as u64);
        }
        let dead: i64 = sqlx::query_scalar("SELECT count(*) FROM task_queue WHERE gave_up_on IS NOT NULL")
            .fetch_one(&self.pool)
            .await?;
        c.dead = dead.max(0) as u64;
        Ok(c)
    }

    async fn retry_task(&self, id: TaskId, now: DateTime<Utc>) -> Result<RunId> {
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE task_queue SET last_status = 'scheduled', scheduled_on = ?, task_runs_failed = 0,
                 gave_up_on = NULL, finished_on = NULL, active_unique_key = unique_key
             WHERE id = ? AND gave_up_on IS NOT NULL",
        )
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map(|r| r.rows_affected());
        if super::replayed(id, updated)? == 0 {
            let task = sqlx::query("SELECT * FROM task_queue WHERE id = ?").bind(id).fetch_optional(&mut *tx).await?;
            return Err(super::not_replayable(id, task.as_ref().map(task_from_row).transpose()?));
        }
        let last: Option<i64> = sqlx::query_scalar("SELECT max(attempt) FROM task_runs WHERE task_queue_id = ?")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let run = insert_run(&mut tx, id, n32(last.unwrap_or(0)) + 1, now).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn register_runner(&self, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId> {
        let mut conn = self.pool.acquire().await?;
        // Serialize registrations so two runners cannot both take the last slot.
        let got: Option<i64> =
            sqlx::query_scalar("SELECT GET_LOCK('taskhost.task_runners', 10)").fetch_one(&mut *conn).await?;
        if got != Some(1) {
            return Err(Error::invalid("runner registration", "could not take the registration lock within 10 s"));
        }
        let result = async {
            let live: i64 = sqlx::query_scalar("SELECT count(*) FROM task_runners WHERE status = 'running'")
                .fetch_one(&mut *conn)
                .await?;
            if live >= limit as i64 {
                return Err(Error::RunnerLimit { live: live.max(0) as u64, limit });
            }
            let r = sqlx::query(
                "INSERT INTO task_runners (process_id, host_name, started_on, status, heartbeat_on)
                 VALUES (?, ?, ?, 'running', ?)",
            )
            .bind(pid as i64)
            .bind(host)
            .bind(now)
            .bind(now)
            .execute(&mut *conn)
            .await?;
            Ok(r.last_insert_id() as i64)
        }
        .await;
        let _ = sqlx::query("SELECT RELEASE_LOCK('taskhost.task_runners')").execute(&mut *conn).await;
        result
    }

    async fn heartbeat(&self, runner: RunnerId, now: DateTime<Utc>) -> Result<bool> {
        let r = sqlx::query("UPDATE task_runners SET heartbeat_on = ? WHERE id = ? AND status = 'running'")
            .bind(now)
            .bind(runner)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 1 {
            return Ok(true);
        }
        // MySQL counts changed rows: an unchanged heartbeat time reads as 0 rows.
        let live: Option<i64> = sqlx::query_scalar("SELECT 1 FROM task_runners WHERE id = ? AND status = 'running'")
            .bind(runner)
            .fetch_optional(&self.pool)
            .await?;
        Ok(live.is_some())
    }

    async fn finish_runner(&self, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE task_runners SET status = ?, finished_on = ? WHERE id = ? AND status = 'running'")
            .bind(status.as_str())
            .bind(now)
            .bind(runner)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn live_runners(&self) -> Result<Vec<Runner>> {
        let rows = sqlx::query("SELECT * FROM task_runners WHERE status = 'running' ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(runner_from_row).collect()
    }

    async fn runners_seen_since(&self, since: DateTime<Utc>) -> Result<Vec<Runner>> {
        let rows = sqlx::query("SELECT * FROM task_runners WHERE heartbeat_on >= ? ORDER BY id")
            .bind(since)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(runner_from_row).collect()
    }

    async fn set_runner_handlers(&self, runner: RunnerId, handlers: &super::Served) -> Result<()> {
        sqlx::query("UPDATE task_runners SET handlers = ? WHERE id = ?")
            .bind(super::served_json(handlers)?)
            .bind(runner)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn give_up_unserved(
        &self,
        served: &[String],
        due_before: DateTime<Utc>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64> {
        retry_deadlocks(|| async {
            let mut tx = self.pool.begin().await?;
            let mut qb = QueryBuilder::<MySql>::new(
                "SELECT id FROM task_queue WHERE last_status = 'scheduled' AND scheduled_on <= ",
            );
            qb.push_bind(due_before);
            if !served.is_empty() {
                qb.push(" AND task_handler_class NOT IN ");
                push_in(&mut qb, served);
            }
            qb.push(" LIMIT ").push_bind(limit as i64).push(" FOR UPDATE SKIP LOCKED");
            let ids: Vec<i64> = qb.build_query_scalar().fetch_all(&mut *tx).await?;
            if ids.is_empty() {
                tx.rollback().await?;
                return Ok(0);
            }
            let mut qb = QueryBuilder::<MySql>::new(
                "UPDATE task_queue SET last_status = 'error', task_runs_failed = task_runs_failed + 1, finished_on = ",
            );
            qb.push_bind(now).push(", gave_up_on = ").push_bind(now).push(", active_unique_key = NULL WHERE id IN ");
            push_in(&mut qb, &ids);
            qb.build().execute(&mut *tx).await?;
            let mut qb = QueryBuilder::<MySql>::new("UPDATE task_runs SET status = 'error', finished_on = ");
            qb.push_bind(now)
                .push(", error_code = ")
                .push_bind(crate::sandbox::codes::HANDLER_NOT_FOUND)
                .push(", error_message = ")
                .push_bind(super::UNSERVED)
                .push(" WHERE status = 'scheduled' AND task_queue_id IN ");
            push_in(&mut qb, &ids);
            qb.build().execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(ids.len() as u64)
        })
        .await
    }

    async fn claim_for(
        &self,
        runner: RunnerId,
        queues: &[String],
        handlers: Option<&[String]>,
        limit: u32,
        now: DateTime<Utc>,
        default_timeout: Duration,
    ) -> Result<Vec<ClaimedRun>> {
        if limit == 0 || queues.is_empty() || handlers.is_some_and(|h| h.is_empty()) {
            return Ok(Vec::new());
        }
        retry_deadlocks(|| self.claim_once(runner, queues, handlers, limit, now, default_timeout)).await
    }

    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()> {
        for u in updates {
            sqlx::query(
                "UPDATE task_runs SET percents_completed = coalesce(?, percents_completed), results = coalesce(?, results)
                 WHERE id = ? AND status = 'running'",
            )
            .bind(u.percent.map(i64::from))
            .bind(&u.results)
            .bind(u.run_id)
            .execute(&self.pool)
            .await?;
        }
        Ok(())
    }

    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> Result<()> {
        if outcomes.is_empty() {
            return Ok(());
        }
        retry_deadlocks(|| self.finish_once(outcomes)).await
    }

    async fn has_due_work_for(
        &self,
        queues: &[String],
        handlers: Option<&[String]>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut qb = QueryBuilder::<MySql>::new(
            "SELECT EXISTS (SELECT 1 FROM task_queue
                            WHERE ((last_status = 'scheduled' AND scheduled_on <= ",
        );
        qb.push_bind(now);
        push_handler_filter(&mut qb, handlers);
        qb.push(") OR last_status = 'running') AND queue IN ");
        push_in(&mut qb, queues);
        qb.push(
            ") OR EXISTS (SELECT 1 FROM task_queue WHERE last_status IN ('error', 'timeout') AND gave_up_on IS NULL",
        );
        push_handler_filter(&mut qb, handlers);
        qb.push(")");
        let due: i64 = qb.build_query_scalar().fetch_one(&self.pool).await?;
        Ok(due != 0)
    }

    async fn time_out_runners(&self, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64> {
        if runners.is_empty() {
            return Ok(0);
        }
        retry_deadlocks(|| async {
            let mut tx = self.pool.begin().await?;
            let mut qb = QueryBuilder::<MySql>::new("UPDATE task_runners SET status = 'timeout', finished_on = ");
            qb.push_bind(now).push(" WHERE status = 'running' AND id IN ");
            push_in(&mut qb, runners);
            qb.build().execute(&mut *tx).await?;
            let mut qb = QueryBuilder::<MySql>::new(
                "SELECT id, task_queue_id FROM task_runs WHERE status = 'running' AND task_runner_id IN ",
            );
            push_in(&mut qb, runners);
            qb.push(" FOR UPDATE");
            let runs: Vec<(i64, i64)> = qb.build_query_as().fetch_all(&mut *tx).await?;
            time_out_runs(&mut tx, &runs, now, "runner-lost", RUNNER_LOST).await?;
            tx.commit().await?;
            Ok(runs.len() as u64)
        })
        .await
    }

    async fn time_out_overdue_runs(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>, limit: u32) -> Result<u64> {
        retry_deadlocks(|| async {
            let mut tx = self.pool.begin().await?;
            let runs: Vec<(i64, i64)> = sqlx::query_as(
                "SELECT id, task_queue_id FROM task_runs WHERE status = 'running' AND timeout_on <= ?
                 LIMIT ? FOR UPDATE SKIP LOCKED",
            )
            .bind(cutoff)
            .bind(limit as i64)
            .fetch_all(&mut *tx)
            .await?;
            time_out_runs(&mut tx, &runs, now, "run-timeout", RUN_TIMED_OUT).await?;
            tx.commit().await?;
            Ok(runs.len() as u64)
        })
        .await
    }

    async fn put_back(&self, run: RunId, at: DateTime<Utc>) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let task: Option<TaskId> =
            sqlx::query_scalar("SELECT task_queue_id FROM task_runs WHERE id = ? AND status = 'running' FOR UPDATE")
                .bind(run)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(task) = task else {
            return Ok(false);
        };
        sqlx::query(
            "UPDATE task_runs SET status = 'scheduled', started_on = NULL, task_runner_id = NULL, timeout_on = NULL
             WHERE id = ?",
        )
        .bind(run)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE task_queue SET last_status = 'scheduled', scheduled_on = ? WHERE id = ?")
            .bind(at)
            .bind(task)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn running_runs_of(&self, runner: RunnerId) -> Result<Vec<RunId>> {
        Ok(sqlx::query_scalar("SELECT id FROM task_runs WHERE task_runner_id = ? AND status = 'running'")
            .bind(runner)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn retry_candidates(&self, limit: u32) -> Result<Vec<RetryCandidate>> {
        let rows = sqlx::query(
            "SELECT q.id, q.task_runs_failed, q.max_retries, q.backoff_base_ms, q.backoff_max_ms,
                    (SELECT max(attempt) FROM task_runs r WHERE r.task_queue_id = q.id) AS last_attempt
             FROM task_queue q
             WHERE q.last_status IN ('error', 'timeout') AND q.gave_up_on IS NULL
             LIMIT ?",
        )
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(RetryCandidate {
                    task_id: r.try_get("id")?,
                    failures: n32(r.try_get("task_runs_failed")?),
                    max_retries: n32(r.try_get("max_retries")?),
                    backoff: BackoffSettings {
                        base_ms: r.try_get("backoff_base_ms")?,
                        max_ms: r.try_get("backoff_max_ms")?,
                    },
                    last_attempt: n32(r.try_get::<Option<i64>, _>("last_attempt")?.unwrap_or(0)),
                })
            })
            .collect()
    }

    async fn apply_retry_plans(&self, plans: &[RetryPlan], now: DateTime<Utc>) -> Result<()> {
        if plans.is_empty() {
            return Ok(());
        }
        retry_deadlocks(|| async {
            let mut tx = self.pool.begin().await?;
            for p in plans {
                match p.next {
                    NextStep::RetryAt(at) => {
                        let n = sqlx::query(
                            "UPDATE task_queue SET last_status = 'scheduled', scheduled_on = ?
                             WHERE id = ? AND last_status IN ('error', 'timeout') AND gave_up_on IS NULL",
                        )
                        .bind(at)
                        .bind(p.task_id)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                        if n == 1 {
                            insert_run(&mut tx, p.task_id, p.next_attempt, now).await?;
                        }
                    }
                    NextStep::GiveUp | NextStep::Done => {
                        sqlx::query(
                            "UPDATE task_queue SET gave_up_on = ?, finished_on = ?, active_unique_key = NULL
                             WHERE id = ? AND last_status IN ('error', 'timeout') AND gave_up_on IS NULL",
                        )
                        .bind(now)
                        .bind(now)
                        .bind(p.task_id)
                        .execute(&mut *tx)
                        .await?;
                    }
                }
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn try_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool> {
        let until = now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::days(1));
        retry_deadlocks(|| async {
            let mut tx = self.pool.begin().await?;
            // Assignments run left to right: `holder` is already the new value when
            // `expires_on` is computed, so both change together or not at all.
            sqlx::query(
                "INSERT INTO task_leases (name, holder, expires_on) VALUES (?, ?, ?)
                 ON DUPLICATE KEY UPDATE
                     holder = IF(holder = VALUES(holder) OR expires_on < ?, VALUES(holder), holder),
                     expires_on = IF(holder = VALUES(holder), VALUES(expires_on), expires_on)",
            )
            .bind(name)
            .bind(holder)
            .bind(until)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let row =
                sqlx::query("SELECT holder FROM task_leases WHERE name = ?").bind(name).fetch_one(&mut *tx).await?;
            let current: String = row.try_get_unchecked("holder")?;
            tx.commit().await?;
            Ok(current == holder)
        })
        .await
    }

    async fn rotate(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        retry_deadlocks(|| async {
            let mut tx = self.pool.begin().await?;
            let ids: Vec<i64> = sqlx::query_scalar(
                "SELECT id FROM task_queue WHERE last_status = 'success' AND finished_on < ?
                 ORDER BY finished_on LIMIT ? FOR UPDATE SKIP LOCKED",
            )
            .bind(before)
            .bind(batch as i64)
            .fetch_all(&mut *tx)
            .await?;
            if ids.is_empty() {
                tx.rollback().await?;
                return Ok(0);
            }
            let mut qb = QueryBuilder::<MySql>::new("DELETE FROM task_runs WHERE task_queue_id IN ");
            push_in(&mut qb, &ids);
            qb.build().execute(&mut *tx).await?;
            let mut qb = QueryBuilder::<MySql>::new("DELETE FROM task_queue WHERE id IN ");
            push_in(&mut qb, &ids);
            let n = qb.build().execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            Ok(n)
        })
        .await
    }
}
