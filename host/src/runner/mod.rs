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
//! [`Worker::run`] completes, the worker stops claiming and lets in-flight runs finish and their
//! outcomes be written within `shutdown_grace`; whatever is not done by then is left `running`
//! for the overseer to time out (its task runs again), and the worker exits. The grace is an
//! upper bound even while the database is down: every call made after it is bounded in time.
//!
//! The parts: [`execute`] runs one claimed run, [`writer`] writes outcomes, [`progress`] progress reports,
//! [`heartbeat`] keeps the runner alive and watches memory, [`claim`] claims due runs; this file
//! starts and stops them.

mod claim;
mod config;
mod execute;
mod heartbeat;
mod progress;
mod writer;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Semaphore};

pub use config::{ExitReason, WorkerConfig, WorkerReport};
use execute::{Executed, Shared};
pub use heartbeat::process_rss;
use heartbeat::{Heartbeat, InFlight, RunWatch};
use writer::{OutcomeWriter, WriterHealth};

use crate::clock::SharedClock;
use crate::error::Result;
use crate::model::*;
use crate::overseer::Overseer;
use crate::plugins::Catalog;
use crate::store::SharedStore;

pub struct Worker {
    store: SharedStore,
    catalog: Arc<Catalog>,
    clock: SharedClock,
    config: WorkerConfig,
    /// How loading the plugins directory at start goes.
    loading: Option<watch::Receiver<Loading>>,
}

/// How far the first load of the plugins directory has gone.
#[derive(Debug, Clone, Copy, Default)]
struct Loading {
    usable: usize,
    done: bool,
}

/// Load the plugins directory on a blocking thread, reporting as each plugin is ready.
fn load_plugins(catalog: Arc<Catalog>) -> watch::Receiver<Loading> {
    let (tx, rx) = watch::channel(Loading::default());
    tokio::task::spawn_blocking(move || {
        catalog.reload_with(&|r| match &r.status {
            Ok(()) => {
                tracing::info!(plugin = %r.name, cached = r.cached, "plugin ready");
                tx.send_modify(|l| l.usable += 1);
            }
            Err(e) => tracing::warn!(plugin = %r.name, "plugin unusable: {e}"),
        });
        tx.send_modify(|l| l.done = true);
    });
    rx
}

/// Longest the last calls of a stopping worker (marking its runner) may take: past the grace
/// period nothing may hold the process up.
const LAST_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Spawns run tasks and knows which are in flight.
struct RunTasks {
    in_flight: Arc<InFlight>,
    done_tx: mpsc::UnboundedSender<(RunOutcome, tokio::sync::OwnedSemaphorePermit)>,
    /// Turns true when the grace period is over: runs still going are dropped.
    abort: watch::Receiver<bool>,
    ended_elsewhere: Arc<std::sync::atomic::AtomicU64>,
    /// A claim was cut short by a signal: it may have claimed runs no task executes.
    claim_cut: std::sync::atomic::AtomicBool,
    /// Milliseconds of the grace period spent on a claim under way when the signal came.
    grace_spent_ms: std::sync::atomic::AtomicU64,
    /// One permit a run at once; a run holds its permit until its outcome is written.
    slots: Arc<Semaphore>,
}

impl RunTasks {
    /// Run one claimed run in its own task. The run stops at once (its store dropped) when the
    /// grace period ends or the database says it was cancelled or ended elsewhere (then what the
    /// guest logged and the fuel it used are kept on its row); its slot is released once its
    /// outcome is written.
    fn spawn(&self, shared: &Arc<Shared>, run: ClaimedRun, permit: tokio::sync::OwnedSemaphorePermit) {
        let shared = shared.clone();
        let mut abort = self.abort.clone();
        let in_flight = self.in_flight.clone();
        let done_tx = self.done_tx.clone();
        let ended_elsewhere = self.ended_elsewhere.clone();
        let run_id = run.run_id;
        let handler = run.handler.clone();
        let stop = in_flight.enter(run_id);
        tokio::spawn(async move {
            tokio::select! {
                executed = execute::execute_guarded(&shared, run, stop) => {
                    in_flight.leave(run_id);
                    match executed {
                        Executed::Ended(outcome) => {
                            log_outcome(&handler, &outcome);
                            let _ = done_tx.send((outcome, permit));
                        }
                        Executed::PutBack { at, reason, fallback } => {
                            if !put_back(&shared, run_id, at, &reason).await {
                                let _ = done_tx.send((fallback, permit));
                            }
                        }
                        Executed::Stopped(kept) => {
                            ended_elsewhere.fetch_add(1, Ordering::Relaxed);
                            if let Some(kept) = kept {
                                keep_stopped(&shared, &kept).await;
                            }
                        }
                    }
                }
                _ = async { let _ = abort.wait_for(|a| *a).await; } => in_flight.leave(run_id),
            }
        });
    }
}

