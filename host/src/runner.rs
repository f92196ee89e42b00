//! The worker: registers a runner, claims due runs, executes them in the sandbox, reports
//! progress and outcomes, heartbeats, and stops cleanly.
//!
//! ```no_run
//! # async fn demo(w: taskhost::runner::Worker) -> taskhost::Result<()> {
//! let report = w.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
//!
//! Options and defaults are on [`WorkerConfig`]. Shutdown: when the future given to
//! [`Worker::run`] completes, the worker stops claiming, lets in-flight runs finish within
//! `shutdown_grace`, times out whatever is still running after that, and marks its runner
//! finished.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch, Semaphore};

use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::model::*;
use crate::overseer::{Overseer, OverseerConfig};
use crate::plugins::Catalog;
use crate::retry::{self, Backoff};
use crate::sandbox::{Failure, GuestOutcome, RunInput};
use crate::store::SharedStore;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Runs executed at once.
    pub concurrency: usize,
    /// Queues to claim from.
    pub queues: Vec<String>,
    /// How long an idle worker waits before looking for due runs again.
    pub poll_interval: Duration,
    /// The same, on a database that wakes idle workers when tasks are added (PostgreSQL's
    /// LISTEN/NOTIFY): a slow safety net.
    pub notified_poll_interval: Duration,
    pub heartbeat_interval: Duration,
    /// How long in-flight runs may take to finish after shutdown is asked.
    pub shutdown_grace: Duration,
    /// Finish and exit when the process's resident memory passes this many bytes.
    pub rss_cap_bytes: u64,
    /// Exit once nothing is due or running.
    pub drain: bool,
    /// With `drain`: also wait for runs that become due within this time (pending retries).
    pub drain_horizon: Duration,
    /// At most this many runners live at once (across all processes).
    pub runner_limit: u32,
    /// Run timeout of tasks that have none of their own.
    pub default_run_timeout: Duration,
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
    /// How long to wait for more free slots before claiming, and for more outcomes before
    /// writing: batches short runs into fewer transactions at the cost of this much latency.
    pub batch_linger: Duration,
}

impl WorkerConfig {
    pub const DEFAULT_CONCURRENCY: usize = 16;
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(50);
    pub const DEFAULT_NOTIFIED_POLL_INTERVAL: Duration = Duration::from_secs(2);
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
    pub const DEFAULT_RSS_CAP_BYTES: u64 = 100 * 1024 * 1024;
    pub const DEFAULT_RUNNER_LIMIT: u32 = 8;
    pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
    pub const DEFAULT_CLAIM_BATCH: usize = 256;
    pub const DEFAULT_FINISH_BATCH: usize = 512;
    pub const DEFAULT_BATCH_LINGER: Duration = Duration::from_millis(2);
    pub const DEFAULT_WATCH_PLUGINS: Duration = Duration::from_secs(2);
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            concurrency: Self::DEFAULT_CONCURRENCY,
            queues: vec![DEFAULT_QUEUE.to_string()],
            poll_interval: Self::DEFAULT_POLL_INTERVAL,
            notified_poll_interval: Self::DEFAULT_NOTIFIED_POLL_INTERVAL,
            heartbeat_interval: Self::DEFAULT_HEARTBEAT_INTERVAL,
            shutdown_grace: Self::DEFAULT_SHUTDOWN_GRACE,
            rss_cap_bytes: Self::DEFAULT_RSS_CAP_BYTES,
            drain: false,
            drain_horizon: Duration::ZERO,
            runner_limit: Self::DEFAULT_RUNNER_LIMIT,
            default_run_timeout: Self::DEFAULT_RUN_TIMEOUT,
            backoff: Backoff::default(),
            watch_plugins: Some(Self::DEFAULT_WATCH_PLUGINS),
            overseer: Some(OverseerConfig::default()),
            claim_batch: Self::DEFAULT_CLAIM_BATCH,
            finish_batch: Self::DEFAULT_FINISH_BATCH,
            batch_linger: Self::DEFAULT_BATCH_LINGER,
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

#[derive(Debug, Clone)]
pub struct WorkerReport {
    pub runner_id: RunnerId,
    pub exit: ExitReason,
    pub runs_finished: u64,
    /// Runs still in flight when the grace period ended (timed out).
    pub runs_abandoned: u64,
}

pub struct Worker {
    store: SharedStore,
    catalog: Arc<Catalog>,
    clock: SharedClock,
    config: WorkerConfig,
}

/// What the run tasks share.
struct Shared {
    catalog: Arc<Catalog>,
    clock: SharedClock,
    backoff: Backoff,
    progress_tx: mpsc::Sender<ProgressUpdate>,
    done_tx: mpsc::UnboundedSender<(RunOutcome, tokio::sync::OwnedSemaphorePermit)>,
    /// Turns true when the grace period is over: runs still going are dropped.
    abort: watch::Receiver<bool>,
}

impl Worker {
    pub fn new(store: SharedStore, catalog: Arc<Catalog>, clock: SharedClock, config: WorkerConfig) -> Self {
        Worker { store, catalog, clock, config }
    }

