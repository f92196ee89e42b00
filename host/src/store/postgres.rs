//! The PostgreSQL store: many workers on many machines.
//!
//! Claims pick due tasks with `FOR UPDATE SKIP LOCKED` and mark them in the same statement, so
//! concurrent workers never wait on each other's rows and never take the same run. Batches
//! travel as arrays (`UNNEST`), so a claim or a batch of finished runs costs a few statements.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{PgConnection, Row};

use super::{Backend, RetryCandidate, RetryPlan, Store, StoreOptions};
use crate::error::{Error, Result};
use crate::model::*;

use super::{n32, status};

/// The PostgreSQL implementation of [`Store`].
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connect to the database a `postgres://` URL names.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self> {
        let opts: PgConnectOptions =
            url.parse().map_err(|e: sqlx::Error| Error::BadUrl { url: super::redact(url), reason: e.to_string() })?;
        // Generic plans: they take a batch array as a handful of rows, so batches are joined by
        // index lookups whatever the statistics say (a queue's statistics are always stale:
        // custom plans, priced from them, scanned all of task_runs per claim, 20x slower at
        // 100,000 rows). And statements are no longer re-planned on every call.
        let opts = opts.options([("plan_cache_mode", "force_generic_plan")]);
        super::first_connection::<sqlx::PgConnection>(url, &opts, options.connect_timeout).await?;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(opts);
        Ok(PostgresStore { pool })
    }

    /// One claim statement: up to `limit` due runs, marked running for `runner`.
    async fn claim_some(
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
        // One queue: an equality, so the claim index yields rows already in claim order (with
        // `= ANY(array)` the planner scans and sorts every due task instead).
        let queue_cond = if queues.len() == 1 { "queue = $2" } else { "queue = ANY($4)" };
        // One statement, so one round trip and atomic without an explicit transaction. Every row
        // is reached by a unique key (primary keys, and the unique index of scheduled runs), whose
        // selectivity the planner knows without statistics; on a queue they are always stale.
        let sql = format!(
            "WITH picked AS (
                 SELECT id FROM task_queue
                 WHERE last_status = 'scheduled' AND {queue_cond} AND scheduled_on <= $1
                   AND ($7::text[] IS NULL OR task_handler_class = ANY($7))
                 ORDER BY priority, scheduled_on, id
                 LIMIT $3
                 FOR UPDATE SKIP LOCKED
             ),
             q AS (
                 UPDATE task_queue SET last_status = 'running' WHERE id = ANY(ARRAY(SELECT id FROM picked))
                 RETURNING id, task_handler_class, task_data, queued_by_id, max_retries, task_runs_failed,
                           run_timeout, backoff_base_ms, backoff_max_ms, priority, scheduled_on
             ),
             j AS (
                 SELECT q.*, (SELECT s.id FROM task_runs s WHERE s.task_queue_id = q.id AND s.status = 'scheduled')
                            AS run_id
                 FROM q
             ),
             r AS (
                 UPDATE task_runs SET status = 'running', started_on = $1, task_runner_id = $5,
                     timeout_on = $1 + make_interval(secs => least(coalesce(j.run_timeout, $6), 3153600000))
                 FROM j
                 WHERE task_runs.id = j.run_id
                 RETURNING task_runs.id, task_runs.attempt, task_runs.timeout_on
             )
             SELECT j.*, r.attempt, r.timeout_on FROM j LEFT JOIN r ON r.id = j.run_id"
        );
        let rows = sqlx::query(&sql)
            .bind(now)
            .bind(&queues[0])
            .bind(limit as i64)
            .bind(queues)
            .bind(runner)
            .bind(default_timeout.as_secs().min(3_153_600_000) as i64)
            .bind(handlers)
            .fetch_all(&self.pool)
            .await?;
        struct Claimed {
            run: Option<(i64, i64)>,
            task_id: i64,
            priority: i64,
            scheduled_on: DateTime<Utc>,
            handler: String,
            data: String,
            queued_by: Option<String>,
            max_retries: u32,
            failed: u32,
            backoff: BackoffSettings,
            run_timeout: Option<i64>,
        }
        let mut claimed = Vec::with_capacity(rows.len());
        for r in &rows {
            let run_id: Option<i64> = r.try_get("run_id")?;
            let attempt: Option<i64> = r.try_get("attempt")?;
            claimed.push(Claimed {
                run: run_id.zip(attempt),
                task_id: r.try_get("id")?,
                priority: r.try_get("priority")?,
                scheduled_on: r.try_get("scheduled_on")?,
                handler: r.try_get("task_handler_class")?,
                data: r.try_get("task_data")?,
                queued_by: r.try_get("queued_by_id")?,
                max_retries: n32(r.try_get("max_retries")?),
                failed: n32(r.try_get("task_runs_failed")?),
                backoff: BackoffSettings {
                    base_ms: r.try_get("backoff_base_ms")?,
                    max_ms: r.try_get("backoff_max_ms")?,
                },
                run_timeout: r.try_get("run_timeout")?,
            });
        }
        claimed.sort_by_key(|c| (c.priority, c.scheduled_on, c.task_id));
        let mut out = Vec::with_capacity(claimed.len());
        for c in claimed {
            let (run_id, attempt) = match c.run {
                Some(found) => found,
                // A scheduled task without its scheduled run (should not happen): make one.
                None => self.insert_running_run(c.task_id, runner, now, c.run_timeout, default_timeout).await?,
            };
            out.push(ClaimedRun {
                run_id,
                task_id: c.task_id,
                attempt: n32(attempt).max(1),
                handler: c.handler,
                data: c.data,
                queued_by: c.queued_by,
                max_retries: c.max_retries,
                task_runs_failed: c.failed,
                backoff: c.backoff,
                started_on: now,
                timeout_on: super::timeout_on(now, c.run_timeout, default_timeout),
            });
        }
        Ok(out)
    }

    /// The run of a claimed task that had no scheduled run, created already running.
    async fn insert_running_run(
        &self,
        task_id: TaskId,
        runner: RunnerId,
        now: DateTime<Utc>,
        run_timeout: Option<i64>,
        default_timeout: Duration,
    ) -> Result<(RunId, i64)> {
        let timeout = run_timeout.map(|s| Duration::from_secs(s.max(0) as u64)).unwrap_or(default_timeout);
        let timeout = chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::days(36500));
        Ok(sqlx::query_as(
            "INSERT INTO task_runs (task_queue_id, attempt, created_on, started_on, status, task_runner_id, timeout_on)
             SELECT $1, coalesce(max(attempt), 0) + 1, $2, $2, 'running', $3, $4 FROM task_runs WHERE task_queue_id = $1
             RETURNING id, attempt",
        )
        .bind(task_id)
        .bind(now)
        .bind(runner)
        .bind(now.checked_add_signed(timeout).unwrap_or(now))
        .fetch_one(&self.pool)
        .await?)
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Queue validated tasks on the caller's connection or transaction.
    pub async fn add_tasks_in(conn: &mut PgConnection, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        if tasks.iter().any(|t| t.unique_key.is_some()) || tasks.len() == 1 {
            let mut out = Vec::with_capacity(tasks.len());
            for t in tasks {
                out.push(add_one(conn, t, now).await?); // notifies itself
            }
            return Ok(out);
        }
        let mut out = Vec::with_capacity(tasks.len());
        for chunk in tasks.chunks(10_000) {
            out.extend(add_bulk(conn, chunk, now).await?);
        }
        notify(conn).await?;
        Ok(out)
    }
}

