//! PostgreSQL's part of the store: many workers on many machines.
//!
//! Claims pick due tasks with `FOR UPDATE SKIP LOCKED` and mark them in the same statement, so
//! concurrent workers never wait on each other's rows and never take the same run. Lists and
//! batches travel as arrays (`= ANY`, `UNNEST`), so a claim or a batch of finished runs costs
//! one statement. Adding tasks notifies idle workers (LISTEN/NOTIFY).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgRow};
use sqlx::{PgConnection, Postgres};

use super::connect::{redact, StoreOptions};
use super::dialect::{ClaimRequest, Dialect, Ended};
use super::migrations::{self, Embedded};
use super::plumbing::{decoded, Cells, Col, Held, SqlxDialect, Tx};
use super::rows::{ClaimedTask, CLAIM_COLUMNS};
use super::shared::tasks::{add_one, add_tasks_in_tx};
use super::shared::SqlStore;
use super::sql::{lineage_values, new_task_args, Arg, Lineage, NEW_TASK, RUNNER_RUNNING, RUNNING};
use super::transitions;
use super::types::{Backend, Wakeups};
use crate::error::{Error, Result};
use crate::model::*;
use crate::retry::Backoff;
use bind::bind;

/// The PostgreSQL store.
pub type PostgresStore = SqlStore<PostgresDb>;

/// PostgreSQL's [`Dialect`].
#[derive(Debug, Clone)]
pub struct PostgresDb {
    pool: PgPool,
    /// The claim's own connections, which never plan a scan of a table (see [`NO_SEQ_SCAN`]):
    /// a claim planned while `task_runs` was empty (analyzed after rotation emptied it; runs
    /// are made by claims) scanned it for each task it took, 840 tasks/s drained instead of 20,000.
    claims: PgPool,
}

impl PostgresStore {
    /// Connect to the database a `postgres://` URL names.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self> {
        let opts: PgConnectOptions =
            url.parse().map_err(|e: sqlx::Error| Error::BadUrl { url: redact(url), reason: e.to_string() })?;
        // Only the startup parameters a pooler passes on (PgBouncer refuses others unless told to
        // ignore them): `extra_float_digits` shapes floats as text, and the store reads none.
        let opts = opts.extra_float_digits(None);
        let pool = super::connect::server_pool(url, opts.clone(), options, |pool| {
            pool.after_connect(|conn: &mut PgConnection, _| Box::pin(session(conn, false)))
        })
        .await?;
        // Two: a large claim is two statements at once.
        let claims = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(|conn: &mut PgConnection, _| Box::pin(session(conn, true)))
            .connect_lazy_with(opts);
        Ok(SqlStore::new(PostgresDb { pool, claims }))
    }
}

/// What every session of the host sets as it opens, in one round trip: not as startup options,
/// which a connection pooler (PgBouncer) refuses or drops.
/// - Generic plans: they take a batch array as a handful of rows, so batches are joined by index
///   lookups whatever the statistics say (a queue's statistics are always stale: custom plans,
///   priced from them, scanned all of task_runs per claim, 20x slower at 100,000 rows). And
///   statements are no longer re-planned on every call.
/// - `taskhost.host`: the host's own inserts are not those `[tasks] sql_add_handlers` checks
///   (`shared::sql_add_check`).
const SESSION: &str = "SET plan_cache_mode = force_generic_plan; SET taskhost.host = on";

/// Set a new connection's session: [`SESSION`], and for a claim's (`claims`) never a scan of a
/// table (see [`PostgresDb::claims`]).
async fn session(conn: &mut PgConnection, claims: bool) -> std::result::Result<(), sqlx::Error> {
    use sqlx::Executor;
    let settings = if claims { format!("{SESSION}; SET enable_seqscan = off") } else { SESSION.to_string() };
    conn.execute(sqlx::raw_sql(&settings)).await.map(|_| ())
}

