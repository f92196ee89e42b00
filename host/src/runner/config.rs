//! A worker's settings, and what it reports when it stops.

use std::time::Duration;

use crate::model::{RunnerId, EVERY_QUEUE};
use crate::overseer::OverseerConfig;
use crate::retry::Backoff;

/// How a worker works: concurrency, queues, intervals, the grace period, memory, batches.
/// The defaults ([`WorkerConfig::default`]) are the `DEFAULT_*` constants below.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Runs executed at once (at most the sandbox's pool of instances).
    pub concurrency: usize,
    /// Queues to claim from; `["*"]` ([`EVERY_QUEUE`], the default): every queue.
    pub queues: Vec<String>,
    /// How long an idle worker waits before looking for due runs again.
    pub poll_interval: Duration,
    /// The same, on a database that wakes idle workers when tasks are added (PostgreSQL's
    /// LISTEN/NOTIFY): a slow safety net.
    pub notified_poll_interval: Duration,
    /// How often an idle worker that has no wake-ups from the database (SQLite, MySQL) looks at
    /// the newest task's id, to claim tasks other processes add without waiting for its poll
    /// (zero: never; tasks this process adds wake it at once regardless).
    pub probe_interval: Duration,
    /// How often the worker tells the database it is alive.
    pub heartbeat_interval: Duration,
    /// After how long without a heartbeat overseers declare a runner dead (theirs, not only
    /// this worker's own overseer's): the worker stops its runs well before (see `fence.rs`).
    pub heartbeat_horizon: Duration,
    /// How often, while runs are in flight, the worker asks the database which of them are
    /// still running, and stops those cancelled or timed out elsewhere (PostgreSQL also wakes it
    /// at once on a cancellation).
    pub run_check_interval: Duration,
    /// How long the whole stop may take once shutdown is asked: in-flight runs finishing, their
    /// outcomes written, the runner marked (see `stop`). An upper bound: what is not done by
    /// then is left to the overseer.
    pub shutdown_grace: Duration,
    /// Guest memory in use at once: each run reserves its memory limit from this budget before
    /// it starts. None = `concurrency` × the default memory limit.
    pub memory_budget_bytes: Option<u64>,
    /// Finish and exit when the process's resident memory passes this many bytes. None = the
    /// memory budget plus [`WorkerConfig::HOST_MEMORY_BYTES`] for the host itself.
    pub rss_cap_bytes: Option<u64>,
    /// How often resident memory is checked against the cap.
    pub rss_check_interval: Duration,
    /// Exit once nothing is due or running.
    pub drain: bool,
    /// With `drain`: also wait for runs that become due within this time (pending retries).
    pub drain_horizon: Duration,
    /// At most this many runners live at once (across all processes).
    pub runner_limit: u32,
    /// Run timeout of tasks that have none of their own.
    pub default_run_timeout: Duration,
    /// The retry backoff of tasks that set none of their own.
    pub backoff: Backoff,
    /// Rescan the plugins directory this often for new, replaced or removed plugins (None = only
    /// on SIGHUP or first use).
    pub watch_plugins: Option<Duration>,
    /// Run the overseer services in this process too (None = don't).
    pub overseer: Option<OverseerConfig>,
    /// Most runs claimed in one round trip.
    pub claim_batch: usize,
    /// Most outcomes written in one transaction.
    pub finish_batch: usize,
    /// Most bytes of outcomes (results, logs, errors) written in one transaction: keeps a batch
    /// under a server's packet limit (MySQL's `max_allowed_packet`).
    pub finish_batch_bytes: usize,
    /// How long to wait for more free slots before claiming, and for more outcomes before
    /// writing: batches short runs into fewer transactions at the cost of this much latency.
    pub batch_linger: Duration,
    /// When outcomes could not be written for this long, the worker stops heartbeating so the
    /// overseer of another worker times its runs out and they run again elsewhere.
    pub writer_stuck_limit: Duration,
    /// Longest one write of outcomes may take before it counts as a failed try (then retried):
    /// a write waiting on another session's lock is waited out, never taken for a refusal.
    pub write_timeout: Duration,
    /// Refuse to start ([`crate::error::Error::NoPlugins`]) when no plugin of the directory is usable:
    /// a worker that can run nothing is a misconfiguration (the CLI sets it).
    pub require_plugins: bool,
    /// A run that cannot start for want of a host resource (`host-busy`: the sandbox's pool is
    /// full) is put back in the queue without counting as a failure, for at most this long; then
    /// it fails with `host-busy` (retried as any failure).
    pub put_back_limit: Duration,
}

