//! The small part of the store each database writes for itself.
//!
//! Everything else (reads, decoding, replay, runners and heartbeats, leases, time-outs,
//! retries, rotation) is written once in [`super::shared`], over this trait. A [`Dialect`] holds
//! the connection pool and gives:
//! - plumbing: transactions, and running a shared statement (`sql.rs`) with its arguments;
//! - what truly differs between databases: adding tasks (one with a unique key, many in bulk),
//!   the claim, the batched write of successful runs, and wake-ups;
//! - defaults a database may replace with something faster (progress in one statement, adding
//!   one task without a transaction).

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::plumbing::{Cells, ConnOf, Plumbing, TxOf};
use super::sql::{args, Arg, Lineage, Walk, RUNNING};
use super::types::{Backend, Wakeups};
use crate::error::{Error, Result};
use crate::model::*;
use crate::retry::Backoff;

/// A claim, as the worker asks for it.
#[derive(Debug, Clone, Copy)]
pub struct ClaimRequest<'a> {
    /// The runner claiming.
    pub runner: RunnerId,
    /// The queues it claims from.
    pub queues: &'a [String],
    /// Only tasks of these handlers (None: any).
    pub handlers: Option<&'a [String]>,
    /// Runs it takes at most.
    pub limit: u32,
    /// The claim's time: due tasks are those scheduled at or before it.
    pub now: DateTime<Utc>,
    /// For tasks without their own run timeout.
    pub default_timeout: Duration,
    /// The limits this claim may touch, as the worker last read them (None: none); the claim
    /// reads each one's values afresh, locked.
    pub limits: Option<&'a RunLimits>,
    /// Whether rate limits count by the database server's own time, read under the limit's lock
    /// (a worker's claims: then workers' estimates of that time, a few ms apart, cannot let
    /// one more start in); false counts by `now` (a test's own clock; SQLite always, its one
    /// machine's clock being the database's).
    pub paced_by_server: bool,
}

/// What a claim took, and when a rate limit that held runs back next allows a start.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The runs claimed.
    pub runs: Vec<ClaimedRun>,
    /// When a rate limit of this claim, out of starts, allows the next one (the database's
    /// time): the worker claims again then rather than at its poll.
    pub next_start_on: Option<DateTime<Utc>>,
}

impl ClaimRequest<'_> {
    /// Whether nothing can be claimed (no room, no queue, no handler).
    pub fn is_empty(&self) -> bool {
        self.limit == 0 || self.queues.is_empty() || self.handlers.is_some_and(|h| h.is_empty())
    }
}

/// A run a batched success ended, and what the statistics count it under when the finish read
/// that along (None: the statistics read it back, by `stats::record` of the shared store).
#[derive(Debug, Clone)]
pub struct Ended {
    /// The run.
    pub run_id: RunId,
    /// Its task's handler and queue, its own runner and start.
    pub of: Option<RunOf>,
}

/// What the statistics count a run under.
#[derive(Debug, Clone)]
pub struct RunOf {
    /// Its task's handler.
    pub handler: String,
    /// Its task's queue.
    pub queue: String,
    /// Its runner (0 if none).
    pub runner: i64,
    /// When it started.
    pub started_on: Option<DateTime<Utc>>,
}

impl Ended {
    /// From a row of `id` (the run's), `task_runner_id`, `started_on`, `task_handler_class` and
    /// `queue`.
    pub fn read(r: &impl Cells) -> Result<Self> {
        let of = RunOf {
            handler: r.text("task_handler_class")?.unwrap_or_default(),
            queue: r.text("queue")?.unwrap_or_default(),
            runner: r.int("task_runner_id")?.unwrap_or(0),
            started_on: r.time("started_on")?,
        };
        Ok(Ended { run_id: super::rows::id(r, "id")?, of: Some(of) })
    }
}

