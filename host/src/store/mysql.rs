//! MySQL 8's and MariaDB 10.6+'s part of the store.
//!
//! Claims select due tasks `FOR UPDATE SKIP LOCKED` and mark them in the same transaction.
//! There is no `UPDATE … RETURNING` here, so rows are locked and read first, then updated.
//! Placeholders are `?` only, so shared statements are bound in the order their placeholders
//! stand and lists are spelled out (`IN (?, ?, ?)`); batches of rows are bound as `VALUES`, and
//! a claim's or a finish's tasks are updated by their ids, not by joining a `JSON_TABLE` (which
//! cost the server about a quarter more a row). Deadlocks and lock wait timeouts run the
//! transaction again.

use std::fmt::Write as _;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlRow};
use sqlx::{Executor, MySql, MySqlConnection, QueryBuilder, Row};

use super::connect::{redact, StoreOptions};
use super::dialect::{retrying, ClaimRequest, Dialect, Ended};
use super::migrations::{self, Embedded};
use super::plumbing::{decoded, unchecked, Cells, Col, Held, Plumbing, SqlxDialect, Tx};
use super::rows::{ClaimedTask, CLAIM_COLUMNS};
use super::shared::SqlStore;
use super::sql::{args, lineage_values, new_task_args, Arg, Lineage, Walk, NEW_TASK, RUNNER_RUNNING};
use super::transitions;
use super::types::Backend;
use crate::error::{Error, Result};
use crate::model::*;
use bind::bind;

/// The MySQL/MariaDB store.
pub type MySqlStore = SqlStore<MySqlDb>;

/// MySQL's [`Dialect`].
#[derive(Debug, Clone)]
pub struct MySqlDb {
    pool: MySqlPool,
    /// MariaDB, not MySQL: the server's own `VERSION()` says so. Only some migrations differ
    /// (`migrations/mysql-only/`: the CHECKs of redefined columns, the `taskhost_add` procedures).
    mariadb: bool,
}

impl MySqlStore {
    /// Connect to the database a `mysql://` (or `mariadb://`) URL names.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self> {
        let url_ = url.replacen("mariadb://", "mysql://", 1);
        let opts: MySqlConnectOptions =
            url_.parse().map_err(|e: sqlx::Error| Error::BadUrl { url: redact(url), reason: e.to_string() })?;
        // The host's own inserts are not those `[tasks] sql_add_handlers` checks
        // (`shared::settings`).
        let pool = super::connect::server_pool(url, opts, options, |pool| {
            pool.after_connect(|conn: &mut MySqlConnection, _| {
                Box::pin(async move { conn.execute("SET @taskhost_host = 1").await.map(|_| ()) })
            })
        })
        .await?;
        check_packet(&pool, url, options).await?;
        let version: String = sqlx::query_scalar("SELECT VERSION()").fetch_one(&pool).await?;
        Ok(SqlStore::new(MySqlDb { pool, mariadb: version.contains("MariaDB") }))
    }
}

/// Refuse a server whose statements cannot hold the largest value this host writes: it would
/// drop the connection at the first such write (MariaDB resets it) instead of saying why.
async fn check_packet(pool: &MySqlPool, url: &str, options: &StoreOptions) -> Result<()> {
    let packet: i64 = sqlx::query_scalar("SELECT CAST(@@max_allowed_packet AS SIGNED)").fetch_one(pool).await?;
    let needed = options.max_value_bytes.max(StoreOptions::BATCH_BYTES) + StoreOptions::STATEMENT_MARGIN;
    if usize::try_from(packet).unwrap_or(0) >= needed {
        return Ok(());
    }
    let mib = |n: usize| n.div_ceil(1 << 20);
    Err(Error::Connect {
        url: redact(url),
        reason: format!(
            "the server takes statements of at most {packet} bytes (max_allowed_packet), but this host writes \
             values of up to {} bytes (the larger of [tasks] max_data_bytes and a handler's max_results_bytes + \
             max_log_bytes) with up to {} bytes besides: set max_allowed_packet = {}M or more in the server's \
             configuration, or lower those limits",
            options.max_value_bytes,
            StoreOptions::STATEMENT_MARGIN,
            mib(needed)
        ),
    })
}