    /// Work until `shutdown` completes (or, with `drain`, until nothing is left).
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<WorkerReport> {
        let cfg = self.config.clone();
        let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "unknown".into());
        let pid = std::process::id();
        let runner_id = self.store.register_runner(pid, &host, self.clock.now(), cfg.runner_limit).await?;
        tracing::info!(runner_id, pid, host = %host, concurrency = cfg.concurrency, "worker started");

        let (stop_tx, stop_rx) = watch::channel(false);
        let (exit_tx, mut exit_rx) = mpsc::unbounded_channel::<ExitReason>();

        // Heartbeat and memory watch.
        let heartbeat = tokio::spawn(heartbeat_loop(
            self.store.clone(),
            self.clock.clone(),
            runner_id,
            cfg.heartbeat_interval,
            cfg.rss_cap_bytes,
            exit_tx.clone(),
            stop_rx.clone(),
        ));
        let overseer = cfg.overseer.clone().map(|oc| {
            let o = Overseer::new(self.store.clone(), self.clock.clone(), oc);
            let rx = stop_rx.clone();
            tokio::spawn(async move { o.run_until(rx).await })
        });

        let watcher = cfg.watch_plugins.map(|every| tokio::spawn(self.catalog.clone().watch(every, stop_rx.clone())));

        // Progress writer: coalesced updates, one transaction per batch.
        let (progress_tx, progress_rx) = mpsc::channel(4096);
        let progress = tokio::spawn(progress_loop(self.store.clone(), progress_rx));

        // Finisher: outcomes in batches; a permit returns only once its outcome is written.
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let finished = Arc::new(AtomicU64::new(0));
        let finisher = tokio::spawn(finish_loop(
            self.store.clone(),
            done_rx,
            cfg.finish_batch,
            cfg.batch_linger,
            finished.clone(),
        ));

        let shared = Shared {
            catalog: self.catalog.clone(),
            clock: self.clock.clone(),
            backoff: cfg.backoff,
            progress_tx,
            done_tx,
            abort: watch::channel(false).1,
        };
        let (abort_tx, abort) = watch::channel(false);
        let shared = Arc::new(Shared { abort, ..shared });
        let slots = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
        let exit = {
            tokio::pin!(shutdown);
            self.claim_loop(&shared, &slots, runner_id, &mut shutdown, &mut exit_rx).await
        };
        tracing::info!(runner_id, ?exit, "worker stopping");

        // Let in-flight runs finish within the grace period.
        let total = cfg.concurrency.max(1) as u32;
        let drained = tokio::time::timeout(cfg.shutdown_grace, slots.acquire_many(total)).await;
        let abandoned = match drained {
            Ok(_) => 0,
            Err(_) => (total as usize - slots.available_permits()) as u64,
        };
        // Runs still going are dropped (their stores with them); the finisher and the progress
        // writer end once the last run task has let go of its senders.
        let _ = abort_tx.send(true);
        drop(shared);
        let _ = stop_tx.send(true);
        let _ = finisher.await;
        let _ = progress.await;
        let _ = heartbeat.await;
        if let Some(o) = overseer {
            let _ = o.await;
        }
        if let Some(w) = watcher {
            let _ = w.await;
        }
        let now = self.clock.now();
        if abandoned > 0 {
            tracing::warn!(runner_id, abandoned, "runs did not finish within the grace period: timing them out");
            self.store.time_out_runners(&[runner_id], now).await?;
        } else if exit != ExitReason::RunnerLost {
            self.store.finish_runner(runner_id, RunnerStatus::Success, now).await?;
        }
        let report = WorkerReport {
            runner_id,
            exit,
            runs_finished: finished.load(Ordering::Relaxed),
            runs_abandoned: abandoned,
        };
        tracing::info!(runner_id, runs = report.runs_finished, "worker stopped");
        Ok(report)
    }