/// What each database gives the store written once: its spelling, its claim, its batched
/// success, its wake-ups. A fourth database is one more implementation (and its migrations).
#[async_trait]
pub trait Dialect: Plumbing {
    /// Which database.
    const BACKEND: Backend;
    /// Ends a SELECT of rows about to be changed, so that concurrent writers skip each other's
    /// rows (nothing on SQLite, whose write transactions exclude each other).
    const SKIP_LOCKED: &'static str;
    /// Ends a SELECT of rows about to be changed, waiting for other writers' locks.
    const FOR_UPDATE: &'static str;
    /// Whether write transactions exclude each other already (SQLite: one writer at a time),
    /// so that a claim within concurrency limits needs no row to lock.
    const ONE_WRITER: bool = false;
    /// Tasks per statement when adding in bulk (MySQL: 11 placeholders a task, 65,535 at most).
    const ADD_CHUNK: usize;
    /// Whether `INSERT … RETURNING id` works (else `LAST_INSERT_ID()` is read after it).
    const RETURNING: bool = true;
    /// Milliseconds from a run's `started_on` to the time bound as `$2`, as an SQL expression.
    const MS_SINCE_START: &'static str;
    /// The type a sum is cast to, to be read as a 64-bit integer (PostgreSQL's and MySQL's sums
    /// of integers are decimals).
    const INT: &'static str = "BIGINT";
    /// The larger, and the smaller, of two values (SQLite's scalar `max`, `min`).
    const GREATEST: &'static str = "greatest";
    /// `POSITION(text, part)`: where `part` starts in `text` (from 1), 0 when it is not there;
    /// case-sensitive on each database (MySQL's tables use a binary collation).
    const POSITION: &'static str = "instr";
    /// Its `least` function.
    const LEAST: &'static str = "least";
    /// A statement reading the server's time now as `t` (None: the database has no clock of its
    /// own).
    const SERVER_TIME: Option<&'static str> = None;
    /// Whether `SELECT DISTINCT` of an index's second column, the first held equal, is a loose
    /// index scan (MySQL: one seek a value), so the queues holding scheduled tasks are listed so
    /// rather than by a recursive statement (whose iterations MySQL and MariaDB cap at 1,000).
    const LOOSE_DISTINCT: bool = false;
    /// How a read of due tasks is bounded by the tasks it walks (`shared::key_reads`).
    const WALK: Walk = Walk::Nested { ordered: true };
    /// Whether `(a, b, c) > ($1, $2, $3)` is read as a range of an index on `(a, b, c)`
    /// (MariaDB: not; it walks the index from its start).
    const ROW_VALUES: bool = true;

    /// The condition on `task_queue` (unaliased) of a failed task awaiting the overseer's retry,
    /// spelled as the database indexes it: the filter of the partial index `task_queue_failed`
    /// (PostgreSQL, SQLite; see [`super::schema`]).
    const AWAITING_RETRY: &'static str = "last_status IN ('error', 'timeout') AND gave_up_on IS NULL";
    /// The condition on `task_queue` of a task queued in SQL awaiting the intake
    /// (`transitions/intake.rs`), spelled as the database indexes it (`task_queue_arriving`).
    const ARRIVING: &'static str = "last_status = 'waiting' AND waiting_for < 0";
    /// What ends `INSERT INTO table (…) SELECT …` so that a row whose `key` exists already is
    /// updated instead: `add` columns summed, `greatest` and `least` ones kept at their extreme.
    fn upsert(table: &str, key: &[&str], add: &[&str], greatest: &[&str], least: &[&str]) -> String {
        let mut set: Vec<String> = add.iter().map(|c| format!("{c} = {table}.{c} + excluded.{c}")).collect();
        set.extend(greatest.iter().map(|c| format!("{c} = {}({table}.{c}, excluded.{c})", Self::GREATEST)));
        set.extend(least.iter().map(|c| format!("{c} = {}({table}.{c}, excluded.{c})", Self::LEAST)));
        format!("ON CONFLICT ({}) DO UPDATE SET {}", key.join(", "), set.join(", "))
    }

    /// Begin a transaction (on SQLite, taking this process's write lock).
    async fn begin(&self) -> Result<TxOf<Self>>;

    /// A transaction whose every statement sees what was committed before it, whatever the
    /// server's default isolation (on MySQL every transaction of the store's is): for reads made
    /// after a lock.
    async fn begin_read_committed(&self) -> Result<TxOf<Self>> {
        self.begin().await
    }

    /// The connection of a transaction.
    fn conn(tx: &mut TxOf<Self>) -> &mut ConnOf<Self> {
        &mut tx.tx
    }