/// One line a run at `info`, for the operator following a worker's log.
fn log_outcome(handler: &str, o: &RunOutcome) {
    let (task, run, ms, fuel) = (o.task_id, o.run_id, o.duration_ms, o.fuel_used.unwrap_or(0));
    match &o.end {
        RunEnd::Success { .. } => {
            tracing::info!(task, run, handler, outcome = "success", duration_ms = ms, fuel, "run ended")
        }
        RunEnd::Failure { failure, next, .. } => {
            let next = match next {
                NextStep::RetryAt(at) => format!("retry at {}", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                NextStep::GiveUp => "give up".to_string(),
            };
            let (outcome, code) = (o.status().as_str(), failure.code.as_str());
            tracing::info!(task, run, handler, outcome, code, next, duration_ms = ms, fuel, "run ended")
        }
    }
}

/// Keep what a run stopped from outside left on its row; a failure here loses only those lines.
async fn keep_stopped(shared: &Shared, kept: &StoppedRun) {
    match tokio::time::timeout(LAST_CALL_TIMEOUT, shared.store.keep_stopped(kept)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(run_id = kept.run_id, "could not keep a stopped run's logs: {e}"),
        Err(_) => {
            tracing::warn!(run_id = kept.run_id, "could not keep a stopped run's logs: the database did not answer")
        }
    }
}

/// Put a run that could not start back in the queue; false when that failed (its `host-busy`
/// failure is written instead).
async fn put_back(shared: &Shared, run: RunId, at: chrono::DateTime<chrono::Utc>, reason: &str) -> bool {
    match tokio::time::timeout(LAST_CALL_TIMEOUT, shared.store.put_back(run, at)).await {
        Ok(Ok(true)) => {
            tracing::info!(run_id = run, %at, "run put back, it could not start: {reason}");
            true
        }
        // Ended elsewhere meanwhile: nothing to write either.
        Ok(Ok(false)) => true,
        Ok(Err(e)) => {
            tracing::warn!(run_id = run, "could not put back a run that could not start: {e}");
            false
        }
        Err(_) => false,
    }
}

impl Worker {
    pub fn new(store: SharedStore, catalog: Arc<Catalog>, clock: SharedClock, config: WorkerConfig) -> Self {
        Worker { store, catalog, clock, config, loading: None }
    }

    /// Work until `shutdown` completes (or, with `drain`, until nothing is left).
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<WorkerReport> {
        tokio::pin!(shutdown);
        // One pool slot per run at once: a run never waits for (or fails on) another's slot.
        let capacity = self.catalog.sandbox().capacity() as usize;
        if self.config.concurrency > capacity {
            tracing::warn!(
                concurrency = self.config.concurrency,
                capacity,
                "concurrency lowered to the sandbox's pool of instances"
            );
            self.config.concurrency = capacity;
        }
        let cfg = self.config.clone();
        let concurrency = cfg.concurrency.max(1);
        let default_memory = self.catalog.policy().limits.memory_bytes;
        let memory_budget = cfg.memory_budget(default_memory);
        let rss_cap = cfg.rss_cap(memory_budget);
        let host = crate::overseer::liveness::local_identity();
        let pid = std::process::id();
        // Load the plugins directory in the background: the worker claims tasks of the handlers
        // it has ready while others still compile.
        let mut loading = load_plugins(self.catalog.clone());
        let usable = tokio::select! {
            l = loading.wait_for(|l| l.usable > 0 || l.done) => l.map_or(0, |l| l.usable),
            // Stopped before anything could run: nothing was claimed, nothing to hand back.
            _ = &mut shutdown => return Ok(WorkerReport::nothing_run(ExitReason::Shutdown)),
        };
        if usable == 0 && cfg.require_plugins {
            return Err(crate::Error::NoPlugins { dir: self.catalog.dir().to_path_buf() });
        }
        let runner_id = self.store.register_runner(pid, &host, self.clock.now(), cfg.runner_limit).await?;
        if let Err(e) = self.store.set_runner_handlers(runner_id, &self.catalog.served()).await {
            tracing::warn!(runner_id, "could not record the handlers this runner serves: {e}");
        }
        tracing::info!(runner_id, pid, host = %host, concurrency, memory_budget, rss_cap, "worker started");

        let (stop_tx, stop_rx) = watch::channel(false);
        let (abort_tx, abort_rx) = watch::channel(false);
        let (exit_tx, mut exit_rx) = mpsc::unbounded_channel::<ExitReason>();
        let health = Arc::new(WriterHealth::default());
        let in_flight = Arc::new(InFlight::default());

        let heartbeat = tokio::spawn(
            Heartbeat {
                store: self.store.clone(),
                catalog: self.catalog.clone(),
                clock: self.clock.clone(),
                runner: runner_id,
                interval: cfg.heartbeat_interval,
                writer_stuck_limit: cfg.writer_stuck_limit,
                health: health.clone(),
                exit_tx: exit_tx.clone(),
            }
            .run(stop_rx.clone()),
        );
        let (task_wakeups, cancels) = match self.store.wakeups().await {
            Ok(Some(w)) => (Some(w.tasks), Some(w.cancels)),
            Ok(None) => (None, None),
            Err(e) => {
                tracing::warn!("no wake-ups from the database, polling only: {e}");
                (None, None)
            }
        };
        let run_watch = tokio::spawn(
            RunWatch {
                store: self.store.clone(),
                runner: runner_id,
                in_flight: in_flight.clone(),
                interval: cfg.run_check_interval,
                cancels,
            }
            .run(stop_rx.clone()),
        );
        let memory_watch =
            tokio::spawn(heartbeat::memory_watch(rss_cap, cfg.rss_check_interval, exit_tx.clone(), stop_rx.clone()));
        let overseer = cfg.overseer.clone().map(|oc| {
            let o = Overseer::new(self.store.clone(), self.clock.clone(), oc);
            let rx = stop_rx.clone();
            tokio::spawn(async move { o.run_until(rx).await })
        });
        let watcher = cfg.watch_plugins.map(|every| tokio::spawn(self.catalog.clone().watch(every, stop_rx.clone())));

        // At most 1,024 reports of at most 64 KiB partial results each are queued.
        let (progress_tx, progress_rx) = mpsc::channel(1024);
        let progress = tokio::spawn(progress::progress_loop(self.store.clone(), progress_rx));
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let outcome_writer = tokio::spawn(
            OutcomeWriter {
                store: self.store.clone(),
                batch: cfg.finish_batch,
                batch_bytes: cfg.finish_batch_bytes,
                linger: cfg.batch_linger,
                write_timeout: cfg.write_timeout,
                health: health.clone(),
                give_up: abort_rx.clone(),
            }
            .run(done_rx),
        );

        let budget_mib = u32::try_from(memory_budget.div_ceil(1 << 20)).unwrap_or(u32::MAX >> 4).min(u32::MAX >> 4);
        let shared = Arc::new(Shared {
            catalog: self.catalog.clone(),
            clock: self.clock.clone(),
            backoff: cfg.backoff,
            progress_tx,
            memory: Arc::new(Semaphore::new(budget_mib.max(1) as usize)),
            memory_budget_mib: budget_mib,
            store: self.store.clone(),
            put_back_limit: cfg.put_back_limit,
            put_backs: Default::default(),
        });
        self.loading = Some(loading);
        let runs = RunTasks {
            in_flight,
            done_tx,
            abort: abort_rx,
            ended_elsewhere: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            claim_cut: std::sync::atomic::AtomicBool::new(false),
            grace_spent_ms: std::sync::atomic::AtomicU64::new(0),
            slots: Arc::new(Semaphore::new(concurrency)),
        };
        let slots = runs.slots.clone();
        let exit = self.claim_loop(&shared, &runs, runner_id, &mut shutdown, &mut exit_rx, task_wakeups).await;
        tracing::info!(runner_id, ?exit, "worker stopping");

        // In-flight runs finish, and their outcomes are written, within the grace period; a
        // runner declared dead stops its runs at once (they run again elsewhere).
        let spent = Duration::from_millis(runs.grace_spent_ms.load(Ordering::Relaxed));
        let grace =
            if exit == ExitReason::RunnerLost { Duration::ZERO } else { cfg.shutdown_grace.saturating_sub(spent) };
        let total = concurrency as u32;
        let drained = tokio::time::timeout(grace, slots.acquire_many(total)).await.is_ok();
        // Runs still going, or whose outcome is not written yet (a slot is held until then).
        let in_flight_left =
            if drained { 0 } else { u64::from(total).saturating_sub(slots.available_permits() as u64) };
        let _ = abort_tx.send(true);
        let ended_elsewhere = runs.ended_elsewhere.load(Ordering::Relaxed);
        let claim_cut = runs.claim_cut.load(Ordering::Relaxed);
        drop(runs);
        drop(shared);
        let _ = stop_tx.send(true);
        // Each part ends promptly now; together they get LAST_CALL_TIMEOUT, then the rest are
        // cancelled: none may hold the process past the grace (a part may be waiting on a
        // database that is down).
        let parts: Vec<(&str, tokio::task::JoinHandle<()>)> = [
            ("outcome writer", outcome_writer),
            ("progress writer", progress),
            ("heartbeat", heartbeat),
            ("run watch", run_watch),
            ("memory watch", memory_watch),
        ]
        .into_iter()
        .chain(overseer.map(|o| ("overseer", o)))
        .chain(watcher.map(|w| ("plugin watcher", w)))
        .collect();
        let aborts: Vec<_> = parts.iter().map(|(name, t)| (*name, t.abort_handle())).collect();
        let all = futures::future::join_all(parts.into_iter().map(|(_, t)| t));
        if tokio::time::timeout(LAST_CALL_TIMEOUT, all).await.is_err() {
            for (name, abort) in aborts.iter().filter(|(_, a)| !a.is_finished()) {
                tracing::warn!("the {name} did not stop in time: cancelled");
                abort.abort();
            }
        }
        let abandoned = in_flight_left.max(health.abandoned.load(Ordering::Relaxed));
        let now = self.clock.now();
        let last = async {
            if abandoned > 0 || claim_cut {
                tracing::warn!(runner_id, abandoned, "runs not finished within the grace period: timing them out");
                self.store.time_out_runners(&[runner_id], now).await.map(|_| ())
            } else if exit != ExitReason::RunnerLost {
                self.store.finish_runner(runner_id, RunnerStatus::Success, now).await
            } else {
                Ok(())
            }
        };
        match tokio::time::timeout(LAST_CALL_TIMEOUT, last).await {
            Ok(Ok(())) => {}
            // The overseer of another worker finds this runner dead by its heartbeat instead.
            Ok(Err(e)) => tracing::warn!(runner_id, "could not mark the runner stopped: {e}"),
            Err(_) => tracing::warn!(runner_id, "could not mark the runner stopped: the database did not answer"),
        }
        let report = WorkerReport {
            runner_id,
            exit,
            runs_finished: health.finished.load(Ordering::Relaxed),
            runs_succeeded: health.succeeded.load(Ordering::Relaxed),
            runs_abandoned: abandoned,
            runs_ended_elsewhere: ended_elsewhere,
            outcomes_rejected: health.rejected.load(Ordering::Relaxed),
        };
        let (runs, succeeded) = (report.runs_finished, report.runs_succeeded);
        tracing::info!(runner_id, runs, succeeded, failed = runs - succeeded.min(runs), "worker stopped");
        Ok(report)
    }
}
