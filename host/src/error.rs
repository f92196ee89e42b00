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
    /// A database call failed. (Not its `source`: its words are in the line already, and a
    /// chain printed would say them twice.)
    #[error("database error: {0}")]
    Database(sqlx::Error),

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

    /// No handler of that name: none deployed to the database, no plugin in the directory.
    #[error(
        "unknown handler {name:?}: none is deployed by that name (taskhost deploy), and there is no {name}.wasm in {}",
        dir.display()
    )]
    NotDeployed {
        /// The handler asked for.
        name: String,
        /// The plugins directory.
        dir: PathBuf,
    },

    /// A handler name no plugin can have (a plugin's name is its file's, `NAME.wasm`).
    #[error("invalid handler name {0:?}: use letters, digits, '-' and '_'")]
    HandlerName(String),

    /// The plugins directory cannot be read.
    #[error("cannot read the plugins directory {}: {reason}", dir.display())]
    PluginsDir {
        /// The directory.
        dir: PathBuf,
        /// Why it cannot be read.
        reason: String,
    },

    /// A worker found nothing it could run.
    #[error("no usable plugin in {} and none deployed to the database: nothing for a worker to run", dir.display())]
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

    /// A handler has no version such as asked for (deployed, or to roll back to).
    #[error("handler {handler:?}: {reason}")]
    NoVersion {
        /// The handler.
        handler: String,
        /// What is missing.
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

    /// A task its success deleted (its queue's `on_success = delete`): only its end is kept.
    #[error(
        "task {id} succeeded at {} and was deleted: queue {queue:?} deletes its successes, so its data, \
         results and logs are not kept",
        finished_on.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )]
    TaskDeleted {
        /// The task.
        id: TaskId,
        /// Its queue.
        queue: String,
        /// Its handler.
        handler: String,
        /// When its run succeeded (the last of the batch of successes that deleted it).
        finished_on: chrono::DateTime<chrono::Utc>,
    },

    /// No schedule with that name.
    #[error("no schedule named {0:?}")]
    ScheduleNotFound(String),

    /// A task that cannot be replayed (it is not finished, or its key is held).
    #[error("task {id} cannot be retried: {reason}")]
    CannotRetry {
        /// The task.
        id: TaskId,
        /// Why it cannot.
        reason: String,
    },

    /// A signal a task cannot take (it is finished, or holds too many unread).
    #[error("cannot signal task {id}: {reason}")]
    CannotSignal {
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

    /// A task of several added at once refused (its dependencies, its version): `index` is its
    /// place among them, from 0. (Not a `source`: its words are in the line already.)
    #[error("tasks[{index}]: {error}")]
    InBatch {
        /// The task's place among those added.
        index: usize,
        /// Why it was refused.
        error: Box<Error>,
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

    /// A benchmark could not finish a phase (a task that never ran, a worker that failed).
    #[error("benchmark: {0}")]
    Bench(String),

    /// A row the host cannot read (it should never happen).
    #[error("corrupt row in {table}: {reason}")]
    CorruptRow {
        /// The table.
        table: &'static str,
        /// What is wrong with the row.
        reason: String,
    },
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Database(e)
    }
}

impl Error {
    // Whether an error is worth trying again, and what a database's refusal means, are the
    // store's to say (each database's codes in its own file): `store/refusal.rs`.

    /// Whether the database refused a row for a unique key another row holds.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, Error::Database(sqlx::Error::Database(db)) if db.is_unique_violation())
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Invalid { what, reason: reason.into() }
    }
}

/// What a caught panic said (its message, if it gave one as text).
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}