/// Claims of at least this many runs are split in two statements that run at once.
const CLAIM_SPLIT_AT: u32 = 128;

/// The channel idle workers LISTEN on; notified (on commit) whenever tasks are added.
const CHANNEL: &str = "taskhost_tasks";

async fn notify(conn: &mut PgConnection) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, '')").bind(CHANNEL).execute(&mut *conn).await?;
    Ok(())
}

/// One task, its first run and the wake-up in one statement: one round trip, which is most of an
/// idle worker's enqueue-to-start latency.
async fn add_one(conn: &mut PgConnection, t: &NewTask, now: DateTime<Utc>) -> Result<Added> {
    let id: Option<i64> = sqlx::query_scalar(
        "WITH ins AS (
             INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
                 max_retries, queue, priority, unique_key, active_unique_key, run_timeout,
                 backoff_base_ms, backoff_max_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12)
             ON CONFLICT (active_unique_key) WHERE active_unique_key IS NOT NULL DO NOTHING
             RETURNING id
         ),
         run AS (INSERT INTO task_runs (task_queue_id, attempt, created_on) SELECT id, 1, $1 FROM ins)
         SELECT id FROM ins WHERE (SELECT count(*) FROM (SELECT pg_notify($13, '')) AS n) = 1",
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
    .bind(t.run_timeout.map(|d| d.as_secs() as i64))
    .bind(t.backoff.base_ms)
    .bind(t.backoff.max_ms)
    .bind(CHANNEL)
    .fetch_optional(&mut *conn)
    .await?;
    match id {
        Some(id) => Ok(Added { id, created: true }),
        None => {
            let id: i64 = sqlx::query_scalar("SELECT id FROM task_queue WHERE active_unique_key = $1")
                .bind(&t.unique_key)
                .fetch_one(&mut *conn)
                .await?;
            Ok(Added { id, created: false })
        }
    }
}

