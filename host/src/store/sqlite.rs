//! SQLite's part of the store: the embedded default.
//!
//! One file, WAL mode, `synchronous = NORMAL`. Every write transaction starts with
//! `BEGIN IMMEDIATE`, behind one lock per process, so concurrent writers (threads or processes)
//! queue instead of failing to upgrade a read lock; such a transaction excludes every other
//! writer, so rows need no locks. Times are stored as text (`2026-01-02 03:04:05.000000`,
//! which sorts as it compares). Lists and batches travel as one JSON parameter unpacked with
//! `json_each`, so a claim or a batch of finished runs costs a few statements, not one per run;
//! a bulk add binds its values instead (reading them from JSON was half its time).

use std::fmt::Write as _;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Arguments, Connection, QueryBuilder, Sqlite, SqliteConnection};

use super::connect::{redact, StoreOptions};
use super::dialect::{ClaimRequest, Dialect, Ended};
use super::migrations::{self, Embedded};
use super::plumbing::{decoded, unchecked, Cells, Col, Held, Plumbing, SqlxDialect, Tx};
use super::rows::{ClaimedTask, CLAIM_COLUMNS};
use super::shared::SqlStore;
use super::sql::{
    json_list, lineage_values, new_task_args, render, Arg, Lineage, Slot, Walk, NEW_TASK, RUNNER_RUNNING,
};
use super::transitions;
use super::types::Backend;
use crate::error::{Error, Result};
use crate::model::*;

/// The SQLite store.
pub type SqliteStore = SqlStore<SqliteDb>;

const TS_WRITE: &str = "%Y-%m-%d %H:%M:%S%.6f";
const TS_READ: &str = "%Y-%m-%d %H:%M:%S%.f";

/// A time as SQLite stores it.
pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.format(TS_WRITE).to_string()
}

mod claim;
mod turn;

/// How long a writer waits for SQLite's lock (or its [`turn::Turn`]) before it fails as busy.
const BUSY_WAIT: Duration = Duration::from_secs(30);

/// SQLite's [`Dialect`]: the pool, and the turn its writers take (`store/sqlite/turn.rs`).
#[derive(Debug, Clone)]
pub struct SqliteDb {
    pool: SqlitePool,
    /// Writers queue here rather than on SQLite's lock, whose busy handler sleeps between
    /// retries and would leave the database idle, and starve another process's writers.
    writers: turn::Writers,
    /// The database's file (None: in memory), whose log marks commits ([`Dialect::change_marker`]).
    file: Option<std::path::PathBuf>,
}

impl SqliteStore {
    /// Open (creating if missing) the database file a `sqlite://PATH` URL names.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Self> {
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| Error::BadUrl { url: redact(url), reason: e.to_string() })?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_WAIT)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            // A `begin` cancelled between SQLite's BEGIN and its acknowledgement (a worker cut
            // short by a signal) leaves a connection holding an open write transaction and no
            // `Transaction` to end it; such a connection is closed on release, not reused.
            .after_release(|conn, _| {
                Box::pin(async move {
                    if conn.is_in_transaction() {
                        // A dropped transaction's queued rollback lands before the ping answers.
                        conn.ping().await?;
                    }
                    Ok(!conn.is_in_transaction())
                })
            })
            .connect_with(opts.clone())
            .await
            .map_err(|e| Error::Connect { url: redact(url), reason: why_not_opened(opts.get_filename(), &e) })?;
        // A database in memory is this process's alone.
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let writers = turn::Writers::open((!in_memory).then(|| opts.get_filename()), BUSY_WAIT)?;
        // The file itself, as SQLite names its log after it (a link's target).
        let file =
            (!in_memory).then(|| std::fs::canonicalize(opts.get_filename()).unwrap_or(opts.get_filename().into()));
        Ok(SqlStore::new(SqliteDb { pool, writers, file }))
    }
}

/// Whether opening `url` would make its database file (a file that does not exist, not memory).
pub(super) fn makes_a_file(url: &str) -> bool {
    let in_memory = url.contains(":memory:") || url.contains("mode=memory");
    let file = SqliteConnectOptions::from_str(url).map(|o| o.get_filename().to_path_buf());
    !in_memory && file.is_ok_and(|f| !f.exists())
}

