//! The SQLite store: the embedded default.
//!
//! One file, WAL mode, `synchronous = NORMAL`. Every write transaction starts with
//! `BEGIN IMMEDIATE` so concurrent writers (threads or processes) queue on SQLite's lock
//! instead of failing to upgrade a read lock. Batches travel as one JSON parameter unpacked with
//! `json_each`, so a claim or a batch of finished runs costs a few statements, not one per run.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::json;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqliteConnection, Transaction};

use super::{Backend, RetryCandidate, RetryPlan, Store, StoreOptions};
use crate::error::{Error, Result};
use crate::model::*;

const TS_WRITE: &str = "%Y-%m-%d %H:%M:%S%.6f";
const TS_READ: &str = "%Y-%m-%d %H:%M:%S%.f";
/// Rows per statement when adding in bulk.
const ADD_CHUNK: usize = 5_000;

pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.format(TS_WRITE).to_string()
}

fn parse_ts(table: &'static str, s: &str) -> Result<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, TS_READ)
        .map(|n| n.and_utc())
        .map_err(|e| Error::CorruptRow { table, reason: format!("bad time {s:?}: {e}") })
}

fn opt_ts(table: &'static str, s: Option<String>) -> Result<Option<DateTime<Utc>>> {
    s.map(|s| parse_ts(table, &s)).transpose()
}

fn status<T: FromStr<Err = UnknownStatus>>(table: &'static str, s: &str) -> Result<T> {
    s.parse().map_err(|e: UnknownStatus| Error::CorruptRow { table, reason: e.to_string() })
}

/// The SQLite implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Writers of this process queue here rather than on SQLite's lock, whose busy handler
    /// sleeps between retries and would leave the database idle.
    write_lock: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl SqliteStore {
    /// Open (creating if missing) the database file a `sqlite://PATH` URL names.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| Error::BadUrl { url: super::redact(url), reason: e.to_string() })?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .connect_with(opts)
            .await
            .map_err(|e| Error::Connect { url: super::redact(url), reason: format!("cannot open: {e}") })?;
        Ok(SqliteStore { pool, write_lock: Default::default() })
    }

    /// The connection pool, for callers that want to queue tasks inside their own transaction
    /// (see [`SqliteStore::add_tasks_in`]).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    async fn write_tx(&self) -> Result<(tokio::sync::MutexGuard<'_, ()>, Transaction<'static, Sqlite>)> {
        let guard = self.write_lock.lock().await;
        Ok((guard, self.pool.begin_with("BEGIN IMMEDIATE").await?))
    }

    /// Queue validated tasks on the caller's connection or transaction: they are committed
    /// (or rolled back) with the caller's own writes.
    pub async fn add_tasks_in(
        conn: &mut SqliteConnection,
        tasks: &[NewTask],
        now: DateTime<Utc>,
    ) -> Result<Vec<Added>> {
        if tasks.iter().any(|t| t.unique_key.is_some()) || tasks.len() == 1 {
            let mut out = Vec::with_capacity(tasks.len());
            for t in tasks {
                out.push(add_one(conn, t, now).await?);
            }
            return Ok(out);
        }
        let mut out = Vec::with_capacity(tasks.len());
        for chunk in tasks.chunks(ADD_CHUNK) {
            out.extend(add_bulk(conn, chunk, now).await?);
        }
        Ok(out)
    }
}

fn task_json(t: &NewTask, now: DateTime<Utc>) -> serde_json::Value {
    json!({
        "q": ts(now),
        "b": t.queued_by,
        "s": ts(t.scheduled_on.unwrap_or(now)),
        "h": t.handler,
        "d": t.data,
        "m": t.max_retries,
        "qu": t.queue,
        "p": t.priority,
        "rt": t.run_timeout.map(|d| d.as_secs() as i64),
        "bb": t.backoff.base_ms,
        "bm": t.backoff.max_ms,
    })
}