async fn add_bulk(conn: &mut PgConnection, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
    let mut ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
             max_retries, queue, priority, run_timeout, backoff_base_ms, backoff_max_ms)
         SELECT $1, t.b, t.s, t.h, t.d, t.m, t.qu, t.p, t.rt, t.bb, t.bm FROM UNNEST($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::bigint[],
                                     $7::text[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
                        WITH ORDINALITY AS t(b, s, h, d, m, qu, p, rt, bb, bm, n)
         ORDER BY t.n
         RETURNING id",
    )
    .bind(now)
    .bind(tasks.iter().map(|t| t.queued_by.clone()).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.scheduled_on.unwrap_or(now)).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.handler.clone()).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.data.clone()).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.max_retries as i64).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.queue.clone()).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.priority as i64).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.run_timeout.map(|d| d.as_secs() as i64)).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.backoff.base_ms).collect::<Vec<_>>())
    .bind(tasks.iter().map(|t| t.backoff.max_ms).collect::<Vec<_>>())
    .fetch_all(&mut *conn)
    .await?;
    // Ids come from a sequence in insertion order, which is the input order.
    ids.sort_unstable();
    sqlx::query(
        "INSERT INTO task_runs (task_queue_id, attempt, created_on) SELECT id, 1, $2 FROM UNNEST($1::bigint[]) AS id",
    )
    .bind(&ids)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(ids.into_iter().map(|id| Added { id, created: true }).collect())
}

super::native_row_decoders!(PgRow);

/// After runs of these tasks timed out: count the failure and show the timeout on the task.
async fn mark_tasks_timed_out(tx: &mut PgConnection, task_ids: &[i64]) -> Result<()> {
    if task_ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE task_queue SET last_status = 'timeout', task_runs_failed = task_runs_failed + 1
         WHERE id = ANY($1)",
    )
    .bind(task_ids)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