    async fn claim_loop(
        &self,
        shared: &Arc<Shared>,
        slots: &Arc<Semaphore>,
        runner_id: RunnerId,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
        exit_rx: &mut mpsc::UnboundedReceiver<ExitReason>,
    ) -> ExitReason {
        let cfg = &self.config;
        let mut db_backoff = Duration::from_millis(50);
        // PostgreSQL wakes an idle worker when tasks are added; polling stays as the safety net.
        let mut wakeups = match self.store.wakeups().await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("no wake-ups from the database, polling only: {e}");
                None
            }
        };
        loop {
            if let Ok(reason) = exit_rx.try_recv() {
                return reason;
            }
            // Wait for a free slot.
            if slots.available_permits() == 0 {
                tokio::select! {
                    _ = &mut *shutdown => return ExitReason::Shutdown,
                    r = exit_rx.recv() => return r.unwrap_or(ExitReason::Shutdown),
                    p = slots.acquire() => drop(p),
                }
                // Linger briefly for more slots: one claim of many beats many claims of one.
                let want = (cfg.concurrency / 2).clamp(1, cfg.claim_batch.max(1)) as u32;
                let _ = tokio::time::timeout(cfg.batch_linger, slots.acquire_many(want)).await;
            }
            let free = slots.available_permits();
            if free == 0 {
                continue;
            }
            let limit = free.min(cfg.claim_batch.max(1)) as u32;
            let now = self.clock.now();
            let claimed = match self.store.claim(runner_id, &cfg.queues, limit, now, cfg.default_run_timeout).await {
                Ok(c) => {
                    db_backoff = Duration::from_millis(50);
                    c
                }
                Err(e) => {
                    tracing::warn!("claim failed, retrying in {db_backoff:?}: {e}");
                    tokio::select! {
                        _ = &mut *shutdown => return ExitReason::Shutdown,
                        _ = tokio::time::sleep(db_backoff) => {}
                    }
                    db_backoff = (db_backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            let got = claimed.len();
            for run in claimed {
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    // Cannot happen (we claimed at most the free slots); wait for one anyway.
                    let Ok(permit) = slots.clone().acquire_owned().await else {
                        break;
                    };
                    spawn_run(shared.clone(), run, permit);
                    continue;
                };
                spawn_run(shared.clone(), run, permit);
            }
            if got > 0 {
                continue;
            }
            if cfg.drain && slots.available_permits() == cfg.concurrency.max(1) {
                let horizon = chrono::Duration::from_std(cfg.drain_horizon).unwrap_or_default();
                match self.store.has_due_work(&cfg.queues, now + horizon).await {
                    Ok(false) => return ExitReason::Drained,
                    Ok(true) => {}
                    Err(e) => tracing::warn!("checking for due work failed: {e}"),
                }
            }
            tokio::select! {
                _ = &mut *shutdown => return ExitReason::Shutdown,
                r = exit_rx.recv() => return r.unwrap_or(ExitReason::Shutdown),
                _ = tokio::time::sleep(if wakeups.is_some() { cfg.notified_poll_interval } else { cfg.poll_interval }) => {}
                woke = next_wakeup(&mut wakeups) => {
                    if !woke {
                        wakeups = None; // the listener is gone: poll only
                    }
                }
            }
        }
    }
}

/// The next wake-up; pending forever without a channel. False when the channel closed.
async fn next_wakeup(wakeups: &mut Option<mpsc::Receiver<()>>) -> bool {
    match wakeups {
        Some(rx) => rx.recv().await.is_some(),
        None => std::future::pending().await,
    }
}

fn spawn_run(shared: Arc<Shared>, run: ClaimedRun, permit: tokio::sync::OwnedSemaphorePermit) {
    tokio::spawn(async move {
        let mut abort = shared.abort.clone();
        tokio::select! {
            outcome = execute(&shared, run) => {
                let _ = shared.done_tx.send((outcome, permit));
            }
            _ = abort.wait_for(|a| *a) => {}
        }
    });
}