    /// Run a shared `INSERT` of one row into a table with an `id` column; the new id.
    async fn insert(&self, tx: Option<&mut TxOf<Self>>, sql: &str, args: &[Arg<'_>]) -> Result<i64> {
        let found = if Self::RETURNING {
            self.rows(tx, &format!("{sql} RETURNING id"), args).await?
        } else {
            let Some(tx) = tx else {
                return Err(Error::invalid("insert", "on this database an insert needs a transaction"));
            };
            self.exec(Some(&mut *tx), sql, args).await?;
            self.rows(Some(tx), "SELECT LAST_INSERT_ID() AS id", &[]).await?
        };
        match found.first().map(|r| r.int("id")).transpose()?.flatten() {
            Some(id) => Ok(id),
            None => Err(Error::invalid("insert", "no id came back")),
        }
    }

    /// Whether a failed transaction should be run again from the start (a deadlock).
    fn is_deadlock(e: &Error) -> bool {
        let _ = e;
        false
    }

    /// Insert one task (`sql::NEW_TASK`); None when another task holds its
    /// unique key.
    async fn insert_task(
        conn: &mut ConnOf<Self>,
        task: &NewTask,
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Option<TaskId>>;
    /// Queue tasks without unique keys (their first runs are made when they are claimed), all
    /// children of `lineage`'s parent if any; ids in input order.
    async fn add_bulk(
        conn: &mut ConnOf<Self>,
        tasks: &[NewTask],
        now: DateTime<Utc>,
        lineage: Option<Lineage>,
    ) -> Result<Vec<Added>>;

    /// Claim up to `limit` due scheduled tasks atomically, making their runs, in claim order (priority, then due
    /// time, then id). (Limits are not this function's business: see [`super::shared`].)
    async fn claim(&self, req: &ClaimRequest<'_>) -> Result<Vec<ClaimedRun>>;
    /// The same inside the caller's transaction, of these tasks only (which it holds locked):
    /// the last step of a claim under concurrency limits.
    async fn claim_these(&self, tx: &mut TxOf<Self>, req: &ClaimRequest<'_>, ids: &[TaskId])
        -> Result<Vec<ClaimedRun>>;
    /// Write these successful runs and their tasks, leaving any run no longer running as it is;
    /// the runs written, with what their statistics are counted under (read by the writes
    /// themselves where the database returns what it wrote).
    async fn finish_successes(&self, tx: &mut TxOf<Self>, ok: &[&RunOutcome]) -> Result<Vec<Ended>>;
    /// Delete the tasks of these successes that may go, writing their ends, in a way of its own
    /// (`transitions::ends`): the runs so ended, with what their statistics are counted under;
    /// None: the shared way.
    async fn delete_successes(&self, tx: &mut TxOf<Self>, ok: &[&RunOutcome]) -> Result<Option<Vec<Ended>>> {
        let _ = (tx, ok);
        Ok(None)
    }
    /// Take `n` run ids, consecutive, from the `task_runs` counter of `task_counters`; the
    /// first. (Run ids are handed out by claims, before their rows exist: see
    /// `store/transitions/`.)
    async fn take_run_ids(&self, tx: &mut TxOf<Self>, n: usize) -> Result<RunId> {
        let sql = "UPDATE task_counters SET v = v + $1 WHERE name = 'task_runs' RETURNING v";
        match self.rows(Some(tx), sql, args![n as i64]).await?.first() {
            Some(r) => Ok(super::rows::id(r, "v")? - n as i64 + 1),
            None => Err(Error::CorruptRow { table: "task_counters", reason: "no task_runs counter".into() }),
        }
    }

    /// The SQL expression of a new run id for each of `n` rows an `INSERT … SELECT` makes from
    /// `task_queue q`: ids taken by [`Self::take_run_ids`], numbered in the order of `q.id`
    /// (PostgreSQL: the table's sequence).
    async fn new_run_ids(&self, tx: &mut TxOf<Self>, n: usize) -> Result<String> {
        let first = self.take_run_ids(tx, n).await?;
        Ok(format!("({} + row_number() OVER (ORDER BY q.id))", first - 1))
    }

    /// Queue tasks in one transaction (most databases: `shared::tasks::add_tasks_in_tx`).
    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>>;

    /// Progress of running runs (kept on their tasks), in one transaction.
    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()> {
        let sql = format!(
            "UPDATE task_queue SET run_percent = coalesce($3, run_percent), run_results = coalesce($4, run_results)
             WHERE id = $1 AND run_id = $2 AND last_status = {RUNNING}"
        );
        let mut tx = self.begin().await?;
        for u in updates {
            let values = args![u.task_id, u.run_id, u.percent.map(i64::from), &u.results];
            self.exec(Some(&mut tx), &sql, values).await?;
        }
        self.commit(tx).await
    }

    /// Channels woken soon after tasks are added or running tasks cancelled anywhere; None: poll only.
    async fn wakeups(&self) -> Result<Option<Wakeups>> {
        Ok(None)
    }

    /// Tell the workers, when `tx` commits, that running tasks were cancelled (PostgreSQL's
    /// NOTIFY; elsewhere they find out by polling).
    async fn notify_cancelled(&self, _tx: &mut TxOf<Self>) -> Result<()> {
        Ok(())
    }

    /// A bell that rings when something may have been committed, where the database gives one
    /// without a query (a watch on SQLite's log); None: readers look at the change marker each
    /// tick.
    fn commit_bell(&self) -> Option<super::bell::CommitBell> {
        None
    }

    /// A number that changes whenever anything may have been committed, far cheaper to read than
    /// the data: a reader that finds it as it was need not read again (it reads now and then all
    /// the same). None where the database has none: readers read.
    async fn change_marker(&self) -> Result<Option<u64>> {
        Ok(None)
    }

    /// Wake idle workers, when `tx` commits, for tasks made due other than by adding them
    /// (replayed, or in a resumed queue); adding tasks wakes them by itself.
    async fn notify_tasks(&self, _tx: &mut TxOf<Self>) -> Result<()> {
        Ok(())
    }
}

/// End a claim's transaction: committed when it claimed runs, else rolled back (it wrote nothing).
pub async fn end_claim<D: Dialect + ?Sized>(db: &D, tx: TxOf<D>, claimed: Vec<ClaimedRun>) -> Result<Vec<ClaimedRun>> {
    if claimed.is_empty() {
        db.rollback(tx).await?;
    } else {
        db.commit(tx).await?;
    }
    Ok(claimed)
}

/// Deadlocked transactions are run again this many times, after these waits.
const DEADLOCK_RETRIES: u32 = 8;
const DEADLOCK_BACKOFF: Backoff =
    Backoff { base: Duration::from_millis(4), max: Duration::from_millis(128), jitter: 0.5 };

/// A transaction [`transaction`] hands its function; `'a` is what that function may borrow
/// (the type says it outlives the borrow of the transaction, so the function's future may hold
/// both).
pub struct InTx<'a, D: Dialect + ?Sized> {
    /// The transaction.
    pub tx: TxOf<D>,
    scope: std::marker::PhantomData<&'a ()>,
}

/// Run `f` in a transaction of its own: committed when `f` returns a value, rolled back when it
/// returns an error (by `?` or otherwise), and run again from the start, in a new transaction,
/// after a deadlock. `f` may run more than once: it must not keep what it did outside `tx`.
pub async fn transaction<'a, D, T, F>(db: &D, f: F) -> Result<T>
where
    D: Dialect + ?Sized,
    T: Send,
    F: for<'t> FnMut(&'t mut InTx<'a, D>) -> futures::future::BoxFuture<'t, Result<T>> + Send,
{
    run_transaction(db, false, f).await
}

/// [`transaction`], READ COMMITTED whatever the server's default
/// ([`Dialect::begin_read_committed`]).
pub async fn transaction_read_committed<'a, D, T, F>(db: &D, f: F) -> Result<T>
where
    D: Dialect + ?Sized,
    T: Send,
    F: for<'t> FnMut(&'t mut InTx<'a, D>) -> futures::future::BoxFuture<'t, Result<T>> + Send,
{
    run_transaction(db, true, f).await
}

async fn run_transaction<'a, D, T, F>(db: &D, read_committed: bool, mut f: F) -> Result<T>
where
    D: Dialect + ?Sized,
    T: Send,
    F: for<'t> FnMut(&'t mut InTx<'a, D>) -> futures::future::BoxFuture<'t, Result<T>> + Send,
{
    let mut attempt = 0;
    loop {
        let tx = if read_committed { db.begin_read_committed().await? } else { db.begin().await? };
        let mut tx = InTx { tx, scope: std::marker::PhantomData };
        let done = match f(&mut tx).await {
            Ok(value) => db.commit(tx.tx).await.map(|()| value),
            Err(e) => {
                // The error is what matters; a failed rollback ends with the connection.
                let _ = db.rollback(tx.tx).await;
                Err(e)
            }
        };
        match done {
            Err(e) if attempt < DEADLOCK_RETRIES && D::is_deadlock(&e) => {
                attempt += 1;
                tracing::debug!(attempt, "deadlock, trying again: {e}");
                tokio::time::sleep(DEADLOCK_BACKOFF.wait(attempt)).await;
            }
            other => return other,
        }
    }
}

/// Run the transaction `f` makes, again from the start after a deadlock.
pub async fn retrying<D, T, F, Fut>(mut f: F) -> Result<T>
where
    D: Dialect + ?Sized,
    F: FnMut() -> Fut + Send,
    Fut: Future<Output = Result<T>> + Send,
{
    let mut attempt = 0;
    loop {
        match f().await {
            Err(e) if attempt < DEADLOCK_RETRIES && D::is_deadlock(&e) => {
                attempt += 1;
                tracing::debug!(attempt, "deadlock, trying again: {e}");
                tokio::time::sleep(DEADLOCK_BACKOFF.wait(attempt)).await;
            }
            other => return other,
        }
    }
}
