//! `taskhost worker`'s arguments.

use std::time::Duration;

use clap::Args;
use taskhost::runner::WorkerConfig;

use super::values::*;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Runs executed at once (at least 1).
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CONCURRENCY, value_parser = at_least_one)]
    pub concurrency: usize,
    /// Queues to claim from, comma-separated; * (the default) claims from every queue.
    #[arg(long, value_delimiter = ',', default_value = taskhost::model::EVERY_QUEUE, value_parser = worker_queue)]
    pub queues: Vec<String>,
    /// Most runs claimed in one round trip (at least 1).
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CLAIM_BATCH, value_parser = at_least_one)]
    pub claim_batch: usize,
    /// Exit 0 once nothing is due or running.
    #[arg(long)]
    pub drain: bool,
    /// With --drain, also wait for runs due within this time (pending retries).
    #[arg(long, value_parser = taskhost::text::parse_duration, default_value = "0s")]
    pub drain_horizon: Duration,
    /// Do not run the maintenance services in this process.
    #[arg(long)]
    pub no_overseer: bool,
    /// Rescan the plugins directory this often ("0s": only on SIGHUP).
    #[arg(long, value_parser = taskhost::text::parse_duration, default_value = "2s")]
    pub watch_plugins: Duration,
    /// How often an idle worker looks for due runs (SQLite, MySQL).
    #[arg(long, value_parser = positive_duration, default_value = "50ms")]
    pub poll_interval: Duration,
    /// The same on PostgreSQL, where LISTEN/NOTIFY wakes idle workers: a safety net.
    #[arg(long, value_parser = positive_duration, default_value = "2s")]
    pub notified_poll_interval: Duration,
    /// How often an idle worker on SQLite or MySQL looks at the newest task's id, to claim tasks
    /// other processes add before its next poll ("0s": never).
    #[arg(long, value_parser = taskhost::text::parse_duration, default_value = "10ms")]
    pub probe_interval: Duration,
    /// How often the worker records that it is alive.
    #[arg(long, value_parser = positive_duration, default_value = "5s")]
    pub heartbeat_interval: Duration,
    /// The longest a stop may take after SIGINT/SIGTERM: in-flight runs finish within it (less a
    /// share for marking the runner); what is not done by then is left to the overseer.
    #[arg(long, value_parser = taskhost::text::parse_duration, default_value = "30s")]
    pub shutdown_grace: Duration,
    /// Guest memory in use at once, in MiB: each run holds its memory limit while it runs
    /// [default: concurrency × the default memory limit].
    #[arg(long)]
    pub memory_budget_mb: Option<u64>,
    /// Finish and exit when resident memory passes this many MiB [default: the memory budget + 512].
    #[arg(long)]
    pub rss_cap_mb: Option<u64>,
    /// At most this many runners live at once (at least 1).
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_RUNNER_LIMIT, value_parser = clap::value_parser!(u32).range(1..))]
    pub runner_limit: u32,
    /// A runner whose heartbeat is older than this is declared dead [default: 30s, or the file's
    /// [overseer.liveness] heartbeat_horizon].
    #[arg(long, value_parser = positive_duration)]
    pub heartbeat_horizon: Option<Duration>,
    /// Successful and cancelled tasks are deleted this long after they ended [default: 30days,
    /// or the file's [overseer.rotation] retention].
    #[arg(long, value_parser = positive_duration, env = "TASKHOST_RETENTION")]
    pub retention: Option<Duration>,
    /// Serve Prometheus metrics at http://ADDR/metrics while the worker runs (an address that is
    /// not loopback needs [api] tokens, as `serve` does).
    #[arg(long, env = "TASKHOST_METRICS")]
    pub metrics: Option<std::net::SocketAddr>,
}
