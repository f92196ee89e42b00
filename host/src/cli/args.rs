//! The command line's arguments, as clap reads them.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use taskhost::model::RunStatus;
use taskhost::runner::WorkerConfig;

// No Debug: the database URL may hold a password.
#[derive(Parser)]
#[command(
    name = "taskhost",
    version,
    about = "A durable SQL task queue whose handlers are sandboxed WebAssembly components"
)]
pub struct Cli {
    /// Database URL: sqlite://PATH (created if missing).
    #[arg(long, global = true, env = "TASKHOST_DATABASE_URL", default_value = "sqlite://taskhost.db")]
    pub database_url: String,
    /// Directory of handler components (NAME.wasm, optional NAME.toml manifest).
    #[arg(long = "plugins", global = true, env = "TASKHOST_PLUGINS", default_value = "target/plugins")]
    pub plugins_dir: PathBuf,
    /// Where compiled components are cached [default: $XDG_CACHE_HOME/taskhost or ~/.cache/taskhost].
    #[arg(long, global = true, env = "TASKHOST_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The operator's configuration file: handler grants, limits above the defaults, plugin
    /// size and cache limits (see the README's Trust model).
    #[arg(long, global = true, env = "TASKHOST_CONFIG")]
    pub config: Option<PathBuf>,
    /// How long the first connection to a database server may take.
    #[arg(long, global = true, value_parser = humantime::parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// Do not create or update the tables at start.
    #[arg(long, global = true)]
    pub no_migrate: bool,
    /// Log filter (tracing's EnvFilter syntax), e.g. "info" or "taskhost=debug".
    #[arg(long, global = true, env = "TASKHOST_LOG", default_value = "warn")]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or update the tables, then exit.
    Migrate,
    /// Queue a task; prints its id.
    Add(AddArgs),
    /// Claim and run tasks until stopped (SIGINT/SIGTERM; SIGHUP reloads plugins).
    Worker(WorkerArgs),
    /// Run the maintenance services (liveness, run timeouts, retries, rotation).
    Overseer {
        /// Run each service once and exit.
        #[arg(long)]
        once: bool,
    },
    /// List tasks.
    List(ListArgs),
    /// Show a task with its runs.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Replay a dead letter (a task given up on).
    Retry { id: i64 },
    /// Load every plugin and say whether it can be used.
    Plugins {
        #[arg(long)]
        json: bool,
    },
    /// Run one task in the sandbox without a database and print the outcome.
    RunOnce {
        handler: String,
        #[arg(long, default_value = "{}")]
        data: String,
    },
    /// Queue a few example tasks, run a worker until they are done and show the outcome.
    Demo,
    /// Compile a component read on stdin and write the artifact on stdout: the bounded child
    /// process a worker compiles in (internal).
    #[command(hide = true)]
    CompileComponent {
        #[arg(long)]
        max_wasm_stack: usize,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The handler: a plugin name (NAME.wasm in the plugins directory).
    pub handler: String,
    /// The task's data, a JSON document.
    #[arg(long, default_value = "{}")]
    pub data: String,
    /// Run at this time (RFC 3339, e.g. 2026-01-02T03:04:05Z).
    #[arg(long, conflicts_with = "in_")]
    pub at: Option<DateTime<Utc>>,
    /// Run after this delay (e.g. 90s, 5m, 1h 30m).
    #[arg(long = "in", value_parser = humantime::parse_duration)]
    pub in_: Option<Duration>,
    #[arg(long, default_value_t = taskhost::model::DEFAULT_MAX_RETRIES)]
    pub max_retries: u32,
    #[arg(long, default_value = taskhost::model::DEFAULT_QUEUE)]
    pub queue: String,
    /// Lower runs first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// While a task with this key is unfinished, adding another returns the existing one.
    #[arg(long)]
    pub unique_key: Option<String>,
    #[arg(long)]
    pub queued_by: Option<String>,
    /// Time out a run after this long [default: 1 day].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub run_timeout: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Runs executed at once.
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Queues to claim from, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = taskhost::model::DEFAULT_QUEUE)]
    pub queues: Vec<String>,
    /// Most runs claimed in one round trip.
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CLAIM_BATCH)]
    pub claim_batch: usize,
    /// Exit 0 once nothing is due or running.
    #[arg(long)]
    pub drain: bool,
    /// With --drain, also wait for runs due within this time (pending retries).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pub drain_horizon: Duration,
    /// Do not run the maintenance services in this process.
    #[arg(long)]
    pub no_overseer: bool,
    /// Rescan the plugins directory this often ("0s": only on SIGHUP).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub watch_plugins: Duration,
    /// How often an idle worker looks for due runs (SQLite, MySQL).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50ms")]
    pub poll_interval: Duration,
    /// The same on PostgreSQL, where LISTEN/NOTIFY wakes idle workers: a safety net.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub notified_poll_interval: Duration,
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub heartbeat_interval: Duration,
    /// Time in-flight runs get to finish after SIGINT/SIGTERM.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub shutdown_grace: Duration,
    /// Guest memory in use at once, in MiB: each run holds its memory limit while it runs
    /// [default: concurrency × the default memory limit].
    #[arg(long)]
    pub memory_budget_mb: Option<u64>,
    /// Finish and exit when resident memory passes this many MiB [default: the memory budget + 512].
    #[arg(long)]
    pub rss_cap_mb: Option<u64>,
    /// At most this many runners live at once.
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_RUNNER_LIMIT)]
    pub runner_limit: u32,
    /// A runner whose heartbeat is older than this is declared dead.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub heartbeat_horizon: Duration,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    pub status: Option<RunStatus>,
    #[arg(long)]
    pub queue: Option<String>,
    #[arg(long)]
    pub handler: Option<String>,
    /// Only dead letters: tasks given up on, with their last error.
    #[arg(long)]
    pub dead: bool,
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    #[arg(long)]
    pub json: bool,
}