async fn add_one(conn: &mut SqliteConnection, t: &NewTask, now: DateTime<Utc>) -> Result<Added> {
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
             max_retries, queue, priority, unique_key, active_unique_key, run_timeout,
             backoff_base_ms, backoff_max_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12)
         ON CONFLICT (active_unique_key) WHERE active_unique_key IS NOT NULL DO NOTHING
         RETURNING id",
    )
    .bind(ts(now))
    .bind(&t.queued_by)
    .bind(ts(t.scheduled_on.unwrap_or(now)))
    .bind(&t.handler)
    .bind(&t.data)
    .bind(t.max_retries as i64)
    .bind(&t.queue)
    .bind(t.priority)
    .bind(&t.unique_key)
    .bind(t.run_timeout.map(|d| d.as_secs() as i64))
    .bind(t.backoff.base_ms)
    .bind(t.backoff.max_ms)
    .fetch_optional(&mut *conn)
    .await?;
    match id {
        Some(id) => {
            sqlx::query("INSERT INTO task_runs (task_queue_id, attempt, created_on) VALUES (?1, 1, ?2)")
                .bind(id)
                .bind(ts(now))
                .execute(&mut *conn)
                .await?;
            Ok(Added { id, created: true })
        }
        None => {
            let id: i64 = sqlx::query_scalar("SELECT id FROM task_queue WHERE active_unique_key = ?1")
                .bind(&t.unique_key)
                .fetch_one(&mut *conn)
                .await?;
            Ok(Added { id, created: false })
        }
    }
}

async fn add_bulk(conn: &mut SqliteConnection, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
    let rows: Vec<_> = tasks.iter().map(|t| task_json(t, now)).collect();
    let mut ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
             max_retries, queue, priority, run_timeout, backoff_base_ms, backoff_max_ms)
         SELECT j.value->>'q', j.value->>'b', j.value->>'s', j.value->>'h', j.value->>'d',
                j.value->>'m', j.value->>'qu', j.value->>'p', j.value->>'rt', j.value->>'bb', j.value->>'bm'
         FROM json_each(?1) AS j ORDER BY j.key
         RETURNING id",
    )
    .bind(serde_json::Value::Array(rows).to_string())
    .fetch_all(&mut *conn)
    .await?;
    // Ids are handed out in insertion order, which is the input order.
    ids.sort_unstable();
    sqlx::query("INSERT INTO task_runs (task_queue_id, attempt, created_on) SELECT value, 1, ?2 FROM json_each(?1)")
        .bind(serde_json::to_string(&ids).map_err(|e| Error::invalid("ids", e.to_string()))?)
        .bind(ts(now))
        .execute(&mut *conn)
        .await?;
    Ok(ids.into_iter().map(|id| Added { id, created: true }).collect())
}

fn task_from_row(r: &SqliteRow) -> Result<Task> {
    const T: &str = "task_queue";
    Ok(Task {
        id: r.try_get("id")?,
        queued_on: parse_ts(T, &r.try_get::<String, _>("queued_on")?)?,
        queued_by: r.try_get("queued_by_id")?,
        scheduled_on: parse_ts(T, &r.try_get::<String, _>("scheduled_on")?)?,
        handler: r.try_get("task_handler_class")?,
        data: r.try_get("task_data")?,
        last_status: status(T, &r.try_get::<String, _>("last_status")?)?,
        max_retries: r.try_get::<i64, _>("max_retries")?.max(0) as u32,
        task_runs_failed: r.try_get::<i64, _>("task_runs_failed")?.max(0) as u32,
        queue: r.try_get("queue")?,
        priority: r.try_get("priority")?,
        unique_key: r.try_get("unique_key")?,
        run_timeout_secs: r.try_get("run_timeout")?,
        backoff: BackoffSettings { base_ms: r.try_get("backoff_base_ms")?, max_ms: r.try_get("backoff_max_ms")? },
        gave_up_on: opt_ts(T, r.try_get("gave_up_on")?)?,
    })
}

fn run_from_row(r: &SqliteRow) -> Result<Run> {
    const T: &str = "task_runs";
    Ok(Run {
        id: r.try_get("id")?,
        task_id: r.try_get("task_queue_id")?,
        attempt: r.try_get::<i64, _>("attempt")?.max(0) as u32,
        created_on: parse_ts(T, &r.try_get::<String, _>("created_on")?)?,
        started_on: opt_ts(T, r.try_get("started_on")?)?,
        percents_completed: r.try_get::<i64, _>("percents_completed")?.clamp(0, 100) as u8,
        finished_on: opt_ts(T, r.try_get("finished_on")?)?,
        results: r.try_get("results")?,
        status: status(T, &r.try_get::<String, _>("status")?)?,
        error_code: r.try_get("error_code")?,
        error_message: r.try_get("error_message")?,
        runner_id: r.try_get("task_runner_id")?,
        duration_ms: r.try_get("duration_ms")?,
        component_digest: r.try_get("component_digest")?,
        fuel_used: r.try_get("fuel_used")?,
        logs: r.try_get("logs")?,
    })
}