/// Why the file could not be opened, in words: SQLite says only "unable to open database file".
fn why_not_opened(file: &std::path::Path, e: &sqlx::Error) -> String {
    let dir = match file.parent() {
        Some(d) if d.as_os_str().is_empty() => std::path::Path::new("."),
        Some(d) => d,
        None => return format!("cannot open {}: {e}", file.display()),
    };
    match std::fs::metadata(dir) {
        Err(_) => format!("cannot open {}: the directory {} does not exist", file.display(), dir.display()),
        Ok(m) if !m.is_dir() => format!("cannot open {}: {} is not a directory", file.display(), dir.display()),
        Ok(_) => format!("cannot open {}: {e}", file.display()),
    }
}

/// A shared statement in SQLite's spelling, with its arguments.
fn bind<'a>(sql: &str, args: &[Arg<'a>]) -> Result<(String, SqliteArguments<'a>)> {
    let sql = render(sql, args, |out, slot| {
        let _ = match slot {
            Slot::One(i) => write!(out, "${}", i + 1),
            Slot::List { index, negated } => {
                let not = if negated { "NOT " } else { "" };
                write!(out, "{not}IN (SELECT value FROM json_each(${}))", index + 1)
            }
        };
        Ok(())
    })?;
    let mut bound = SqliteArguments::default();
    for arg in args {
        let added = match *arg {
            Arg::Int(v) => bound.add(v),
            Arg::Text(v) => bound.add(v),
            Arg::Time(t) => bound.add(ts(t)),
            Arg::MaybeTime(t) => bound.add(t.map(ts)),
            Arg::Ints(l) => bound.add(json_list(l).map_err(|e| Error::invalid("list", e))?),
            Arg::Texts(l) => bound.add(json_list(l).map_err(|e| Error::invalid("list", e))?),
            Arg::Bytes(b) => bound.add(b),
        };
        added.map_err(|e| Error::invalid("argument", e.to_string()))?;
    }
    Ok((sql, bound))
}

#[async_trait]
impl SqlxDialect for SqliteDb {
    type Db = Sqlite;
    async fn write_turn(&self) -> Result<Option<Held>> {
        Ok(Some(Box::new(self.writers.turn().await?)))
    }
    async fn lock_migrations(&self, _conn: &mut sqlx::SqliteConnection) -> Result<Option<Held>> {
        self.write_turn().await
    }
    fn pool(&self) -> &sqlx::Pool<Sqlite> {
        &self.pool
    }
    fn migrations(&self) -> Embedded {
        migrations::SQLITE
    }
    fn bind<'a>(sql: &str, args: &[Arg<'a>]) -> Result<(String, <Sqlite as sqlx::Database>::Arguments<'a>)> {
        bind(sql, args)
    }
}

impl Cells for SqliteRow {
    fn int<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<i64>> {
        decoded(self, col.into())
    }
    fn text<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<String>> {
        // SQLite keeps whatever bytes a TEXT value is given; `taskhost_add` refuses text that
        // is not UTF-8, but a row written around it is read with U+FFFD in place of the bad
        // bytes, not left to fail every read that meets it (a claim, a list) for good. Said each
        // time: a key so read no longer names the stored one.
        let col = col.into();
        let bytes: Option<Vec<u8>> = unchecked(self, col)?;
        Ok(bytes.map(|b| {
            String::from_utf8(b).unwrap_or_else(|e| {
                tracing::warn!(
                    column = col.name,
                    "a text cell that is not UTF-8 (not written by taskhost_add, or before its migration 0036) read with U+FFFD"
                );
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            })
        }))
    }
    fn time<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<DateTime<Utc>>> {
        time_of(self, col.into())
    }
    fn bytes<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<Vec<u8>>> {
        decoded(self, col.into())
    }
}