#[async_trait]
impl SqlxDialect for MySqlDb {
    type Db = MySql;
    fn pool(&self) -> &sqlx::Pool<MySql> {
        &self.pool
    }
    fn migrations(&self) -> Embedded {
        match self.mariadb {
            true => migrations::MYSQL,
            false => migrations::MYSQL.replaced_by(migrations::MYSQL_ONLY),
        }
    }
    fn bind<'a>(sql: &str, args: &[Arg<'a>]) -> Result<(String, <MySql as sqlx::Database>::Arguments<'a>)> {
        bind(sql, args)
    }
    /// The lock sqlx names for the database (so an older taskhost migrating waits too), waited
    /// for as long as another migration takes: sqlx asks for it with a timeout of -1, which
    /// MySQL waits forever for and MariaDB answers at once with NULL, and went on regardless.
    async fn lock_migrations(&self, conn: &mut MySqlConnection) -> Result<Option<Held>> {
        let sql = format!("SELECT GET_LOCK({MIGRATIONS_LOCK}, {MIGRATIONS_LOCK_WAIT_SECS}) AS got");
        // 1: taken; 0: the wait ran out; NULL: the server failed it.
        match sqlx::query_scalar::<_, Option<i64>>(&sql).fetch_one(conn).await? {
            Some(1) => Ok(None),
            got => {
                let why = format!("{got:?} after waiting up to {MIGRATIONS_LOCK_WAIT_SECS} s for another process's");
                Err(Error::io("taking the lock on migrating the database", std::io::Error::other(why)))
            }
        }
    }
    async fn unlock_migrations(&self, conn: &mut MySqlConnection) -> Result<()> {
        sqlx::query(&format!("SELECT RELEASE_LOCK({MIGRATIONS_LOCK})")).execute(conn).await?;
        Ok(())
    }
}

/// The name sqlx gives the lock on migrating the connection's database (the hex of 0x3d32ad9e
/// times its name's CRC-32), and how long a process waits for another's migrations at most.
const MIGRATIONS_LOCK: &str = "LOWER(HEX(1026731422 * CRC32(DATABASE())))";
const MIGRATIONS_LOCK_WAIT_SECS: u64 = 24 * 3600;

// Unchecked: MySQL reports binary-collated (case-sensitive) VARCHARs as VARBINARY though they
// hold UTF-8 text, and expressions as integers of any width.
impl Cells for MySqlRow {
    fn int<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<i64>> {
        unchecked(self, col.into())
    }
    fn text<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<String>> {
        unchecked(self, col.into())
    }
    fn time<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<DateTime<Utc>>> {
        decoded(self, col.into())
    }
    fn bytes<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<Vec<u8>>> {
        decoded(self, col.into())
    }
}

mod bind;
mod claim;