fn runner_from_row(r: &SqliteRow) -> Result<Runner> {
    const T: &str = "task_runners";
    Ok(Runner {
        id: r.try_get("id")?,
        process_id: r.try_get::<i64, _>("process_id")?.max(0) as u32,
        host_name: r.try_get("host_name")?,
        started_on: parse_ts(T, &r.try_get::<String, _>("started_on")?)?,
        finished_on: opt_ts(T, r.try_get("finished_on")?)?,
        status: status(T, &r.try_get::<String, _>("status")?)?,
        heartbeat_on: parse_ts(T, &r.try_get::<String, _>("heartbeat_on")?)?,
        handlers: super::handlers_of(r.try_get("handlers")?),
    })
}

fn ids_json(ids: impl IntoIterator<Item = i64>) -> String {
    serde_json::Value::Array(ids.into_iter().map(serde_json::Value::from).collect()).to_string()
}

/// After runs of these tasks timed out: count the failure and show the timeout on the task.
async fn mark_tasks_timed_out(tx: &mut SqliteConnection, task_ids: &[i64]) -> Result<()> {
    if task_ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE task_queue SET last_status = 'timeout', task_runs_failed = task_runs_failed + 1
         WHERE id IN (SELECT value FROM json_each(?1))",
    )
    .bind(ids_json(task_ids.iter().copied()))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