/// A transaction's statements reach their rows by keys and indexes, never by a scan of the
/// table, whatever its size when a statement was first planned: a generic plan made while
/// `task_runs` was nearly empty (a new database; runs are made by claims) scanned it for every
/// batch of finished runs until autovacuum's next analyze, up to a minute later: 6,000 tasks/s
/// instead of 24,000 drained. (Set for the transaction alone, in the same round trip.)
const NO_SEQ_SCAN: &str = "SET LOCAL enable_seqscan = off";

/// Claims of at least this many runs are split in two statements that run at once.
const CLAIM_SPLIT_AT: u32 = 128;

/// The channel idle workers LISTEN on; notified (on commit) whenever tasks are added.
const CHANNEL: &str = "taskhost_tasks";
/// The channel workers LISTEN on for cancelled running tasks.
const CANCEL_CHANNEL: &str = "taskhost_cancels";

/// Waits between attempts to listen again after the LISTEN connection is lost.
const LISTEN_BACKOFF: Backoff = Backoff { base: Duration::from_millis(500), max: Duration::from_secs(30), jitter: 0.5 };

#[async_trait]
impl SqlxDialect for PostgresDb {
    type Db = Postgres;
    fn pool(&self) -> &sqlx::Pool<Postgres> {
        &self.pool
    }
    fn migrations(&self) -> Embedded {
        migrations::POSTGRES
    }
    fn bind<'a>(sql: &str, args: &[Arg<'a>]) -> Result<(String, <Postgres as sqlx::Database>::Arguments<'a>)> {
        bind(sql, args)
    }
    /// sqlx's advisory lock (an older taskhost migrating waits too), before the table is made.
    async fn lock_migrations(&self, conn: &mut PgConnection) -> Result<Option<Held>> {
        sqlx::migrate::Migrate::lock(conn).await?;
        Ok(None)
    }
    async fn unlock_migrations(&self, conn: &mut PgConnection) -> Result<()> {
        Ok(sqlx::migrate::Migrate::unlock(conn).await?)
    }
}

impl Cells for PgRow {
    fn int<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<i64>> {
        int_of(self, col.into())
    }
    fn text<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<String>> {
        decoded(self, col.into())
    }
    fn time<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<DateTime<Utc>>> {
        decoded(self, col.into())
    }
    fn bytes<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<Vec<u8>>> {
        decoded(self, col.into())
    }
}

/// Expressions (`CASE … THEN 1`) are INTEGER; columns and counts BIGINT.
fn int_of(row: &PgRow, col: Col<'_>) -> Result<Option<i64>> {
    match decoded::<_, i64>(row, col) {
        Ok(v) => Ok(v),
        Err(_) => Ok(decoded::<_, i32>(row, col)?.map(i64::from)),
    }
}

mod bind;
mod claim;
mod finish;

#[async_trait]
impl Dialect for PostgresDb {
    const BACKEND: Backend = Backend::Postgres;
    // The time now, not the transaction's start (`now()`).
    const SERVER_TIME: Option<&'static str> = Some("SELECT clock_timestamp() AS t");
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const ADD_CHUNK: usize = 10_000;
    const MS_SINCE_START: &'static str = "round(EXTRACT(EPOCH FROM ($2 - started_on)) * 1000)::bigint";
    const POSITION: &'static str = "strpos";

    async fn begin(&self) -> Result<Tx<Postgres>> {
        Ok(Tx::new(self.pool.begin_with(format!("BEGIN; {NO_SEQ_SCAN}")).await?, None))
    }

    async fn begin_read_committed(&self) -> Result<Tx<Postgres>> {
        let begin = format!("BEGIN ISOLATION LEVEL READ COMMITTED; {NO_SEQ_SCAN}");
        Ok(Tx::new(self.pool.begin_with(begin).await?, None))
    }

    fn is_deadlock(e: &Error) -> bool {
        matches!(e, Error::Database(sqlx::Error::Database(db)) if matches!(db.code().as_deref(), Some("40P01" | "40001")))
    }