#[async_trait]
impl Dialect for MySqlDb {
    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        super::shared::tasks::add_tasks_in_tx(self, tasks, now).await
    }

    const BACKEND: Backend = Backend::MySql;
    // UTC whatever the session's time zone.
    const SERVER_TIME: Option<&'static str> = Some("SELECT UTC_TIMESTAMP(6) AS t");
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const LOOSE_DISTINCT: bool = true;
    const WALK: Walk = Walk::Bounded;
    const ROW_VALUES: bool = false;
    const ADD_CHUNK: usize = 2_000;
    const MS_SINCE_START: &'static str = "TIMESTAMPDIFF(MICROSECOND, started_on, $2) DIV 1000";
    const INT: &'static str = "SIGNED";
    // Generated columns stand for the partial indexes (see `store::schema`): MariaDB uses an
    // index of a generated column only when the query names the column.
    const AWAITING_RETRY: &'static str = "failed_scheduled_on IS NOT NULL";
    const ARRIVING: &'static str = "arriving = 1";
    fn upsert(t: &str, _key: &[&str], add: &[&str], greatest: &[&str], least: &[&str]) -> String {
        // Qualified: the selected rows' columns have the same names.
        let mut set: Vec<String> = add.iter().map(|c| format!("{t}.{c} = {t}.{c} + VALUES({c})")).collect();
        set.extend(greatest.iter().map(|c| format!("{t}.{c} = GREATEST({t}.{c}, VALUES({c}))")));
        set.extend(least.iter().map(|c| format!("{t}.{c} = LEAST({t}.{c}, VALUES({c}))")));
        format!("ON DUPLICATE KEY UPDATE {}", set.join(", "))
    }
    const RETURNING: bool = false;

    /// READ COMMITTED, as PostgreSQL's default, for which the shared statements are written, not
    /// MySQL's REPEATABLE READ: its locking reads also lock the gaps they scan, and a claim that
    /// reached the end of the due tasks held the gap where every new task goes until it committed.
    /// A worker cut off in the middle of a claim held up every enqueue until the server dropped
    /// its connection (the chaos test's adds failed after the 50 s lock wait timeout). (`SET
    /// TRANSACTION` sets the isolation of the connection's next transaction only.)
    async fn begin(&self) -> Result<Tx<MySql>> {
        let begin = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION";
        Ok(Tx::new(self.pool.begin_with(begin).await?, None))
    }

    async fn change_marker(&self) -> Result<Option<u64>> {
        // The redo log's position (MariaDB's `Innodb_lsn_current`, MySQL 8.0.30's
        // `Innodb_redo_log_current_lsn`): it moves when anything is written (a moment before the
        // commit is seen, which the readers allow for), and any user may read it. An older MySQL
        // names neither: no row, so no marker, and readers read every tick. (SHOW is sent as
        // text: not every server prepares it.)
        // (sqlx 0.8's raw `fetch_optional` is `fetch_one`, which fails on no row.)
        let show = "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_lsn_current', 'Innodb_redo_log_current_lsn')";
        let found = sqlx::raw_sql(show).fetch_all(&self.pool).await?;
        let lsn = found.first().map(|r| r.try_get::<String, _>(1)).transpose()?;
        Ok(lsn.and_then(|v| v.trim().parse().ok()))
    }

    fn is_deadlock(e: &Error) -> bool {
        match e {
            Error::Database(sqlx::Error::Database(db)) => db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                // Deadlock, lock wait timeout, MariaDB 11.6+'s "record has changed since last
                // read" (innodb_snapshot_isolation), and a deadlock on the auto-increment lock
                // an `INSERT … SELECT` holds ("failed to read auto-increment value").
                .is_some_and(|m| matches!(m.number(), 1213 | 1205 | 1020 | 1467)),
            _ => false,
        }
    }

    /// One task. Only a duplicate unique key is tolerated (it returns the task
    /// holding the key): every other error is an error (no `INSERT IGNORE`, which turns
    /// over-long values into silent truncation).
    async fn insert_task(
        conn: &mut MySqlConnection,
        t: &NewTask,
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Option<TaskId>> {
        let (sql, values) = bind(&format!("INSERT INTO {NEW_TASK}"), &new_task_args(t, now, lineage))?;
        match sqlx::query_with(&sql, values).execute(&mut *conn).await {
            Ok(done) => Ok(Some(done.last_insert_id() as i64)),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() && t.unique_key.is_some() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn add_bulk(
        conn: &mut MySqlConnection,
        tasks: &[NewTask],
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Vec<Added>> {
        let (parent, depth) = lineage_values(lineage);
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
                 max_retries, queue, priority, run_timeout, backoff_base_ms, backoff_max_ms, parent_id, depth,
                 share_key) ",
        );
        qb.push_values(tasks, |mut b, t| {
            b.push_bind(now.naive_utc())
                .push_bind(t.queued_by.clone())
                .push_bind(t.scheduled_on.unwrap_or(now).naive_utc())
                .push_bind(t.handler.clone())
                .push_bind(t.data.clone())
                .push_bind(t.max_attempts as i64)
                .push_bind(t.queue.clone())
                .push_bind(t.priority as i64)
                .push_bind(t.run_timeout.map(|d| d.as_secs() as i64))
                .push_bind(t.backoff.base_ms)
                .push_bind(t.backoff.max_ms)
                .push_bind(parent)
                .push_bind(depth)
                .push_bind(t.key.clone());
        });
        let r = qb.build().execute(&mut *conn).await?;
        // One multi-row INSERT gets its ids in one block (InnoDB, any auto-increment lock mode,
        // for a simple insert), from LAST_INSERT_ID, `auto_increment_increment` apart.
        let step: i64 = sqlx::query_scalar("SELECT CAST(@@SESSION.auto_increment_increment AS SIGNED)")
            .fetch_one(&mut *conn)
            .await?;
        let first = r.last_insert_id() as i64;
        Ok((0..tasks.len() as i64).map(|i| Added { id: first + i * step.max(1), created: true }).collect())
    }

    async fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<ClaimedRun>> {
        retrying::<Self, _, _, _>(|| self.claim_once(req)).await
    }

    async fn claim_these(&self, tx: &mut Tx<MySql>, req: &ClaimRequest<'_>, ids: &[TaskId]) -> Result<Vec<ClaimedRun>> {
        self.claim_in(tx, req, Some(ids)).await
    }

    /// `LAST_INSERT_ID(expr)` sets what the statement's answer carries back: the counter as
    /// this statement left it, without a read.
    async fn take_run_ids(&self, tx: &mut Tx<MySql>, n: usize) -> Result<RunId> {
        let sql = "UPDATE task_counters SET v = LAST_INSERT_ID(v + ?) WHERE name = 'task_runs'";
        let taken = sqlx::query(sql).bind(n as i64).execute(&mut *tx.tx).await?;
        if taken.rows_affected() != 1 {
            return Err(Error::CorruptRow { table: "task_counters", reason: "no task_runs counter".into() });
        }
        Ok(taken.last_insert_id() as i64 - n as i64 + 1)
    }

    /// Each run stays on its task's row (see `store::transitions`): the tasks locked and read
    /// first, with what the statistics need, then updated with their runs' outcomes: the short
    /// ones bound as a derived table of `SELECT`s (MariaDB names no columns of a `VALUES` list),
    /// whose first, of no row, types each column as the table does, and the texts (results,
    /// logs) as a `CASE` of the task's id. A text in the derived table made it a `BLOB` table on
    /// disk (the drain 3 – 11 % slower than inserting run rows), and typed by the bound values
    /// alone MariaDB kept a 1 MB result's length modulo 65,536.
    async fn finish_successes(&self, tx: &mut Tx<MySql>, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
        let tasks: Vec<i64> = ok.iter().map(|o| o.task_id).collect();
        let lock = format!(
            "SELECT run_id AS id, id AS task, run_runner_id AS task_runner_id, run_started_on AS started_on,
                 task_handler_class, queue
             FROM task_queue WHERE id IN ($1) AND {} FOR UPDATE",
            transitions::from::<MySqlDb>(Transition::Succeed)
        );
        let found = self.rows(Some(&mut *tx), &lock, args![&tasks]).await?;
        let by_run: std::collections::HashMap<(i64, i64), &&RunOutcome> =
            ok.iter().map(|o| ((o.task_id, o.run_id), o)).collect();
        let (mut ended, mut runs) = (Vec::new(), Vec::new());
        for r in &found {
            let (task, run): (i64, i64) = (r.try_get("task")?, r.try_get("id")?);
            let Some(o) = by_run.get(&(task, run)) else { continue };
            ended.push(Ended::read(r)?);
            runs.push(**o);
        }
        // Ten values a run at most, within MySQL's 65,535 a statement.
        for chunk in runs.chunks(1_000) {
            let (sql, values) = successes_update(chunk);
            self.exec(Some(&mut *tx), &sql, &values).await?;
        }
        Ok(ended)
    }
}

/// The `UPDATE` of [`MySqlDb::finish_successes`] for the runs `chunk`, its tasks locked, and its
/// values.
fn successes_update<'a>(chunk: &[&'a RunOutcome]) -> (String, Vec<Arg<'a>>) {
    let mut values: Vec<Arg<'a>> = Vec::with_capacity(chunk.len() * 10);
    let mut bind = |v: Arg<'a>| {
        values.push(v);
        format!("${}", values.len())
    };
    let mut derived = String::from(
        "SELECT id AS t, run_id AS id, finished_on AS f, run_duration_ms AS ms, run_digest AS dg,
             run_fuel_used AS fu FROM task_queue WHERE 1 = 0",
    );
    for o in chunk {
        let row = [
            bind(Arg::Int(Some(o.task_id))),
            bind(Arg::Int(Some(o.run_id))),
            bind(Arg::Time(o.finished_on)),
            bind(Arg::Int(Some(o.duration_ms))),
            bind(Arg::Text(o.component_digest.as_deref())),
            bind(Arg::Int(o.fuel_used)),
        ];
        let _ = write!(derived, " UNION ALL SELECT {}", row.join(", "));
    }
    // Each text a `CASE` of the task's id, NULL when no run of the chunk has one.
    let mut case = |text: fn(&'a RunOutcome) -> Option<&'a str>| {
        let mut cases = String::new();
        for o in chunk {
            if let Some(t) = text(o) {
                let _ = write!(cases, " WHEN {} THEN {}", bind(Arg::Int(Some(o.task_id))), bind(Arg::Text(Some(t))));
            }
        }
        match cases.is_empty() {
            true => "NULL".to_string(),
            false => format!("CASE j.t{cases} END"),
        }
    };
    let results = case(RunOutcome::results);
    let logs = case(|o| o.logs.as_deref());
    let set = transitions::Set::of(Transition::Succeed, "j.f").qualified("q.");
    let kept = transitions::kept_run("q.", &results, "j.ms", "j.dg", "j.fu", &logs);
    let sql = format!("UPDATE task_queue q JOIN ({derived}) j ON q.id = j.t AND q.run_id = j.id SET {set}, {kept}");
    (sql, values)
}