async fn insert_run(tx: &mut SqliteConnection, task_id: TaskId, attempt: u32, now: DateTime<Utc>) -> Result<RunId> {
    Ok(sqlx::query_scalar(
        "INSERT INTO task_runs (task_queue_id, attempt, created_on) VALUES (?1, ?2, ?3) RETURNING id",
    )
    .bind(task_id)
    .bind(attempt as i64)
    .bind(ts(now))
    .fetch_one(&mut *tx)
    .await?)
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn migrate(&self) -> Result<()> {
        sqlx::migrate!("../migrations/sqlite").run(&self.pool).await?;
        Ok(())
    }

    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        let (_writing, mut tx) = self.write_tx().await?;
        let added = Self::add_tasks_in(&mut tx, tasks, now).await?;
        tx.commit().await?;
        Ok(added)
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<Task>> {
        let row = sqlx::query("SELECT * FROM task_queue WHERE id = ?1").bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(task_from_row).transpose()
    }

    async fn runs_of(&self, task_id: TaskId) -> Result<Vec<Run>> {
        let rows = sqlx::query("SELECT * FROM task_runs WHERE task_queue_id = ?1 ORDER BY id")
            .bind(task_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn list_tasks(&self, f: &TaskFilter) -> Result<Vec<Task>> {
        let rows = sqlx::query(
            "SELECT * FROM task_queue
             WHERE (?1 IS NULL OR last_status = ?1) AND (?2 IS NULL OR queue = ?2)
               AND (?3 IS NULL OR task_handler_class = ?3) AND (?4 = 0 OR gave_up_on IS NOT NULL)
             ORDER BY id LIMIT ?5",
        )
        .bind(f.status.map(|s| s.as_str()))
        .bind(&f.queue)
        .bind(&f.handler)
        .bind(f.dead)
        .bind(f.limit.map(i64::from).unwrap_or(-1))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(task_from_row).collect()
    }

    async fn counts(&self) -> Result<QueueCounts> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT last_status, count(*) FROM task_queue GROUP BY last_status")
                .fetch_all(&self.pool)
                .await?;
        let mut c = QueueCounts::default();
        for (s, n) in rows {
            c.set(status("task_queue", &s)?, n.max(0) as u64);
        }
        let dead: i64 = sqlx::query_scalar("SELECT count(*) FROM task_queue WHERE gave_up_on IS NOT NULL")
            .fetch_one(&self.pool)
            .await?;
        c.dead = dead.max(0) as u64;
        Ok(c)
    }

    async fn retry_task(&self, id: TaskId, now: DateTime<Utc>) -> Result<RunId> {
        let (_writing, mut tx) = self.write_tx().await?;
        let updated = sqlx::query(
            "UPDATE task_queue SET last_status = 'scheduled', scheduled_on = ?2, task_runs_failed = 0,
                 gave_up_on = NULL, finished_on = NULL, active_unique_key = unique_key
             WHERE id = ?1 AND gave_up_on IS NOT NULL",
        )
        .bind(id)
        .bind(ts(now))
        .execute(&mut *tx)
        .await
        .map(|r| r.rows_affected());
        if super::replayed(id, updated)? == 0 {
            let task = sqlx::query("SELECT * FROM task_queue WHERE id = ?1").bind(id).fetch_optional(&mut *tx).await?;
            return Err(super::not_replayable(id, task.as_ref().map(task_from_row).transpose()?));
        }
        let last: Option<i64> = sqlx::query_scalar("SELECT max(attempt) FROM task_runs WHERE task_queue_id = ?1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let run = insert_run(&mut tx, id, last.unwrap_or(0).max(0) as u32 + 1, now).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn register_runner(&self, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId> {
        let (_writing, mut tx) = self.write_tx().await?;
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO task_runners (process_id, host_name, started_on, status, heartbeat_on)
             SELECT ?1, ?2, ?3, 'running', ?3
             WHERE (SELECT count(*) FROM task_runners WHERE status = 'running') < ?4
             RETURNING id",
        )
        .bind(pid as i64)
        .bind(host)
        .bind(ts(now))
        .bind(limit as i64)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(id) = id else {
            let live: i64 = sqlx::query_scalar("SELECT count(*) FROM task_runners WHERE status = 'running'")
                .fetch_one(&mut *tx)
                .await?;
            return Err(Error::RunnerLimit { live: live.max(0) as u64, limit });
        };
        tx.commit().await?;
        Ok(id)
    }

    async fn heartbeat(&self, runner: RunnerId, now: DateTime<Utc>) -> Result<bool> {
        let r = sqlx::query("UPDATE task_runners SET heartbeat_on = ?2 WHERE id = ?1 AND status = 'running'")
            .bind(runner)
            .bind(ts(now))
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn finish_runner(&self, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE task_runners SET status = ?2, finished_on = ?3 WHERE id = ?1 AND status = 'running'")
            .bind(runner)
            .bind(status.as_str())
            .bind(ts(now))
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
        let rows = sqlx::query("SELECT * FROM task_runners WHERE heartbeat_on >= ?1 ORDER BY id")
            .bind(ts(since))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(runner_from_row).collect()
    }

    async fn set_runner_handlers(&self, runner: RunnerId, handlers: &super::Served) -> Result<()> {
        let (_writing, mut tx) = self.write_tx().await?;
        sqlx::query("UPDATE task_runners SET handlers = ?1 WHERE id = ?2")
            .bind(super::served_json(handlers)?)
            .bind(runner)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn give_up_unserved(
        &self,
        served: &[String],
        due_before: DateTime<Utc>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64> {
        let (_writing, mut tx) = self.write_tx().await?;
        let tasks: Vec<i64> = sqlx::query_scalar(
            "UPDATE task_queue SET last_status = 'error', task_runs_failed = task_runs_failed + 1,
                 finished_on = ?3, gave_up_on = ?3, active_unique_key = NULL
             WHERE id IN (SELECT id FROM task_queue
                          WHERE last_status = 'scheduled' AND scheduled_on <= ?1
                            AND task_handler_class NOT IN (SELECT value FROM json_each(?2)) LIMIT ?4)
             RETURNING id",
        )
        .bind(ts(due_before))
        .bind(handlers_json(Some(served))?)
        .bind(ts(now))
        .bind(limit as i64)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE task_runs SET status = 'error', finished_on = ?1, error_code = ?2, error_message = ?3
             WHERE status = 'scheduled' AND task_queue_id IN (SELECT value FROM json_each(?4))",
        )
        .bind(ts(now))
        .bind(crate::sandbox::codes::HANDLER_NOT_FOUND)
        .bind(super::UNSERVED)
        .bind(ids_json(tasks.iter().copied()))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(tasks.len() as u64)
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
        // One queue: an equality the claim index can seek on; several: a list.
        let queue_cond = if queues.len() == 1 { "queue = ?2" } else { "queue IN (SELECT value FROM json_each(?2))" };
        let queue_arg = if queues.len() == 1 {
            queues[0].clone()
        } else {
            serde_json::to_string(queues).map_err(|e| Error::invalid("queues", e.to_string()))?
        };
        let sql = format!(
            "UPDATE task_queue SET last_status = 'running'
             WHERE id IN (SELECT id FROM task_queue
                          WHERE last_status = 'scheduled' AND {queue_cond} AND scheduled_on <= ?1
                            AND (?4 IS NULL OR task_handler_class IN (SELECT value FROM json_each(?4)))
                          ORDER BY priority, scheduled_on, id LIMIT ?3)
             RETURNING id, task_handler_class, task_data, queued_by_id, max_retries, task_runs_failed,
                       run_timeout, backoff_base_ms, backoff_max_ms, priority, scheduled_on"
        );
        let (_writing, mut tx) = self.write_tx().await?;
        let rows = sqlx::query(&sql)
            .bind(ts(now))
            .bind(queue_arg)
            .bind(limit as i64)
            .bind(handlers_json(handlers)?)
            .fetch_all(&mut *tx)
            .await?;
        if rows.is_empty() {
            tx.rollback().await?;
            return Ok(Vec::new());
        }
        struct Claimed {
            task_id: i64,
            priority: i64,
            scheduled_on: String,
            handler: String,
            data: String,
            queued_by: Option<String>,
            max_retries: u32,
            failed: u32,
            backoff: BackoffSettings,
            timeout_on: String,
            timeout_at: DateTime<Utc>,
        }
        let mut claimed = Vec::with_capacity(rows.len());
        for r in &rows {
            let timeout_at = super::timeout_on(now, r.try_get("run_timeout")?, default_timeout);
            claimed.push(Claimed {
                task_id: r.try_get("id")?,
                priority: r.try_get("priority")?,
                scheduled_on: r.try_get("scheduled_on")?,
                handler: r.try_get("task_handler_class")?,
                data: r.try_get("task_data")?,
                queued_by: r.try_get("queued_by_id")?,
                max_retries: r.try_get::<i64, _>("max_retries")?.max(0) as u32,
                failed: r.try_get::<i64, _>("task_runs_failed")?.max(0) as u32,
                backoff: BackoffSettings {
                    base_ms: r.try_get("backoff_base_ms")?,
                    max_ms: r.try_get("backoff_max_ms")?,
                },
                timeout_on: ts(timeout_at),
                timeout_at,
            });
        }
        // RETURNING order is unspecified: restore the claim order.
        claimed.sort_by(|a, b| (a.priority, &a.scheduled_on, a.task_id).cmp(&(b.priority, &b.scheduled_on, b.task_id)));
        let args =
            serde_json::Value::Array(claimed.iter().map(|c| json!({"id": c.task_id, "t": c.timeout_on})).collect());
        let run_rows: Vec<(i64, i64, i64)> = sqlx::query_as(
            "UPDATE task_runs SET status = 'running', started_on = ?1, task_runner_id = ?2,
                 timeout_on = j.value->>'t'
             FROM json_each(?3) AS j
             WHERE task_runs.task_queue_id = j.value->>'id' AND task_runs.status = 'scheduled'
             RETURNING task_runs.task_queue_id, task_runs.id, task_runs.attempt",
        )
        .bind(ts(now))
        .bind(runner)
        .bind(args.to_string())
        .fetch_all(&mut *tx)
        .await?;
        let mut by_task: std::collections::HashMap<i64, (i64, i64)> =
            run_rows.into_iter().map(|(t, r, a)| (t, (r, a))).collect();
        let mut out = Vec::with_capacity(claimed.len());
        for c in claimed {
            let (run_id, attempt) = match by_task.remove(&c.task_id) {
                Some(found) => found,
                None => {
                    // A scheduled task without its scheduled run (should not happen): make one.
                    let last: Option<i64> =
                        sqlx::query_scalar("SELECT max(attempt) FROM task_runs WHERE task_queue_id = ?1")
                            .bind(c.task_id)
                            .fetch_one(&mut *tx)
                            .await?;
                    let attempt = last.unwrap_or(0) + 1;
                    let id: i64 = sqlx::query_scalar(
                        "INSERT INTO task_runs (task_queue_id, attempt, created_on, started_on, status, task_runner_id, timeout_on)
                         VALUES (?1, ?2, ?3, ?3, 'running', ?4, ?5) RETURNING id",
                    )
                    .bind(c.task_id)
                    .bind(attempt)
                    .bind(ts(now))
                    .bind(runner)
                    .bind(&c.timeout_on)
                    .fetch_one(&mut *tx)
                    .await?;
                    (id, attempt)
                }
            };
            out.push(ClaimedRun {
                run_id,
                task_id: c.task_id,
                attempt: attempt.max(1) as u32,
                handler: c.handler,
                data: c.data,
                queued_by: c.queued_by,
                max_retries: c.max_retries,
                task_runs_failed: c.failed,
                backoff: c.backoff,
                started_on: now,
                timeout_on: c.timeout_at,
            });
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()> {
        if updates.is_empty() {
            return Ok(());
        }
        let (_writing, mut tx) = self.write_tx().await?;
        for u in updates {
            sqlx::query(
                "UPDATE task_runs SET percents_completed = coalesce(?2, percents_completed),
                     results = coalesce(?3, results)
                 WHERE id = ?1 AND status = 'running'",
            )
            .bind(u.run_id)
            .bind(u.percent.map(i64::from))
            .bind(&u.results)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> Result<()> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let (_writing, mut tx) = self.write_tx().await?;
        // Successes, the common case, in two statements for the whole batch.
        let ok: Vec<_> = outcomes.iter().filter(|o| o.next == NextStep::Done).collect();
        if !ok.is_empty() {
            let args = serde_json::Value::Array(
                ok.iter()
                    .map(|o| {
                        json!({"id": o.run_id, "f": ts(o.finished_on), "r": o.results, "ms": o.duration_ms,
                               "dg": o.component_digest, "fu": o.fuel_used, "lg": o.logs})
                    })
                    .collect(),
            );
            let done: Vec<(i64, String)> = sqlx::query_as(
                "UPDATE task_runs SET status = 'success', finished_on = j.value->>'f', results = j.value->>'r',
                     percents_completed = 100, duration_ms = j.value->>'ms', component_digest = j.value->>'dg',
                     fuel_used = j.value->>'fu', logs = j.value->>'lg'
                 FROM json_each(?1) AS j
                 WHERE task_runs.id = j.value->>'id' AND task_runs.status = 'running'
                 RETURNING task_runs.task_queue_id, task_runs.finished_on",
            )
            .bind(args.to_string())
            .fetch_all(&mut *tx)
            .await?;
            if !done.is_empty() {
                let args = serde_json::Value::Array(done.iter().map(|(t, f)| json!({"t": t, "f": f})).collect());
                let args = args.to_string();
                sqlx::query(
                    "UPDATE task_queue SET last_status = 'success', task_runs_failed = 0, finished_on = j.value->>'f'
                     FROM json_each(?1) AS j WHERE task_queue.id = j.value->>'t'",
                )
                .bind(&args)
                .execute(&mut *tx)
                .await?;
                // Apart, so rows without a key do not touch the unique index.
                sqlx::query(
                    "UPDATE task_queue SET active_unique_key = NULL
                     WHERE id IN (SELECT j.value->>'t' FROM json_each(?1) AS j) AND active_unique_key IS NOT NULL",
                )
                .bind(&args)
                .execute(&mut *tx)
                .await?;
            }
        }
        for o in outcomes.iter().filter(|o| o.next != NextStep::Done) {
            let updated = sqlx::query(
                "UPDATE task_runs SET status = ?2, finished_on = ?3, results = coalesce(?4, results),
                     error_code = ?5, error_message = ?6,
                     percents_completed = coalesce(?7, percents_completed), duration_ms = ?8,
                     component_digest = ?9, fuel_used = ?10, logs = ?11
                 WHERE id = ?1 AND status = 'running'",
            )
            .bind(o.run_id)
            .bind(o.status.as_str())
            .bind(ts(o.finished_on))
            .bind(&o.results)
            .bind(&o.error_code)
            .bind(&o.error_message)
            .bind(o.percents_completed.map(i64::from))
            .bind(o.duration_ms)
            .bind(&o.component_digest)
            .bind(o.fuel_used)
            .bind(&o.logs)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                continue; // timed out meanwhile: the overseer already moved the task on
            }
            match o.next {
                NextStep::RetryAt(at) => {
                    sqlx::query(
                        "UPDATE task_queue SET last_status = 'scheduled', task_runs_failed = task_runs_failed + 1,
                             scheduled_on = ?2
                         WHERE id = ?1",
                    )
                    .bind(o.task_id)
                    .bind(ts(at))
                    .execute(&mut *tx)
                    .await?;
                    let attempt: i64 = sqlx::query_scalar("SELECT attempt FROM task_runs WHERE id = ?1")
                        .bind(o.run_id)
                        .fetch_one(&mut *tx)
                        .await?;
                    insert_run(&mut tx, o.task_id, attempt.max(0) as u32 + 1, o.finished_on).await?;
                }
                NextStep::GiveUp | NextStep::Done => {
                    sqlx::query(
                        "UPDATE task_queue SET last_status = ?2, task_runs_failed = task_runs_failed + 1,
                             finished_on = ?3, gave_up_on = ?3, active_unique_key = NULL
                         WHERE id = ?1",
                    )
                    .bind(o.task_id)
                    .bind(o.status.as_str())
                    .bind(ts(o.finished_on))
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn has_due_work_for(
        &self,
        queues: &[String],
        handlers: Option<&[String]>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let due: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM task_queue
                            WHERE ((last_status = 'scheduled' AND scheduled_on <= ?1
                                    AND (?3 IS NULL OR task_handler_class IN (SELECT value FROM json_each(?3))))
                                   OR last_status = 'running')
                              AND queue IN (SELECT value FROM json_each(?2)))
                 OR EXISTS (SELECT 1 FROM task_queue
                            WHERE last_status IN ('error', 'timeout') AND gave_up_on IS NULL
                              AND (?3 IS NULL OR task_handler_class IN (SELECT value FROM json_each(?3))))",
        )
        .bind(ts(now))
        .bind(serde_json::to_string(queues).map_err(|e| Error::invalid("queues", e.to_string()))?)
        .bind(handlers_json(handlers)?)
        .fetch_one(&self.pool)
        .await?;
        Ok(due)
    }

    async fn time_out_runners(&self, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64> {
        if runners.is_empty() {
            return Ok(0);
        }
        let (_writing, mut tx) = self.write_tx().await?;
        let ids = ids_json(runners.iter().copied());
        sqlx::query(
            "UPDATE task_runners SET status = 'timeout', finished_on = ?2
             WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'running'",
        )
        .bind(&ids)
        .bind(ts(now))
        .execute(&mut *tx)
        .await?;
        let tasks: Vec<i64> = sqlx::query_scalar(
            "UPDATE task_runs SET status = 'timeout', finished_on = ?2, error_code = 'runner-lost',
                 error_message = 'the runner running this run stopped (no heartbeat or process gone)'
             WHERE task_runner_id IN (SELECT value FROM json_each(?1)) AND status = 'running'
             RETURNING task_queue_id",
        )
        .bind(&ids)
        .bind(ts(now))
        .fetch_all(&mut *tx)
        .await?;
        mark_tasks_timed_out(&mut tx, &tasks).await?;
        tx.commit().await?;
        Ok(tasks.len() as u64)
    }

    async fn time_out_overdue_runs(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>, limit: u32) -> Result<u64> {
        let (_writing, mut tx) = self.write_tx().await?;
        let tasks: Vec<i64> = sqlx::query_scalar(
            "UPDATE task_runs SET status = 'timeout', finished_on = ?1, error_code = 'run-timeout',
                 error_message = 'the run did not finish within its run timeout'
             WHERE id IN (SELECT id FROM task_runs WHERE status = 'running' AND timeout_on <= ?3 LIMIT ?2)
             RETURNING task_queue_id",
        )
        .bind(ts(now))
        .bind(limit as i64)
        .bind(ts(cutoff))
        .fetch_all(&mut *tx)
        .await?;
        mark_tasks_timed_out(&mut tx, &tasks).await?;
        tx.commit().await?;
        Ok(tasks.len() as u64)
    }

    async fn put_back(&self, run: RunId, at: DateTime<Utc>) -> Result<bool> {
        let (_writing, mut tx) = self.write_tx().await?;
        let task: Option<TaskId> = sqlx::query_scalar(
            "UPDATE task_runs SET status = 'scheduled', started_on = NULL, task_runner_id = NULL, timeout_on = NULL
             WHERE id = ?1 AND status = 'running' RETURNING task_queue_id",
        )
        .bind(run)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(task) = task else {
            return Ok(false);
        };
        sqlx::query("UPDATE task_queue SET last_status = 'scheduled', scheduled_on = ?2 WHERE id = ?1")
            .bind(task)
            .bind(ts(at))
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
             LIMIT ?1",
        )
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(RetryCandidate {
                    task_id: r.try_get("id")?,
                    failures: r.try_get::<i64, _>("task_runs_failed")?.max(0) as u32,
                    max_retries: r.try_get::<i64, _>("max_retries")?.max(0) as u32,
                    backoff: BackoffSettings {
                        base_ms: r.try_get("backoff_base_ms")?,
                        max_ms: r.try_get("backoff_max_ms")?,
                    },
                    last_attempt: r.try_get::<Option<i64>, _>("last_attempt")?.unwrap_or(0).max(0) as u32,
                })
            })
            .collect()
    }

    async fn apply_retry_plans(&self, plans: &[RetryPlan], now: DateTime<Utc>) -> Result<()> {
        if plans.is_empty() {
            return Ok(());
        }
        let (_writing, mut tx) = self.write_tx().await?;
        for p in plans {
            match p.next {
                NextStep::RetryAt(at) => {
                    let n = sqlx::query(
                        "UPDATE task_queue SET last_status = 'scheduled', scheduled_on = ?2
                         WHERE id = ?1 AND last_status IN ('error', 'timeout') AND gave_up_on IS NULL",
                    )
                    .bind(p.task_id)
                    .bind(ts(at))
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if n == 1 {
                        insert_run(&mut tx, p.task_id, p.next_attempt, now).await?;
                    }
                }
                NextStep::GiveUp | NextStep::Done => {
                    sqlx::query(
                        "UPDATE task_queue SET gave_up_on = ?2, finished_on = ?2, active_unique_key = NULL
                         WHERE id = ?1 AND last_status IN ('error', 'timeout') AND gave_up_on IS NULL",
                    )
                    .bind(p.task_id)
                    .bind(ts(now))
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn try_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool> {
        let until = now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::days(1));
        let (_writing, mut tx) = self.write_tx().await?;
        let n = sqlx::query(
            "INSERT INTO task_leases (name, holder, expires_on) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_on = excluded.expires_on
             WHERE task_leases.holder = excluded.holder OR task_leases.expires_on < ?4",
        )
        .bind(name)
        .bind(holder)
        .bind(ts(until))
        .bind(ts(now))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn rotate(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        let (_writing, mut tx) = self.write_tx().await?;
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM task_queue WHERE last_status = 'success' AND finished_on < ?1
             ORDER BY finished_on LIMIT ?2",
        )
        .bind(ts(before))
        .bind(batch as i64)
        .fetch_all(&mut *tx)
        .await?;
        if ids.is_empty() {
            tx.rollback().await?;
            return Ok(0);
        }
        let ids = ids_json(ids);
        sqlx::query("DELETE FROM task_runs WHERE task_queue_id IN (SELECT value FROM json_each(?1))")
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
        let n = sqlx::query("DELETE FROM task_queue WHERE id IN (SELECT value FROM json_each(?1))")
            .bind(&ids)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}

/// A handler filter as the JSON list `json_each` reads; None: no filter.
fn handlers_json(handlers: Option<&[String]>) -> Result<Option<String>> {
    handlers.map(|h| serde_json::to_string(h).map_err(|e| Error::invalid("handlers", e.to_string()))).transpose()
}