/// Run one claimed run and decide what comes next.
async fn execute(shared: &Shared, run: ClaimedRun) -> RunOutcome {
    let started = Instant::now();
    let plugin = match shared.catalog.get(&run.handler) {
        Some(p) => Ok(p),
        None => {
            let catalog = shared.catalog.clone();
            let name = run.handler.clone();
            match tokio::task::spawn_blocking(move || catalog.get_or_load(&name)).await {
                Ok(r) => r,
                Err(e) => Err(Error::Engine(format!("plugin loader panicked: {e}"))),
            }
        }
    };
    let (failure, digest, fuel, report, results) = match plugin {
        Err(Error::UnknownHandler { .. }) | Err(Error::Invalid { .. }) => {
            (Some(Failure::handler_not_found(&run.handler)), None, None, None, None)
        }
        Err(e) => (Some(Failure::handler_broken(&run.handler, &e.to_string())), None, None, None, None),
        Ok(plugin) => {
            let input = RunInput {
                task_id: run.task_id,
                run_id: run.run_id,
                attempt: run.attempt,
                handler: run.handler.clone(),
                data: run.data.clone(),
                queued_by: run.queued_by.clone(),
            };
            let r = shared
                .catalog
                .sandbox()
                .run(&plugin.pre, plugin.limits, &plugin.grants, input, Some(shared.progress_tx.clone()))
                .await;
            let (failure, results) = match r.outcome {
                GuestOutcome::Success(results) => (None, results),
                GuestOutcome::Failed(f) => (Some(f), None),
            };
            (failure, Some(plugin.digest.clone()), Some(r.fuel_used as i64), Some(r.report), results)
        }
    };
    let now = shared.clock.now();
    let report = report.unwrap_or_default();
    let logs = if report.logs.is_empty() && report.logs_dropped == 0 {
        None
    } else if report.logs_dropped > 0 {
        Some(format!("{}[{} more log lines dropped: over the log limit]\n", report.logs, report.logs_dropped))
    } else {
        Some(report.logs)
    };
    let (status, next, error_code, error_message, results) = match failure {
        None => (RunStatus::Success, NextStep::Done, None, None, results),
        Some(f) => {
            let status = if f.code == crate::sandbox::codes::DEADLINE { RunStatus::Timeout } else { RunStatus::Error };
            let backoff = shared.backoff.for_task(&run.backoff);
            let next = match retry::decide(
                run.task_runs_failed + 1,
                run.max_retries,
                f.retryable,
                &backoff,
                now,
                retry::jitter_unit(),
            ) {
                NextStep::Done => NextStep::GiveUp,
                other => other,
            };
            (status, next, Some(f.code), Some(f.message), report.partial_results)
        }
    };
    RunOutcome {
        run_id: run.run_id,
        task_id: run.task_id,
        status,
        results,
        error_code,
        error_message,
        percents_completed: report.percent,
        finished_on: now,
        duration_ms: started.elapsed().as_millis() as i64,
        component_digest: digest,
        fuel_used: fuel,
        logs,
        next,
    }
}

async fn finish_loop(
    store: SharedStore,
    mut rx: mpsc::UnboundedReceiver<(RunOutcome, tokio::sync::OwnedSemaphorePermit)>,
    batch: usize,
    linger: Duration,
    finished: Arc<AtomicU64>,
) {
    let batch = batch.max(1);
    let mut buf = Vec::with_capacity(batch);
    while rx.recv_many(&mut buf, batch).await > 0 {
        // Let more outcomes arrive: one transaction for many runs.
        let until = tokio::time::Instant::now() + linger;
        while buf.len() < batch {
            let room = batch - buf.len();
            match tokio::time::timeout_at(until, rx.recv_many(&mut buf, room)).await {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
        let outcomes: Vec<RunOutcome> = buf.iter().map(|(o, _)| o.clone()).collect();
        let mut wait = Duration::from_millis(50);
        // Outcomes are never dropped: a database that is away is waited for.
        loop {
            match store.finish_runs(&outcomes).await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(runs = outcomes.len(), "writing outcomes failed, retrying in {wait:?}: {e}");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
        finished.fetch_add(outcomes.len() as u64, Ordering::Relaxed);
        buf.clear(); // releases the permits
    }
}

async fn progress_loop(store: SharedStore, mut rx: mpsc::Receiver<ProgressUpdate>) {
    let mut buf = Vec::with_capacity(256);
    while rx.recv_many(&mut buf, 256).await > 0 {
        if let Err(e) = store.record_progress(&buf).await {
            // Progress is advisory: the outcome carries the final figures.
            tracing::warn!("recording progress failed: {e}");
        }
        buf.clear();
    }
}

async fn heartbeat_loop(
    store: SharedStore,
    clock: SharedClock,
    runner: RunnerId,
    interval: Duration,
    rss_cap: u64,
    exit_tx: mpsc::UnboundedSender<ExitReason>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(interval);
    let pid = sysinfo::Pid::from_u32(std::process::id());
    let mut sys = sysinfo::System::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        match store.heartbeat(runner, clock.now()).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::error!(runner, "this runner was timed out by the overseer; stopping");
                let _ = exit_tx.send(ExitReason::RunnerLost);
            }
            Err(e) => tracing::warn!(runner, "heartbeat failed: {e}"),
        }
        if let Some(rss) = process_rss(&mut sys, pid) {
            if rss > rss_cap {
                tracing::warn!(rss, rss_cap, "resident memory passed the cap: finishing and exiting");
                let _ = exit_tx.send(ExitReason::MemoryCap);
            }
        }
    }
}

/// This process's resident set size in bytes.
pub fn process_rss(sys: &mut sysinfo::System, pid: sysinfo::Pid) -> Option<u64> {
    sys.refresh_processes_specifics(
        sysinfo::ProcessesToUpdate::Some(&[pid]),
        true,
        sysinfo::ProcessRefreshKind::nothing().with_memory(),
    );
    sys.process(pid).map(|p| p.memory())
}