    /// One task and the wake-up in one statement: one round trip, which is most of an idle
    /// worker's enqueue-to-start latency.
    async fn insert_task(
        conn: &mut PgConnection,
        t: &NewTask,
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Option<TaskId>> {
        let sql = format!(
            "WITH ins AS (
                 INSERT INTO {NEW_TASK}
                 ON CONFLICT (active_unique_key) WHERE active_unique_key IS NOT NULL DO NOTHING
                 RETURNING id
             )
             SELECT id FROM ins WHERE (SELECT count(*) FROM (SELECT pg_notify($19, '')) AS n) = 1"
        );
        let mut values = new_task_args(t, now, lineage);
        values.push(Arg::from(CHANNEL));
        let (sql, values) = bind(&sql, &values)?;
        Ok(sqlx::query_scalar_with(&sql, values).fetch_optional(&mut *conn).await?)
    }

    async fn add_bulk(
        conn: &mut PgConnection,
        tasks: &[NewTask],
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Vec<Added>> {
        let (parent, depth) = lineage_values(lineage);
        let mut ids: Vec<i64> = sqlx::query_scalar(
            "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
                 max_retries, queue, priority, run_timeout, backoff_base_ms, backoff_max_ms, parent_id, depth,
                 share_key)
             SELECT $1, t.b, t.s, t.h, t.d, t.m, t.qu, t.p, t.rt, t.bb, t.bm, $12::bigint, $13::bigint, t.k
             FROM UNNEST($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::bigint[], $7::text[],
                         $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $14::text[])
                  WITH ORDINALITY AS t(b, s, h, d, m, qu, p, rt, bb, bm, k, n)
             ORDER BY t.n
             RETURNING id",
        )
        .bind(now)
        .bind(tasks.iter().map(|t| t.queued_by.clone()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.scheduled_on.unwrap_or(now)).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.handler.clone()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.data.clone()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.max_attempts as i64).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.queue.clone()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.priority as i64).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.run_timeout.map(|d| d.as_secs() as i64)).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.backoff.base_ms).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.backoff.max_ms).collect::<Vec<_>>())
        .bind(parent)
        .bind(depth)
        .bind(tasks.iter().map(|t| t.key.clone()).collect::<Vec<_>>())
        .fetch_all(&mut *conn)
        .await?;
        // Ids come from a sequence in insertion order, which is the input order.
        ids.sort_unstable();
        sqlx::query("SELECT pg_notify($1, '')").bind(CHANNEL).execute(&mut *conn).await?;
        Ok(ids.into_iter().map(|id| Added { id, created: true }).collect())
    }

    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        // One statement is atomic without a transaction (and saves its round trips). A task with
        // a key takes its turn first, and one `after` others is made to wait by more statements:
        // alone, it could run before them, or stay added when they refuse it.
        if let [task @ NewTask { key: None, .. }] = tasks {
            if task.after.is_empty() {
                let mut conn = self.pool.acquire().await?;
                return Ok(vec![add_one::<Self>(&mut conn, task, now).await?]);
            }
        }
        add_tasks_in_tx(self, tasks, now).await
    }

    async fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<ClaimedRun>> {
        // (Not a claim of several queues: each half would hold rows the other then skips.)
        if req.limit < CLAIM_SPLIT_AT || req.queues.len() > 1 {
            return self.claim_some(None, req, req.limit, None).await;
        }
        // A large claim as two statements on two connections at once: SKIP LOCKED keeps their rows
        // apart, and the server works on both in parallel, halving the time a worker waits.
        let half = req.limit / 2;
        let (a, b) =
            tokio::join!(self.claim_some(None, req, req.limit - half, None), self.claim_some(None, req, half, None));
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

    async fn claim_these(
        &self,
        tx: &mut Tx<Postgres>,
        req: &ClaimRequest<'_>,
        ids: &[TaskId],
    ) -> Result<Vec<ClaimedRun>> {
        self.claim_some(Some(tx), req, req.limit, Some(ids)).await
    }

    async fn finish_successes(&self, tx: &mut Tx<Postgres>, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
        finish::finish_successes(&mut tx.tx, ok).await
    }

    async fn delete_successes(&self, tx: &mut Tx<Postgres>, ok: &[&RunOutcome]) -> Result<Option<Vec<Ended>>> {
        finish::delete_successes(&mut tx.tx, ok).await.map(Some)
    }

    /// The sequence of `task_runs`, as the claims' (no counter row: concurrent claims would
    /// queue on it).
    async fn new_run_ids(&self, _tx: &mut Tx<Postgres>, _n: usize) -> Result<String> {
        Ok("nextval('task_runs_id_seq')".into())
    }

    /// Rows another transaction holds are left (progress is best effort, and such a row is being
    /// ended): an update that waited for them could deadlock with the batch ending them, whatever
    /// order each plan locks its rows in, and cost the outcome writer a second each time.
    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()> {
        let sql = format!(
            "UPDATE task_queue q SET run_percent = coalesce(t.p, q.run_percent),
                 run_results = coalesce(t.res, q.run_results)
             FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::bigint[]) AS t(id, p, res, task)
             WHERE q.id = t.task AND q.run_id = t.id AND (q.last_status = {RUNNING}) IS TRUE
                 AND q.id IN (SELECT id FROM task_queue WHERE id = ANY($4) FOR UPDATE SKIP LOCKED)"
        );
        sqlx::query(&sql)
            .bind(updates.iter().map(|u| u.run_id).collect::<Vec<_>>())
            .bind(updates.iter().map(|u| u.percent.map(i64::from)).collect::<Vec<_>>())
            .bind(updates.iter().map(|u| u.results.clone()).collect::<Vec<_>>())
            .bind(updates.iter().map(|u| u.task_id).collect::<Vec<_>>())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn wakeups(&self) -> Result<Option<Wakeups>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen_all([CHANNEL, CANCEL_CHANNEL]).await?;
        let (tasks_tx, tasks) = tokio::sync::mpsc::channel(1);
        let (cancels_tx, cancels) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            let mut failures = 0;
            loop {
                match listener.recv().await {
                    // A full channel already holds a wake-up: nothing is lost by dropping this one.
                    Ok(n) => {
                        failures = 0;
                        let to = if n.channel() == CANCEL_CHANNEL { &cancels_tx } else { &tasks_tx };
                        if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = to.try_send(()) {
                            return;
                        }
                    }
                    Err(e) => {
                        // The listener reconnects on the next recv; wake the worker to look meanwhile.
                        tracing::warn!("LISTEN connection lost, reconnecting: {e}");
                        if tasks_tx.is_closed() {
                            return;
                        }
                        let _ = tasks_tx.try_send(());
                        let _ = cancels_tx.try_send(());
                        failures += 1;
                        tokio::time::sleep(LISTEN_BACKOFF.wait(failures)).await;
                    }
                }
            }
        });
        Ok(Some(Wakeups { tasks, cancels }))
    }

    async fn notify_cancelled(&self, tx: &mut Tx<Postgres>) -> Result<()> {
        sqlx::query("SELECT pg_notify($1, '')").bind(CANCEL_CHANNEL).execute(&mut *tx.tx).await?;
        Ok(())
    }

    async fn change_marker(&self) -> Result<Option<u64>> {
        // The transactions running and the next id: it changes when a commit becomes visible (not
        // when its log record is written, before), on a standby too; a function call, no scan.
        use std::hash::{Hash, Hasher};
        let snapshot: String = sqlx::query_scalar("SELECT pg_current_snapshot()::text").fetch_one(&self.pool).await?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        snapshot.hash(&mut h);
        Ok(Some(h.finish()))
    }

    async fn notify_tasks(&self, tx: &mut Tx<Postgres>) -> Result<()> {
        sqlx::query("SELECT pg_notify($1, '')").bind(CHANNEL).execute(&mut *tx.tx).await?;
        Ok(())
    }
}
