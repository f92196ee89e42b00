//! Persistence: one [`Store`] trait, one implementation per database.
//!
//! All SQL lives in the backend files (`sqlite.rs`, ...). The store knows nothing of wasmtime;
//! retry decisions are made by the caller ([`crate::retry`]) and handed in as [`NextStep`]s.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::model::*;

pub mod mysql;
pub mod postgres;
pub mod schema;
pub mod sqlite;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

/// A failed task that needs its next run created (or to be given up on).
#[derive(Debug, Clone)]
pub struct RetryCandidate {
    pub task_id: TaskId,
    pub failures: u32,
    pub max_retries: u32,
    pub backoff: BackoffSettings,
    /// The latest run's attempt number; the next run gets this plus one.
    pub last_attempt: u32,
}

/// A decision about a [`RetryCandidate`].
#[derive(Debug, Clone, Copy)]
pub struct RetryPlan {
    pub task_id: TaskId,
    pub next_attempt: u32,
    /// `RetryAt` or `GiveUp`.
    pub next: NextStep,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Create or update the tables (idempotent).
    async fn migrate(&self) -> Result<()>;

    // --- tasks -----------------------------------------------------------------------------

    /// Queue tasks with their first run, in one transaction. Inputs are already validated.
    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>>;
    async fn get_task(&self, id: TaskId) -> Result<Option<Task>>;
    async fn runs_of(&self, task_id: TaskId) -> Result<Vec<Run>>;
    async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>>;
    async fn counts(&self) -> Result<QueueCounts>;
    /// Replay a dead letter: reset its failure count and schedule a new run now.
    async fn retry_task(&self, id: TaskId, now: DateTime<Utc>) -> Result<RunId>;

    // --- runners ---------------------------------------------------------------------------