async fn insert_run(tx: &mut PgConnection, task_id: TaskId, attempt: u32, now: DateTime<Utc>) -> Result<RunId> {
    Ok(sqlx::query_scalar(
        "INSERT INTO task_runs (task_queue_id, attempt, created_on) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(task_id)
    .bind(attempt as i64)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?)
}

/// Write runs that succeeded, and their tasks, in one statement.
async fn finish_successes(conn: &mut PgConnection, ok: &[&RunOutcome]) -> Result<()> {
    if ok.is_empty() {
        return Ok(());
    }
    // Rows are reached by primary key (`= ANY`, whose selectivity needs no statistics), and the
    // guard is `finished_on IS NULL` rather than the status: a status test lets the planner
    // scan the partial index of running runs, which stale statistics price as empty.
    sqlx::query(
        "WITH r AS (
             UPDATE task_runs r SET status = 'success', finished_on = t.f, results = t.res,
                 percents_completed = 100, duration_ms = t.ms, component_digest = t.dg, fuel_used = t.fu,
                 logs = t.lg
             FROM UNNEST($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[], $5::text[], $6::bigint[],
                         $7::text[]) AS t(id, f, res, ms, dg, fu, lg)
             WHERE r.id = t.id AND r.finished_on IS NULL
             RETURNING r.task_queue_id, r.finished_on
         )
         UPDATE task_queue q SET last_status = 'success', task_runs_failed = 0, finished_on = r.finished_on,
             active_unique_key = NULL
         FROM r WHERE q.id = r.task_queue_id",
    )
    .bind(ok.iter().map(|o| o.run_id).collect::<Vec<_>>())
    .bind(ok.iter().map(|o| o.finished_on).collect::<Vec<_>>())
    .bind(ok.iter().map(|o| o.results.clone()).collect::<Vec<_>>())
    .bind(ok.iter().map(|o| o.duration_ms).collect::<Vec<_>>())
    .bind(ok.iter().map(|o| o.component_digest.clone()).collect::<Vec<_>>())
    .bind(ok.iter().map(|o| o.fuel_used).collect::<Vec<_>>())
    .bind(ok.iter().map(|o| o.logs.clone()).collect::<Vec<_>>())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn migrate(&self) -> Result<()> {
        sqlx::migrate!("../migrations/postgres").run(&self.pool).await?;
        Ok(())
    }

    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        if let [task] = tasks {
            // One statement is atomic without a transaction (and saves its round trips).
            let mut conn = self.pool.acquire().await?;
            return Ok(vec![add_one(&mut conn, task, now).await?]);
        }
        let mut tx = self.pool.begin().await?;
        let added = Self::add_tasks_in(&mut tx, tasks, now).await?;
        tx.commit().await?;
        Ok(added)
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<Task>> {
        let row = sqlx::query("SELECT * FROM task_queue WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(task_from_row).transpose()
    }

    async fn runs_of(&self, task_id: TaskId) -> Result<Vec<Run>> {
        let rows = sqlx::query("SELECT * FROM task_runs WHERE task_queue_id = $1 ORDER BY id")
            .bind(task_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(run_from_row).collect()
    }

    async fn list_tasks(&self, f: &TaskFilter) -> Result<Vec<Task>> {
        let rows = sqlx::query(
            "SELECT * FROM task_queue
             WHERE ($1::text IS NULL OR last_status = $1) AND ($2::text IS NULL OR queue = $2)
               AND ($3::text IS NULL OR task_handler_class = $3) AND (NOT $4 OR gave_up_on IS NOT NULL)
             ORDER BY id LIMIT $5",
        )
        .bind(f.status.map(|s| s.as_str()))
        .bind(&f.queue)
        .bind(&f.handler)
        .bind(f.dead)
        .bind(f.limit.map(i64::from))
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
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE task_queue SET last_status = 'scheduled', scheduled_on = $2, task_runs_failed = 0,
                 gave_up_on = NULL, finished_on = NULL, active_unique_key = unique_key
             WHERE id = $1 AND gave_up_on IS NOT NULL",
        )
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map(|r| r.rows_affected());
        if super::replayed(id, updated)? == 0 {
            let task = sqlx::query("SELECT * FROM task_queue WHERE id = $1").bind(id).fetch_optional(&mut *tx).await?;
            return Err(super::not_replayable(id, task.as_ref().map(task_from_row).transpose()?));
        }
        let last: Option<i64> = sqlx::query_scalar("SELECT max(attempt) FROM task_runs WHERE task_queue_id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let run = insert_run(&mut tx, id, n32(last.unwrap_or(0)) + 1, now).await?;
        tx.commit().await?;
        Ok(run)
    }

    async fn register_runner(&self, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId> {
        let mut tx = self.pool.begin().await?;
        // Serialize registrations so two runners cannot both take the last slot.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('taskhost.task_runners'))").execute(&mut *tx).await?;
        let live: i64 = sqlx::query_scalar("SELECT count(*) FROM task_runners WHERE status = 'running'")
            .fetch_one(&mut *tx)
            .await?;
        if live >= limit as i64 {
            return Err(Error::RunnerLimit { live: live.max(0) as u64, limit });
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO task_runners (process_id, host_name, started_on, status, heartbeat_on)
             VALUES ($1, $2, $3, 'running', $3) RETURNING id",
        )
        .bind(pid as i64)
        .bind(host)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn heartbeat(&self, runner: RunnerId, now: DateTime<Utc>) -> Result<bool> {
        let r = sqlx::query("UPDATE task_runners SET heartbeat_on = $2 WHERE id = $1 AND status = 'running'")
            .bind(runner)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn finish_runner(&self, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE task_runners SET status = $2, finished_on = $3 WHERE id = $1 AND status = 'running'")
            .bind(runner)
            .bind(status.as_str())
            .bind(now)
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
        let rows = sqlx::query("SELECT * FROM task_runners WHERE heartbeat_on >= $1 ORDER BY id")
            .bind(since)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(runner_from_row).collect()
    }

    async fn set_runner_handlers(&self, runner: RunnerId, handlers: &super::Served) -> Result<()> {
        sqlx::query("UPDATE task_runners SET handlers = $1 WHERE id = $2")
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
        let r = sqlx::query(
            "WITH t AS (
                 SELECT id FROM task_queue
                 WHERE last_status = 'scheduled' AND scheduled_on <= $1 AND NOT (task_handler_class = ANY($2))
                 LIMIT $4 FOR UPDATE SKIP LOCKED
             ),
             q AS (
                 UPDATE task_queue SET last_status = 'error', task_runs_failed = task_runs_failed + 1,
                     finished_on = $3, gave_up_on = $3, active_unique_key = NULL
                 WHERE id IN (SELECT id FROM t)
                 RETURNING id
             )
             UPDATE task_runs SET status = 'error', finished_on = $3, error_code = $5, error_message = $6
             WHERE status = 'scheduled' AND task_queue_id IN (SELECT id FROM q)",
        )
        .bind(due_before)
        .bind(served)
        .bind(now)
        .bind(limit as i64)
        .bind(crate::sandbox::codes::HANDLER_NOT_FOUND)
        .bind(super::UNSERVED)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
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
        if limit < CLAIM_SPLIT_AT {
            return self.claim_some(runner, queues, handlers, limit, now, default_timeout).await;
        }
        // A large claim as two statements on two connections at once: SKIP LOCKED keeps their rows
        // apart, and the server works on both in parallel, halving the time a worker waits.
        let half = limit / 2;
        let (a, b) = tokio::join!(
            self.claim_some(runner, queues, handlers, limit - half, now, default_timeout),
            self.claim_some(runner, queues, handlers, half, now, default_timeout),
        );
        match (a, b) {
            (Ok(mut a), Ok(b)) => {
                a.extend(b);
                Ok(a)
            }
            // Runs one half claimed are ours now: return them rather than strand them.
            (Ok(runs), Err(e)) | (Err(e), Ok(runs)) if !runs.is_empty() => {
                tracing::warn!("half of a claim failed: {e}");
                Ok(runs)
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }

    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()> {
        if updates.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE task_runs r SET percents_completed = coalesce(t.p, r.percents_completed), results = coalesce(t.res, r.results)
             FROM UNNEST($1::bigint[], $2::bigint[], $3::text[]) AS t(id, p, res)
             WHERE r.id = t.id AND r.finished_on IS NULL",
        )
        .bind(updates.iter().map(|u| u.run_id).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.percent.map(i64::from)).collect::<Vec<_>>())
        .bind(updates.iter().map(|u| u.results.clone()).collect::<Vec<_>>())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> Result<()> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let ok: Vec<_> = outcomes.iter().filter(|o| o.next == NextStep::Done).collect();
        if ok.len() == outcomes.len() {
            // The common case: one statement, atomic on its own.
            let mut conn = self.pool.acquire().await?;
            return finish_successes(&mut conn, &ok).await;
        }
        let mut tx = self.pool.begin().await?;
        finish_successes(&mut tx, &ok).await?;
        for o in outcomes.iter().filter(|o| o.next != NextStep::Done) {
            let attempt: Option<i64> = sqlx::query_scalar(
                "UPDATE task_runs SET status = $2, finished_on = $3, results = coalesce($4, results),
                     error_code = $5, error_message = $6,
                     percents_completed = coalesce($7, percents_completed), duration_ms = $8,
                     component_digest = $9, fuel_used = $10, logs = $11
                 WHERE id = $1 AND finished_on IS NULL
                 RETURNING attempt",
            )
            .bind(o.run_id)
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
            .fetch_optional(&mut *tx)
            .await?;
            let Some(attempt) = attempt else {
                continue; // timed out meanwhile: the overseer already moved the task on
            };
            match o.next {
                NextStep::RetryAt(at) => {
                    sqlx::query(
                        "UPDATE task_queue SET last_status = 'scheduled', task_runs_failed = task_runs_failed + 1,
                             scheduled_on = $2
                         WHERE id = $1",
                    )
                    .bind(o.task_id)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?;
                    insert_run(&mut tx, o.task_id, n32(attempt) + 1, o.finished_on).await?;
                }
                NextStep::GiveUp | NextStep::Done => {
                    sqlx::query(
                        "UPDATE task_queue SET last_status = $2, task_runs_failed = task_runs_failed + 1,
                             finished_on = $3, gave_up_on = $3, active_unique_key = NULL
                         WHERE id = $1",
                    )
                    .bind(o.task_id)
                    .bind(o.status.as_str())
                    .bind(o.finished_on)
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
            // Three probes, each of a partial index (an OR of statuses scanned the whole table).
            "SELECT EXISTS (SELECT 1 FROM task_queue
                            WHERE last_status = 'scheduled' AND scheduled_on <= $1 AND queue = ANY($2)
                              AND ($3::text[] IS NULL OR task_handler_class = ANY($3)))
                 OR EXISTS (SELECT 1 FROM task_runs r JOIN task_queue q ON q.id = r.task_queue_id
                            WHERE r.status = 'running' AND q.queue = ANY($2))
                 OR EXISTS (SELECT 1 FROM task_queue
                            WHERE last_status IN ('error', 'timeout') AND gave_up_on IS NULL
                              AND ($3::text[] IS NULL OR task_handler_class = ANY($3)))",
        )
        .bind(now)
        .bind(queues)
        .bind(handlers)
        .fetch_one(&self.pool)
        .await?;
        Ok(due)
    }

    async fn time_out_runners(&self, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64> {
        if runners.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE task_runners SET status = 'timeout', finished_on = $2 WHERE id = ANY($1) AND status = 'running'",
        )
        .bind(runners)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let tasks: Vec<i64> = sqlx::query_scalar(
            "UPDATE task_runs SET status = 'timeout', finished_on = $2, error_code = 'runner-lost',
                 error_message = 'the runner running this run stopped (no heartbeat or process gone)'
             WHERE task_runner_id = ANY($1) AND status = 'running'
             RETURNING task_queue_id",
        )
        .bind(runners)
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        mark_tasks_timed_out(&mut tx, &tasks).await?;
        tx.commit().await?;
        Ok(tasks.len() as u64)
    }

    async fn time_out_overdue_runs(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>, limit: u32) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let tasks: Vec<i64> = sqlx::query_scalar(
            "UPDATE task_runs SET status = 'timeout', finished_on = $1, error_code = 'run-timeout',
                 error_message = 'the run did not finish within its run timeout'
             WHERE id IN (SELECT id FROM task_runs WHERE status = 'running' AND timeout_on <= $3
                          LIMIT $2 FOR UPDATE SKIP LOCKED)
             RETURNING task_queue_id",
        )
        .bind(now)
        .bind(limit as i64)
        .bind(cutoff)
        .fetch_all(&mut *tx)
        .await?;
        mark_tasks_timed_out(&mut tx, &tasks).await?;
        tx.commit().await?;
        Ok(tasks.len() as u64)
    }

    async fn put_back(&self, run: RunId, at: DateTime<Utc>) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let task: Option<TaskId> = sqlx::query_scalar(
            "UPDATE task_runs SET status = 'scheduled', started_on = NULL, task_runner_id = NULL, timeout_on = NULL
             WHERE id = $1 AND status = 'running' RETURNING task_queue_id",
        )
        .bind(run)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(task) = task else {
            return Ok(false);
        };
        sqlx::query("UPDATE task_queue SET last_status = 'scheduled', scheduled_on = $2 WHERE id = $1")
            .bind(task)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn running_runs_of(&self, runner: RunnerId) -> Result<Vec<RunId>> {
        Ok(sqlx::query_scalar("SELECT id FROM task_runs WHERE task_runner_id = $1 AND status = 'running'")
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
             LIMIT $1",
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
        let mut tx = self.pool.begin().await?;
        for p in plans {
            match p.next {
                NextStep::RetryAt(at) => {
                    let n = sqlx::query(
                        "UPDATE task_queue SET last_status = 'scheduled', scheduled_on = $2
                         WHERE id = $1 AND last_status IN ('error', 'timeout') AND gave_up_on IS NULL",
                    )
                    .bind(p.task_id)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if n == 1 {
                        insert_run(&mut tx, p.task_id, p.next_attempt, now).await?;
                    }
                }
                NextStep::GiveUp | NextStep::Done => {
                    sqlx::query(
                        "UPDATE task_queue SET gave_up_on = $2, finished_on = $2, active_unique_key = NULL
                         WHERE id = $1 AND last_status IN ('error', 'timeout') AND gave_up_on IS NULL",
                    )
                    .bind(p.task_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn wakeups(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(CHANNEL).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                match listener.recv().await {
                    // A full channel already holds a wake-up: nothing is lost by dropping this one.
                    Ok(_) => {
                        if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                            return;
                        }
                    }
                    Err(e) => {
                        // The listener reconnects on the next recv; wake the worker to poll meanwhile.
                        tracing::warn!("LISTEN connection lost, reconnecting: {e}");
                        if tx.is_closed() {
                            return;
                        }
                        let _ = tx.try_send(());
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        });
        Ok(Some(rx))
    }

    async fn try_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool> {
        let until = now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::days(1));
        let n = sqlx::query(
            "INSERT INTO task_leases (name, holder, expires_on) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_on = excluded.expires_on
             WHERE task_leases.holder = excluded.holder OR task_leases.expires_on < $4",
        )
        .bind(name)
        .bind(holder)
        .bind(until)
        .bind(now)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    async fn rotate(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM task_queue WHERE last_status = 'success' AND finished_on < $1
             ORDER BY finished_on LIMIT $2 FOR UPDATE SKIP LOCKED",
        )
        .bind(before)
        .bind(batch as i64)
        .fetch_all(&mut *tx)
        .await?;
        if ids.is_empty() {
            tx.rollback().await?;
            return Ok(0);
        }
        sqlx::query("DELETE FROM task_runs WHERE task_queue_id = ANY($1)").bind(&ids).execute(&mut *tx).await?;
        let n = sqlx::query("DELETE FROM task_queue WHERE id = ANY($1)")
            .bind(&ids)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
