//! The library's error type.

use std::path::PathBuf;

use crate::model::TaskId;

/// A result of the library: its [`Error`] by default.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the library can fail with, each one clear line (`Display`). Retryable or not:
/// [`Error::is_retryable`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A database call failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),

    /// A migration failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),

    /// The database has no tables yet.
    #[error(
        "the database has no taskhost tables: create them with `taskhost migrate` (or open it without --no-migrate)"
    )]
    NotMigrated,

    /// A database URL that cannot be used (`url` has its password left out).
    #[error("invalid database URL {url:?}: {reason}")]
    BadUrl {
        /// The URL, its password left out.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The database server did not answer (`url` has its password left out).
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The URL, its password left out.
        url: String,
        /// What the connection said.
        reason: String,
    },

    /// Task data that is not JSON.
    #[error("task data is not valid JSON: {0}")]
    InvalidJson(String),

    /// No plugin of that name in the plugins directory.
    #[error("unknown handler {name:?}: there is no {name}.wasm in {}", dir.display())]
    UnknownHandler {
        /// The handler asked for.
        name: String,
        /// The plugins directory.
        dir: PathBuf,
    },

    /// The plugins directory cannot be read.
    #[error("cannot read the plugins directory {}: {reason}", dir.display())]
    PluginsDir {
        /// The directory.
        dir: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },

    /// A worker found nothing it could run.
    #[error("no usable plugin in {}: nothing for a worker to run", dir.display())]
    NoPlugins {
        /// The plugins directory.
        dir: PathBuf,
    },

    /// A plugin that exists but cannot be used.
    #[error("handler {name:?} cannot be used: {reason}")]
    BrokenHandler {
        /// The handler.
        name: String,
        /// Why it cannot be used.
        reason: String,
    },

    /// A plugin's manifest is wrong.
    #[error("invalid manifest {}: {reason}", path.display())]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },

    /// The operator's configuration file is wrong.
    #[error("invalid configuration {}: {reason}", path.display())]
    BadConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },

    /// No task with that id.
    #[error("task {0} not found")]
    TaskNotFound(TaskId),

    /// No schedule with that name.
    #[error("no schedule named {0:?}")]
    ScheduleNotFound(String),

    /// A task that cannot be replayed (it is not dead or cancelled, or its key is held).
    #[error("task {id} cannot be retried: {reason}")]
    CannotRetry {
        /// The task.
        id: TaskId,
        /// Why it cannot.
        reason: String,
    },

    /// As many runners as allowed are live already.
    #[error("runner limit reached: {live} runners are already running (limit {limit})")]
    RunnerLimit {
        /// Runners live now.
        live: u64,
        /// Runners allowed.
        limit: u32,
    },

    /// A value that is not valid: `what` names it.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What the value is.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// A file or process could not be read or written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },

    /// wasmtime refused a component or could not start.
    #[error("wasm engine: {0}")]
    Engine(String),

    /// A row the host cannot read (it should never happen).
    #[error("corrupt row in {table}: {reason}")]
    CorruptRow {
        /// The table.
        table: &'static str,
        /// What is wrong with the row.
        reason: String,
    },
}

/// The code a database gave an error, as the classifiers below match it: MySQL's error number
/// (sqlx's `code()` there is the SQLSTATE, which lumps a lock wait timeout, a bad string and
/// many more together as `HY000`), every other database's own code.
pub(crate) fn code_of(db: &dyn sqlx::error::DatabaseError) -> Option<String> {
    #[cfg(feature = "mysql")]
    if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return Some(mysql.number().to_string());
    }
    db.code().map(|c| c.into_owned())
}

impl Error {
    /// Whether trying the same operation again later may succeed (a busy or unreachable
    /// database), as opposed to a request that is wrong in itself.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Database(e) => match e {
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
                | sqlx::Error::Protocol(_) => true,
                sqlx::Error::Database(_) => self.is_contention(),
                _ => false,
            },
            Error::Io { .. } => true,
            _ => false,
        }
    }

    /// Whether the database refused for want of a lock another session holds (busy, lock wait
    /// timeout, deadlock, serialization failure): waiting and trying again is the cure.
    pub fn is_contention(&self) -> bool {
        let Error::Database(sqlx::Error::Database(db)) = self else {
            return false;
        };
        // SQLite busy/locked; MySQL deadlock/lock wait; PostgreSQL serialization, deadlock, lock
        // not available (lock_timeout).
        matches!(
            code_of(db.as_ref()).as_deref(),
            Some("5" | "6" | "517" | "1213" | "1205" | "40001" | "40P01" | "55P03")
        )
    }

    /// Whether the database refused the data itself (a value too long, invalid text, a packet
    /// over the server's limit, a constraint): writing the same again cannot succeed. Anything
    /// else that fails a write (the server down, read-only, out of connections, timeouts) is the
    /// database's state, and is waited out.
    pub fn is_data_error(&self) -> bool {
        let Error::Database(sqlx::Error::Database(db)) = self else {
            return false;
        };
        // The SQLSTATE (PostgreSQL, MySQL), and each database's own code (MySQL's number).
        let state = db.code();
        let state = state.as_deref().unwrap_or("");
        let code = code_of(db.as_ref());
        let code = code.as_deref().unwrap_or("");
        match db.kind() {
            sqlx::error::ErrorKind::UniqueViolation
            | sqlx::error::ErrorKind::ForeignKeyViolation
            | sqlx::error::ErrorKind::NotNullViolation
            | sqlx::error::ErrorKind::CheckViolation => return true,
            _ => {}
        }
        // SQLSTATE: data exception (22…), integrity (23…), program limit (54…).
        state.starts_with("22")
            || state.starts_with("23")
            || state.starts_with("54")
            // MySQL: data too long, bad string, out of range, null, packet too large.
            || matches!(code, "1406" | "1366" | "1264" | "1048" | "1153" | "1301" | "1292")
            // SQLite: too big, constraint, mismatch.
            || matches!(code, "18" | "19" | "20")
    }

    /// Whether the database refused a row for a unique key another row holds.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, Error::Database(sqlx::Error::Database(db)) if db.is_unique_violation())
    }

    /// Whether the database said a table does not exist (SQLite, PostgreSQL 42P01, MySQL 1146).
    pub fn is_missing_table(&self) -> bool {
        let Error::Database(sqlx::Error::Database(db)) = self else {
            return false;
        };
        matches!(code_of(db.as_ref()).as_deref(), Some("42P01" | "1146")) || db.message().starts_with("no such table")
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Invalid { what, reason: reason.into() }
    }
}
