//! The command line's arguments, as clap reads them. A value clap refuses (an unknown option, a
//! nonsense number, a time without a zone) is a usage error: one message and exit status 2.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

pub use super::bulk::{CancelArgs, DeleteArgs, RetryArgs};
pub use super::task_args::{AddArgs, ListArgs};
pub use super::worker_args::WorkerArgs;

use super::values::*;

// No Debug: the database URL may hold a password.
#[derive(Parser)]
#[command(
    name = "taskhost",
    version,
    about = "A durable SQL task queue whose handlers are sandboxed WebAssembly components"
)]
pub struct Cli {
    /// Database URL: sqlite://PATH (created if missing), postgres://… or mysql://….
    #[arg(long, global = true, env = "TASKHOST_DATABASE_URL", default_value = "sqlite://taskhost.db", help_heading = GLOBAL)]
    pub database_url: String,
    /// Directory of handler components (NAME.wasm, optional NAME.toml manifest).
    #[arg(long = "plugins", global = true, env = "TASKHOST_PLUGINS", default_value = "plugins", help_heading = GLOBAL)]
    pub plugins_dir: PathBuf,
    /// Where compiled components are cached [default: $XDG_CACHE_HOME/taskhost or ~/.cache/taskhost].
    #[arg(long, global = true, env = "TASKHOST_CACHE_DIR", help_heading = GLOBAL)]
    pub cache_dir: Option<PathBuf>,
    /// The operator's configuration file: handler grants, limits above the defaults, plugin
    /// size and cache limits (see docs/trust.md).
    #[arg(long, global = true, env = "TASKHOST_CONFIG", help_heading = GLOBAL)]
    pub config: Option<PathBuf>,
    /// How long the first connection to a database server may take.
    #[arg(long, global = true, value_parser = taskhost::text::parse_duration, default_value = "5s", help_heading = GLOBAL)]
    pub connect_timeout: Duration,
    /// Do not create or update the tables at start.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub no_migrate: bool,
    /// Log filter (tracing's EnvFilter syntax), e.g. "info" or "taskhost=debug".
    #[arg(long, global = true, env = "TASKHOST_LOG", default_value = "warn", value_parser = log_filter, help_heading = GLOBAL)]
    pub log: String,
    /// Log lines as text for people, or as JSON objects (one a line) for machines.
    #[arg(long, global = true, env = "TASKHOST_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, help_heading = GLOBAL)]
    pub log_format: LogFormat,
    /// Send spans (one a run, with task, run, handler, queue, attempt, outcome) to this
    /// OpenTelemetry collector over OTLP/HTTP (JSON to URL/v1/traces), e.g. http://127.0.0.1:4318.
    #[cfg(feature = "otlp")]
    #[arg(long, global = true, env = "TASKHOST_OTLP", value_name = "URL", value_parser = otlp_url, help_heading = GLOBAL)]
    pub otlp: Option<String>,
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
    /// Run the maintenance services: liveness, run timeouts, retries, rotation, schedules,
    /// statistics compaction and unserved handlers.
    Overseer {
        /// Run each service once and exit. The configuration file's schedules are not applied:
        /// what they would change is shown (with --apply, they are applied).
        #[arg(long)]
        once: bool,
        /// With --once: make the database's declared schedules the configuration file's.
        #[arg(long, requires = "once")]
        apply: bool,
        /// Successful and cancelled tasks are deleted this long after they ended [default:
        /// 30days, or the file's [overseer.rotation] retention].
        #[arg(long, value_parser = positive_duration, env = "TASKHOST_RETENTION")]
        retention: Option<Duration>,
    },
    /// List tasks.
    List(ListArgs),
    /// Show a task with its runs.
    Show {
        /// The task's id (as `add` printed it).
        id: i64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the queues: due, later and running tasks, lag (how long the oldest due task has
    /// waited), limits and the due tasks they hold back, paused or not; with --keys, the keys
    /// (fair shares) instead, the longest-waiting first.
    Queues {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// List the keys with unfinished tasks: due, later and running tasks, wait, weight.
        #[arg(long)]
        keys: bool,
        /// With --keys: of this queue only.
        #[arg(long, requires = "keys")]
        queue: Option<String>,
        /// With --keys: at most this many keys (1 to 1000).
        #[arg(long, requires = "keys", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
    },
    /// Flow-control limits of queues and handlers (runs in flight, starts per period), kept in
    /// the database and changed live (alone: list them).
    Limits {
        #[command(subcommand)]
        command: Option<super::limits::LimitsCommand>,
    },
    /// Periodic tasks: schedules that queue a task at every slot of a cron expression.
    Schedule {
        #[command(subcommand)]
        command: super::schedule::ScheduleCommand,
    },
    /// Statistics per handler and queue: tasks by status, runs by how they ended, failure rate,
    /// processing time (avg, p50, p95, max), fuel, first and latest run, runs in the last
    /// minute and hour.
    Stats {
        /// Only this handler's.
        #[arg(long)]
        handler: Option<String>,
        /// Only this queue's.
        #[arg(long)]
        queue: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause a queue: workers claim nothing more from it (they finish what they run), on every
    /// machine and across restarts, until `resume`.
    Pause {
        /// The queue.
        #[arg(value_parser = queue_name)]
        queue: String,
    },
    /// Resume a paused queue.
    Resume {
        /// The queue.
        queue: String,
    },
    /// Cancel tasks by id, or every unfinished task of a queue and/or handler: a scheduled one
    /// never runs, a running one is stopped by its worker within about a second.
    Cancel(CancelArgs),
    /// Replay a finished task (a dead letter, a cancelled task, or a succeeded one to run it
    /// again), or (--all-dead, --all-cancelled) every dead or cancelled one of a queue and/or handler.
    Retry(RetryArgs),
    /// Send a signal to a task: kept until a run of it reads it (`await-signal`); a task waiting
    /// for it is due at once.
    Signal {
        /// The task.
        id: i64,
        /// The signal's name.
        name: String,
        /// Its data, a JSON document; @FILE reads it from a file, - from standard input.
        #[arg(long, default_value = "{}")]
        data: String,
    },
    /// Delete finished tasks (succeeded, cancelled, dead letters) with their runs, in batches;
    /// never a scheduled, running or retry-awaiting one.
    DeleteFinished(DeleteArgs),
    /// Publish a handler into the database, for every worker on every machine within a second:
    /// a component (FILE, as the handler its stem names, or --name), checked as a worker would
    /// load it (size, manifest NAME.toml beside it, world), stored by its sha256 and made the
    /// handler's active version; a directory's every NAME.wasm (those unchanged are left).
    Deploy {
        /// A component (.wasm), or a plugins directory.
        path: PathBuf,
        /// The handler's name [default: the file's stem].
        #[arg(long)]
        name: Option<String>,
        /// Compile it here too, within the compile bounds (proves it compiles; caches it).
        #[arg(long)]
        compile: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A deployed handler's versions, the active one marked *, with who deployed each and when
    /// and the unfinished tasks pinned to it; --history: its releases.
    Versions {
        /// The handler.
        name: String,
        /// List its releases (deploys and rollbacks), the newest first.
        #[arg(long)]
        history: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make an earlier version of a deployed handler active again, for every worker within a
    /// second: the one active before, or --to.
    Rollback {
        /// The handler.
        name: String,
        /// The version: its digest, or the start of it (as `versions` shows it).
        #[arg(long, value_name = "DIGEST")]
        to: Option<String>,
    },
    /// Load every plugin and say whether it can be used.
    Plugins {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run one task in the sandbox without a database and print the outcome.
    RunOnce {
        /// The handler: a plugin name (NAME.wasm in the plugins directory).
        handler: String,
        /// The task's data, a JSON document; @FILE reads it from a file, - from standard input.
        #[arg(long, default_value = "{}")]
        data: String,
    },
    /// The edit loop for a handler's directory: build it, run it once on sample data, print the
    /// outcome; again at each change of its source, until Ctrl-C.
    Dev(super::dev::DevArgs),
    /// Queue a few example tasks, run a worker until they are done and show the outcome.
    Demo,
    /// Measure the queue on this database: bulk add, drain, enqueue-to-start latency and CPU a
    /// task, with the built-in no-op handler (or --handler), in a queue of its own that is
    /// removed at the end.
    Bench(super::bench::BenchArgs),
    /// Write a new handler, ready to build, into ./NAME (or --dir): its source, the WIT and a
    /// build.sh that builds plugins/NAME.wasm.
    New {
        /// The handler's language.
        #[arg(value_enum)]
        language: super::new::Language,
        /// The handler's name (NAME.wasm): a letter, then letters, digits, '-' and '_'.
        name: String,
        /// Where to write it [default: ./NAME]; it must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// A handler that makes an HTTP request (POSTs its data's payload to its url), to run
        /// under a network grant (Rust, Python, JavaScript and C).
        #[arg(long)]
        http: bool,
    },
    /// Serve the HTTP API (JSON under /api/v1) until stopped (SIGINT/SIGTERM).
    Serve {
        /// Where to listen. An address that is not loopback needs [api] tokens in the
        /// configuration file.
        #[arg(long, default_value = "127.0.0.1:8080", env = "TASKHOST_LISTEN")]
        listen: std::net::SocketAddr,
        /// Most time for a request's head to arrive, on a new connection or between requests on
        /// a kept-alive one; then the connection is closed.
        #[arg(long, value_parser = server_timeout, default_value = "10s")]
        header_timeout: Duration,
        /// Most time for a request's body to arrive (then a 408), and for a client to take the
        /// next byte of its answer (then its connection is dropped).
        #[arg(long, value_parser = server_timeout, default_value = "30s")]
        request_timeout: Duration,
        /// Most connections open at once; more wait until one closes.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000), default_value = "4096")]
        max_connections: u32,
    },
    /// Print a shell completion script on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Compile a component read on stdin and write the artifact on stdout: the bounded child
    /// process a worker compiles in (internal).
    #[command(hide = true)]
    CompileComponent {
        /// The engine's wasm stack limit, in bytes (part of what the artifact is compiled for).
        #[arg(long)]
        max_wasm_stack: usize,
        /// Cranelift's incremental cache: functions compiled before are taken from this
        /// owner-only directory, and new ones added.
        #[arg(long)]
        incremental_cache: Option<std::path::PathBuf>,
        /// The most the incremental cache may hold, in bytes.
        #[arg(long, default_value_t = 256 << 20)]
        incremental_max_bytes: u64,
    },
}

impl Command {
    /// Commands that read and print, then exit: when their reader goes (`taskhost list | head`)
    /// they end quietly, as git or ls do.
    pub fn only_prints(&self) -> bool {
        matches!(
            self,
            Command::List(_)
                | Command::Show { .. }
                | Command::Queues { .. }
                | Command::Limits { command: None | Some(super::limits::LimitsCommand::List { .. }) }
                | Command::Schedule { .. }
                | Command::Stats { .. }
                | Command::Versions { .. }
                | Command::Plugins { .. }
                | Command::Completions { .. }
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The heading global options are listed under in every command's help.
const GLOBAL: &str = "Global options";

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