/// Times are stored as text in [`TS_WRITE`]'s format.
fn time_of(row: &SqliteRow, col: Col<'_>) -> Result<Option<DateTime<Utc>>> {
    let Some(s) = decoded::<_, String>(row, col)? else {
        return Ok(None);
    };
    NaiveDateTime::parse_from_str(&s, TS_READ)
        .map(|n| Some(n.and_utc()))
        .map_err(|e| Error::CorruptRow { table: "(sqlite)", reason: format!("bad time {s:?} in {}: {e}", col.name) })
}

#[async_trait]
impl Dialect for SqliteDb {
    async fn change_marker(&self) -> Result<Option<u64>> {
        // A commit grows the write-ahead log or rewrites it (its time changes); a checkpoint
        // writes the file. A stat, no query: serve's watcher reads only when these moved.
        use std::hash::{Hash, Hasher};
        let Some(file) = &self.file else { return Ok(None) };
        let mut wal = file.clone().into_os_string();
        wal.push("-wal");
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for path in [file.as_os_str(), wal.as_os_str()] {
            std::fs::metadata(path).ok().map(|m| (m.len(), m.modified().ok())).hash(&mut h);
        }
        Ok(Some(h.finish()))
    }

    fn commit_bell(&self) -> Option<super::bell::CommitBell> {
        // The log sits beside the file, named after it.
        let file = self.file.as_deref()?;
        super::bell::CommitBell::watch(file)
            .map_err(|e| {
                // Once a process: a limit of inotify instances reached is the operator's to raise.
                static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
                if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!("no inotify watch on {}, so waits look for ends each tick: {e}", file.display());
                }
            })
            .ok()
    }

    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        super::shared::tasks::add_tasks_in_tx(self, tasks, now).await
    }

    const BACKEND: Backend = Backend::Sqlite;
    const SKIP_LOCKED: &'static str = "";
    const FOR_UPDATE: &'static str = "";
    const ONE_WRITER: bool = true;
    const WALK: Walk = Walk::Nested { ordered: false };
    // Fourteen values a task, under SQLite's 32,766 at most.
    const ADD_CHUNK: usize = 2_300;
    // Rounded: julianday's doubles are exact to about 20 µs.
    const MS_SINCE_START: &'static str = "CAST(round((julianday($2) - julianday(started_on)) * 86400000.0) AS INTEGER)";
    const INT: &'static str = "INTEGER";
    const GREATEST: &'static str = "max";
    const LEAST: &'static str = "min";

    async fn begin(&self) -> Result<Tx<Sqlite>> {
        let turn = self.writers.turn().await?;
        Ok(Tx::new(self.pool.begin_with("BEGIN IMMEDIATE").await?, Some(Box::new(turn))))
    }

    async fn insert_task(
        conn: &mut SqliteConnection,
        t: &NewTask,
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Option<TaskId>> {
        let sql = format!(
            "INSERT INTO {NEW_TASK}
             ON CONFLICT (active_unique_key) WHERE active_unique_key IS NOT NULL DO NOTHING RETURNING id"
        );
        let (sql, values) = bind(&sql, &new_task_args(t, now, lineage))?;
        Ok(sqlx::query_scalar_with(&sql, values).fetch_optional(&mut *conn).await?)
    }

    async fn add_bulk(
        conn: &mut SqliteConnection,
        tasks: &[NewTask],
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Vec<Added>> {
        let (parent, depth) = lineage_values(lineage);
        // Bound values, not a JSON document unpacked with json_each: SQLite re-read the document
        // for each of a row's eleven values, half the time of a bulk add.
        let at = ts(now);
        let mut qb = QueryBuilder::<Sqlite>::new(
            "INSERT INTO task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
                 max_retries, queue, priority, run_timeout, backoff_base_ms, backoff_max_ms, parent_id, depth,
                 share_key) ",
        );
        qb.push_values(tasks, |mut b, t| {
            let scheduled = t.scheduled_on.map(ts).map_or(std::borrow::Cow::Borrowed(at.as_str()), Into::into);
            b.push_bind(at.as_str())
                .push_bind(t.queued_by.as_deref())
                .push_bind(scheduled)
                .push_bind(t.handler.as_str())
                .push_bind(t.data.as_str())
                .push_bind(i64::from(t.max_attempts))
                .push_bind(t.queue.as_str())
                .push_bind(i64::from(t.priority))
                .push_bind(t.run_timeout.map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)))
                .push_bind(t.backoff.base_ms)
                .push_bind(t.backoff.max_ms)
                .push_bind(parent)
                .push_bind(depth)
                .push_bind(t.key.as_deref());
        });
        let done = qb.build().execute(&mut *conn).await?;
        // SQLite runs one writing statement at a time, so AUTOINCREMENT hands this one's rows
        // consecutive ids, in the order of the values, ending at the last inserted.
        let (last, n) = (done.last_insert_rowid(), tasks.len() as i64);
        if done.rows_affected() != tasks.len() as u64 {
            let reason = format!("a bulk add of {n} tasks inserted {}", done.rows_affected());
            return Err(Error::CorruptRow { table: "task_queue", reason });
        }
        Ok((last - n + 1..=last).map(|id| Added { id, created: true }).collect())
    }

    async fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<ClaimedRun>> {
        let mut tx = self.begin().await?;
        let out = claim::claim_in(self, &mut tx, req, None).await?;
        super::dialect::end_claim(self, tx, out).await
    }

    async fn claim_these(
        &self,
        tx: &mut Tx<Sqlite>,
        req: &ClaimRequest<'_>,
        ids: &[TaskId],
    ) -> Result<Vec<ClaimedRun>> {
        claim::claim_in(self, tx, req, Some(ids)).await
    }

    /// (The statistics read the runs back: on SQLite, reading them along with `RETURNING` and
    /// summing them in the worker cost the drain about a tenth.)
    async fn finish_successes(&self, tx: &mut Tx<Sqlite>, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
        let mut written = Vec::with_capacity(ok.len());
        // Eight values a run, within SQLite's 32,766 a statement.
        for chunk in ok.chunks(2_000) {
            written.extend(finish_chunk(tx, chunk).await?);
        }
        Ok(written)
    }
}