impl WorkerConfig {
    /// Runs at once.
    pub const DEFAULT_CONCURRENCY: usize = 16;
    /// An idle worker's look for due runs.
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(50);
    /// The same, woken by the database when tasks are added.
    pub const DEFAULT_NOTIFIED_POLL_INTERVAL: Duration = Duration::from_secs(2);
    /// An idle worker's look at the newest task's id, without wake-ups.
    pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_millis(10);
    /// Between heartbeats.
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
    /// Between checks of which runs in flight still run.
    pub const DEFAULT_RUN_CHECK_INTERVAL: Duration = Duration::from_secs(1);
    /// For runs in flight to finish after a signal.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
    /// Resident memory allowed for the host itself (engine, compiled code, buffers) on top of
    /// the guests' memory budget.
    pub const HOST_MEMORY_BYTES: u64 = 512 << 20;
    /// Between checks of resident memory.
    pub const DEFAULT_RSS_CHECK_INTERVAL: Duration = Duration::from_secs(1);
    /// Live runners at most across all machines.
    pub const DEFAULT_RUNNER_LIMIT: u32 = 8;
    /// A run's time when its task sets none.
    pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
    /// Runs one claim takes at most.
    pub const DEFAULT_CLAIM_BATCH: usize = 256;
    /// Outcomes one write takes at most.
    pub const DEFAULT_FINISH_BATCH: usize = 512;
    /// Bytes of outcomes one write takes at most.
    pub const DEFAULT_FINISH_BATCH_BYTES: usize = crate::store::StoreOptions::BATCH_BYTES;
    /// How long a claim or a write waits to gather more.
    pub const DEFAULT_BATCH_LINGER: Duration = Duration::from_millis(2);
    /// Between looks at the plugins directory.
    pub const DEFAULT_WATCH_PLUGINS: Duration = Duration::from_secs(2);
    /// Outcomes unwritable this long stop the heartbeat (others take over).
    pub const DEFAULT_WRITER_STUCK_LIMIT: Duration = Duration::from_secs(60);
    /// Longest one write of outcomes may take.
    pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
    /// How long a run that cannot start is put back before it fails.
    pub const DEFAULT_PUT_BACK_LIMIT: Duration = Duration::from_secs(600);

    /// The memory budget given the default per-run memory limit.
    pub fn memory_budget(&self, default_memory_limit: u64) -> u64 {
        self.memory_budget_bytes.unwrap_or((self.concurrency.max(1) as u64).saturating_mul(default_memory_limit))
    }

    /// The resident-memory cap given the memory budget.
    pub fn rss_cap(&self, memory_budget: u64) -> u64 {
        self.rss_cap_bytes.unwrap_or(memory_budget.saturating_add(Self::HOST_MEMORY_BYTES))
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: Self::DEFAULT_CONCURRENCY,
            queues: vec![EVERY_QUEUE.to_string()],
            poll_interval: Self::DEFAULT_POLL_INTERVAL,
            notified_poll_interval: Self::DEFAULT_NOTIFIED_POLL_INTERVAL,
            probe_interval: Self::DEFAULT_PROBE_INTERVAL,
            heartbeat_interval: Self::DEFAULT_HEARTBEAT_INTERVAL,
            heartbeat_horizon: crate::overseer::liveness::Config::DEFAULT_HEARTBEAT_HORIZON,
            run_check_interval: Self::DEFAULT_RUN_CHECK_INTERVAL,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
            memory_budget_bytes: None,
            rss_cap_bytes: None,
            rss_check_interval: Self::DEFAULT_RSS_CHECK_INTERVAL,
            drain: false,
            drain_horizon: Duration::ZERO,
            runner_limit: Self::DEFAULT_RUNNER_LIMIT,
            default_run_timeout: Self::DEFAULT_RUN_TIMEOUT,
            backoff: Backoff::default(),
            watch_plugins: Some(Self::DEFAULT_WATCH_PLUGINS),
            overseer: Some(OverseerConfig::default()),
            claim_batch: Self::DEFAULT_CLAIM_BATCH,
            finish_batch: Self::DEFAULT_FINISH_BATCH,
            finish_batch_bytes: Self::DEFAULT_FINISH_BATCH_BYTES,
            batch_linger: Self::DEFAULT_BATCH_LINGER,
            writer_stuck_limit: Self::DEFAULT_WRITER_STUCK_LIMIT,
            write_timeout: Self::DEFAULT_WRITE_TIMEOUT,
            require_plugins: false,
            put_back_limit: Self::DEFAULT_PUT_BACK_LIMIT,
        }
    }
}

/// Why a worker stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// The shutdown future completed (a signal).
    Shutdown,
    /// `drain` was set and nothing was left to do.
    Drained,
    /// The process passed its memory cap.
    MemoryCap,
    /// The overseer declared this runner dead (its heartbeat was late): it stops at once.
    RunnerLost,
}

/// What a worker did, told when it stops.
#[derive(Debug, Clone)]
pub struct WorkerReport {
    /// The runner it registered.
    pub runner_id: RunnerId,
    /// Why it stopped.
    pub exit: ExitReason,
    /// Runs whose outcome it wrote.
    pub runs_finished: u64,
    /// Of the finished, those that succeeded.
    pub runs_succeeded: u64,
    /// Of the finished, those that snoozed (the others failed or timed out).
    pub runs_snoozed: u64,
    /// Runs still in flight, or whose outcome was not written, when the grace period ended
    /// (left to the overseer, which times them out; their tasks run again).
    pub runs_abandoned: u64,
    /// Runs stopped because they were ended elsewhere (timed out by an overseer) while this
    /// worker ran them.
    pub runs_ended_elsewhere: u64,
    /// Outcomes the database refused, stored instead as `outcome-rejected`.
    pub outcomes_rejected: u64,
}

impl WorkerReport {
    /// The report of a worker that stopped before registering a runner.
    pub fn nothing_run(exit: ExitReason) -> Self {
        WorkerReport {
            runner_id: 0,
            exit,
            runs_finished: 0,
            runs_succeeded: 0,
            runs_snoozed: 0,
            runs_abandoned: 0,
            runs_ended_elsewhere: 0,
            outcomes_rejected: 0,
        }
    }
}