    /// Register a runner unless `limit` runners are already live.
    async fn register_runner(&self, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId>;
    /// Returns false when the runner is no longer `running` (the overseer timed it out).
    async fn heartbeat(&self, runner: RunnerId, now: DateTime<Utc>) -> Result<bool>;
    async fn finish_runner(&self, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()>;
    async fn live_runners(&self) -> Result<Vec<Runner>>;
    /// Runners (live or not) whose latest heartbeat is at or after `since`.
    async fn runners_seen_since(&self, since: DateTime<Utc>) -> Result<Vec<Runner>>;
    /// Record the handlers a runner serves, each with its component's digest.
    async fn set_runner_handlers(&self, runner: RunnerId, handlers: &Served) -> Result<()>;

    // --- runs ------------------------------------------------------------------------------

    /// Atomically claim up to `limit` due scheduled runs of `queues` (priority, then FIFO).
    /// `default_timeout` applies to tasks without their own run timeout.
    async fn claim(
        &self,
        runner: RunnerId,
        queues: &[String],
        limit: u32,
        now: DateTime<Utc>,
        default_timeout: Duration,
    ) -> Result<Vec<ClaimedRun>> {
        self.claim_for(runner, queues, None, limit, now, default_timeout).await
    }
    /// [`Store::claim`], of tasks whose handler is one of `handlers` only (None: any handler): a
    /// worker claims only what it can run.
    async fn claim_for(
        &self,
        runner: RunnerId,
        queues: &[String],
        handlers: Option<&[String]>,
        limit: u32,
        now: DateTime<Utc>,
        default_timeout: Duration,
    ) -> Result<Vec<ClaimedRun>>;
    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()>;
    /// Write finished runs and update their tasks, in one transaction. A run that is no longer
    /// `running` (timed out meanwhile) is left as it is.
    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> Result<()>;
    /// Whether a scheduled run of `queues` is due, one is running (on any runner), or a failed
    /// task awaits its retry run: what keeps a draining worker going.
    async fn has_due_work(&self, queues: &[String], now: DateTime<Utc>) -> Result<bool> {
        self.has_due_work_for(queues, None, now).await
    }
    /// [`Store::has_due_work`], counting scheduled and retry-awaiting tasks of `handlers` only.
    async fn has_due_work_for(
        &self,
        queues: &[String],
        handlers: Option<&[String]>,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    // --- maintenance -----------------------------------------------------------------------

    /// Mark runners `timeout`, and their running runs with them. Returns the runs timed out.
    async fn time_out_runners(&self, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64>;
    /// Time out running runs whose `timeout_on` is at or before `cutoff`, as finished at `now`.
    /// Returns how many.
    async fn time_out_overdue_runs(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>, limit: u32) -> Result<u64>;
    /// Return a running run that could not start (for want of a host resource) to the queue,
    /// due at `at`, without counting a failure: the run and its task are `scheduled` again, as
    /// before the claim. False when the run is no longer running (ended elsewhere).
    async fn put_back(&self, run: RunId, at: DateTime<Utc>) -> Result<bool>;
    /// The runs `running` on this runner (what its heartbeat checks its in-flight runs against).
    async fn running_runs_of(&self, runner: RunnerId) -> Result<Vec<RunId>>;
    /// Failed tasks (error/timeout, not given up) whose next step is not decided yet.
    async fn retry_candidates(&self, limit: u32) -> Result<Vec<RetryCandidate>>;
    async fn apply_retry_plans(&self, plans: &[RetryPlan], now: DateTime<Utc>) -> Result<()>;
    /// Give up (as `handler-not-found`) up to `limit` scheduled tasks due at or before `due_before`
    /// whose handler is not in `served`. Returns how many.
    async fn give_up_unserved(
        &self,
        served: &[String],
        due_before: DateTime<Utc>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64>;
    /// Delete up to `batch` successful tasks finished before `before`, with their runs.
    async fn rotate(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;

    /// A channel that receives a message soon after tasks are added anywhere (PostgreSQL:
    /// LISTEN/NOTIFY), so an idle worker need not wait for its next poll. None: poll only.
    async fn wakeups(&self) -> Result<Option<tokio::sync::mpsc::Receiver<()>>> {
        Ok(None)
    }

    /// Take or renew the lease `name` for `holder` until `now + ttl`. True when `holder` has it:
    /// it was free, expired, or already its own.
    async fn try_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool>;
}

pub type SharedStore = Arc<dyn Store>;

/// Parse a status column.
pub(crate) fn status<T: std::str::FromStr<Err = UnknownStatus>>(table: &'static str, s: &str) -> Result<T> {
    s.parse().map_err(|e: UnknownStatus| Error::CorruptRow { table, reason: e.to_string() })
}

/// A BIGINT count or number as u32 (negative → 0).
/// The outcome of the statement that replays a dead letter (rows updated); a unique-key clash
/// means another unfinished task holds the key.
pub(crate) fn replayed(id: TaskId, r: std::result::Result<u64, sqlx::Error>) -> Result<u64> {
    match r {
        Ok(n) => Ok(n),
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            Err(Error::CannotRetry { id, reason: "another unfinished task holds the same unique key".into() })
        }
        Err(e) => Err(e.into()),
    }
}

/// Why a task the replay did not update cannot be replayed.
pub(crate) fn not_replayable(id: TaskId, task: Option<Task>) -> Error {
    match task {
        None => Error::TaskNotFound(id),
        Some(t) => Error::CannotRetry {
            id,
            reason: format!("it is {} and not a dead letter (only tasks given up on can be replayed)", t.last_status),
        },
    }
}

/// When a run claimed at `now` times out: its task's run timeout (seconds), else the default.
pub(crate) fn timeout_on(now: DateTime<Utc>, run_timeout_secs: Option<i64>, default: Duration) -> DateTime<Utc> {
    let timeout = run_timeout_secs.map(|s| Duration::from_secs(s.max(0) as u64)).unwrap_or(default);
    let timeout = chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::days(36500));
    now.checked_add_signed(timeout).unwrap_or(now)
}

/// The handlers a runner serves: name → sha256 of the component.
pub type Served = std::collections::BTreeMap<String, String>;

/// A runner's `handlers` column: a JSON object of name → digest.
pub(crate) fn handlers_of(text: Option<String>) -> Option<Served> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

pub(crate) fn served_json(handlers: &Served) -> Result<String> {
    serde_json::to_string(handlers).map_err(|e| Error::invalid("handlers", e.to_string()))
}

/// The message of a task given up because no live worker serves its handler.
pub(crate) const UNSERVED: &str = "no live worker has served this handler for the overseer's horizon";

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_masked_wherever_they_stand() {
        assert_eq!(redact("postgres://u:pw@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(redact("postgres://u:p/w?x#y@h/db"), "postgres://u:***@h/db");
        assert_eq!(
            redact("postgres://u@h/db?password=s3cret&sslmode=off"),
            "postgres://u@h/db?password=***&sslmode=off"
        );
        assert_eq!(redact("sqlite://queue.db"), "sqlite://queue.db");
        assert!(!redact("foo://u:sekrit@host/db").contains("sekrit"));
    }
}

pub(crate) fn n32(v: i64) -> u32 {
    v.clamp(0, u32::MAX as i64) as u32
}

/// Row decoders for backends with native time types (PostgreSQL, MySQL): the same columns,
/// BIGINT integers, `DateTime<Utc>` times. Text is read unchecked: MySQL reports the
/// binary-collated (case-sensitive) VARCHARs as VARBINARY, though they hold UTF-8 text.
macro_rules! native_row_decoders {
    ($row:ty) => {
        fn task_from_row(r: &$row) -> Result<Task> {
            const T: &str = "task_queue";
            Ok(Task {
                id: r.try_get("id")?,
                queued_on: r.try_get("queued_on")?,
                queued_by: r.try_get_unchecked("queued_by_id")?,
                scheduled_on: r.try_get("scheduled_on")?,
                handler: r.try_get_unchecked("task_handler_class")?,
                data: r.try_get_unchecked("task_data")?,
                last_status: status(T, &r.try_get_unchecked::<String, _>("last_status")?)?,
                max_retries: n32(r.try_get("max_retries")?),
                task_runs_failed: n32(r.try_get("task_runs_failed")?),
                queue: r.try_get_unchecked("queue")?,
                priority: r.try_get::<i64, _>("priority")?.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                unique_key: r.try_get_unchecked("unique_key")?,
                run_timeout_secs: r.try_get("run_timeout")?,
                backoff: BackoffSettings {
                    base_ms: r.try_get("backoff_base_ms")?,
                    max_ms: r.try_get("backoff_max_ms")?,
                },
                gave_up_on: r.try_get("gave_up_on")?,
            })
        }

        fn run_from_row(r: &$row) -> Result<Run> {
            const T: &str = "task_runs";
            Ok(Run {
                id: r.try_get("id")?,
                task_id: r.try_get("task_queue_id")?,
                attempt: n32(r.try_get("attempt")?),
                created_on: r.try_get("created_on")?,
                started_on: r.try_get("started_on")?,
                percents_completed: r.try_get::<i64, _>("percents_completed")?.clamp(0, 100) as u8,
                finished_on: r.try_get("finished_on")?,
                results: r.try_get_unchecked("results")?,
                status: status(T, &r.try_get_unchecked::<String, _>("status")?)?,
                error_code: r.try_get_unchecked("error_code")?,
                error_message: r.try_get_unchecked("error_message")?,
                runner_id: r.try_get("task_runner_id")?,
                duration_ms: r.try_get("duration_ms")?,
                component_digest: r.try_get_unchecked("component_digest")?,
                fuel_used: r.try_get("fuel_used")?,
                logs: r.try_get_unchecked("logs")?,
            })
        }

        fn runner_from_row(r: &$row) -> Result<Runner> {
            const T: &str = "task_runners";
            Ok(Runner {
                id: r.try_get("id")?,
                process_id: n32(r.try_get("process_id")?),
                host_name: r.try_get_unchecked("host_name")?,
                started_on: r.try_get("started_on")?,
                finished_on: r.try_get("finished_on")?,
                status: status(T, &r.try_get_unchecked::<String, _>("status")?)?,
                heartbeat_on: r.try_get("heartbeat_on")?,
                handlers: $crate::store::handlers_of(r.try_get_unchecked::<Option<String>, _>("handlers")?),
            })
        }
    };
}
pub(crate) use native_row_decoders;

/// Options for opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Apply migrations on open.
    pub migrate: bool,
    pub max_connections: u32,
    /// How long the first connection to a server may take before opening fails.
    pub connect_timeout: Duration,
}

impl StoreOptions {
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { migrate: true, max_connections: 4, connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT }
    }
}

/// A database URL without its password, for messages and logs: the password between `:` and
/// the last `@` (even one holding `/`, `?` or `#`) and any `password=` parameter are masked.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some(parts) => parts,
        None => ("", url),
    };
    let prefix = if scheme.is_empty() { String::new() } else { format!("{scheme}://") };
    let (creds, tail) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let creds = match creds {
        Some(c) => match c.split_once(':') {
            Some((user, _)) => format!("{user}:***@"),
            None => format!("{c}@"),
        },
        None => String::new(),
    };
    // Query parameters: password=… (and anything after it up to the next &) masked.
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{prefix}{creds}{tail}")
}

/// Open a first connection to a server, within `timeout`, so that a server that is down, an
/// unknown host or wrong credentials are each told apart at once.
pub(crate) async fn first_connection<C: sqlx::Connection>(
    url: &str,
    options: &C::Options,
    timeout: Duration,
) -> Result<()> {
    match tokio::time::timeout(timeout, C::connect_with(options)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(connect_error(url, &e)),
        Err(_) => Err(Error::Connect {
            url: redact(url),
            reason: format!("no answer within {} (--connect-timeout)", humantime::format_duration(timeout)),
        }),
    }
}

fn connect_error(url: &str, e: &sqlx::Error) -> Error {
    let reason = match e {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused: no server is listening there".to_string()
        }
        sqlx::Error::Io(io) if io.to_string().contains("lookup") => format!("unknown host ({io})"),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("28P01") | Some("28000") | Some("1045") => format!("authentication failed: {}", db.message()),
            Some("3D000") | Some("1049") => format!("no such database: {}", db.message()),
            _ => db.message().to_string(),
        },
        other => other.to_string(),
    };
    Error::Connect { url: redact(url), reason }
}

/// Open the store a URL names: `sqlite://PATH`, `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` or
/// `mysql://` (also `mariadb://`) `USER[:PASSWORD]@HOST[:PORT]/DB`.
pub async fn open(url: &str, options: &StoreOptions) -> Result<SharedStore> {
    let scheme = url.split_once("://").map(|(s, _)| s).or_else(|| url.split_once(':').map(|(s, _)| s));
    let store: SharedStore = match scheme {
        Some("sqlite") => Arc::new(sqlite::SqliteStore::connect(url, options).await?),
        Some("postgres") | Some("postgresql") => Arc::new(postgres::PostgresStore::connect(url, options).await?),
        Some("mysql") | Some("mariadb") => Arc::new(mysql::MySqlStore::connect(url, options).await?),
        Some(other) => {
            return Err(Error::BadUrl {
                url: redact(url),
                reason: format!(
                    "unknown scheme {other:?}; use sqlite://PATH, postgres://USER@HOST/DB or mysql://USER@HOST/DB"
                ),
            })
        }
        None => {
            return Err(Error::BadUrl {
                url: redact(url),
                reason: "expected a URL such as sqlite://taskhost.db".into(),
            })
        }
    };
    if options.migrate {
        store.migrate().await?;
    }
    Ok(store)
}