/// [`Dialect::finish_successes`] of at most 2,000 runs, by bound values, not a JSON document:
/// SQLite re-read the document for each `->>`, seven a run. Each run stays on its task's row
/// (see `store::transitions`): no run row is written.
async fn finish_chunk(tx: &mut Tx<Sqlite>, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
    let mut tasks = QueryBuilder::<Sqlite>::new("WITH j (id, t, f, res, ms, dg, fu, lg) AS (");
    tasks.push_values(ok, |mut b, o| {
        b.push_bind(o.run_id)
            .push_bind(o.task_id)
            .push_bind(ts(o.finished_on))
            .push_bind(o.results())
            .push_bind(o.duration_ms)
            .push_bind(o.component_digest.as_deref())
            .push_bind(o.fuel_used)
            .push_bind(o.logs.as_deref());
    });
    tasks.push(format!(
        ") UPDATE task_queue SET {}, {} FROM j
           WHERE task_queue.id = j.t AND task_queue.run_id = j.id AND task_queue.{}
           RETURNING task_queue.run_id, task_queue.id",
        transitions::Set::of(Transition::Succeed, "j.f").key_apart(),
        transitions::kept_run("", "j.res", "j.ms", "j.dg", "j.fu", "j.lg"),
        transitions::from::<SqliteDb>(Transition::Succeed)
    ));
    let done: Vec<(i64, i64)> = tasks.build_query_as().fetch_all(&mut *tx.tx).await?;
    if done.is_empty() {
        return Ok(Vec::new());
    }
    // Apart, so rows without a key do not touch the unique index.
    let release = transitions::release_key(Transition::Succeed);
    let mut keys = QueryBuilder::<Sqlite>::new(format!("UPDATE task_queue SET {release} WHERE id IN ("));
    let mut ids = keys.separated(", ");
    for (_, t) in &done {
        ids.push_bind(*t);
    }
    keys.push(") AND active_unique_key IS NOT NULL").build().execute(&mut *tx.tx).await?;
    Ok(done.into_iter().map(|(run_id, _)| Ended { run_id, of: None }).collect())
}
