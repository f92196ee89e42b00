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
//! [`Worker::run`] reads as the worker works: fit the concurrency to the sandbox, load the
//! plugins and register the runner, start the background parts (`parts`), claim one turn
//! after another (`claim`: `claim_once` → claimed, idle or exit), then stop the parts within
//! the grace period and mark the runner. The rest: `claims` holds each claimed run from its
//! claim's answer until its release is applied, `execute` runs one claimed run, `writer`
//! applies every end of a claimed run (`release`: ended, put back, stopped), `progress` writes
//! progress reports, `heartbeat` keeps the runner alive and watches memory, `put_back` holds the
//! put-back policy.

mod claim;
mod claims;
mod config;
mod deploys;
mod execute;
mod fence;
mod heartbeat;
mod limits;
mod parts;
mod progress;
mod put_back;
mod queues;
mod release;
mod run_tasks;
mod run_watch;
mod stop;
mod writer;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::watch;

use claim::{Claimer, Step};
use claims::Held;
pub use config::{ExitReason, WorkerConfig, WorkerReport};
pub use heartbeat::process_rss;
use run_tasks::RunTasks;

use parts::{Started, Stopped};

use crate::clock::SharedClock;
use crate::error::Result;
use crate::model::*;
use crate::plugins::Catalog;
use crate::store::SharedStore;

/// A worker: see the module's documentation.
pub struct Worker {
    store: SharedStore,
    catalog: Arc<Catalog>,
    clock: SharedClock,
    config: WorkerConfig,
    /// How loading the plugins directory at start goes.
    loading: Option<watch::Receiver<Loading>>,
    /// Turns the claim loop found nothing to claim and waited for work.
    idle: watch::Sender<u64>,
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

impl Worker {
    /// A worker over `store`, running the plugins of `catalog`.
    pub fn new(store: SharedStore, catalog: Arc<Catalog>, clock: SharedClock, config: WorkerConfig) -> Self {
        Worker { store, catalog, clock, config, loading: None, idle: watch::Sender::new(0) }
    }

    /// How many times the worker found nothing to claim and waited for work (a wake-up from
    /// the database or its poll): what a test waits on to know the worker is idle.
    pub fn idle_turns(&self) -> watch::Receiver<u64> {
        self.idle.subscribe()
    }

    /// Work until `shutdown` completes (or, with `drain`, until nothing is left).
    pub fn run<'a>(self, shutdown: impl Future<Output = ()> + Send + 'a) -> BoxFuture<'a, Result<WorkerReport>> {
        self.run_boxed(Box::pin(shutdown))
    }

    // Not generic and boxed: a crate awaiting `run` would otherwise compile the whole worker
    // again (as for `store::open`).
    #[inline(never)]
    fn run_boxed<'a>(self, shutdown: BoxFuture<'a, ()>) -> BoxFuture<'a, Result<WorkerReport>> {
        Box::pin(self.work(shutdown))
    }

    async fn work(mut self, shutdown: BoxFuture<'_, ()>) -> Result<WorkerReport> {
        // The grace is counted from the signal, however long the claim loop takes to see it.
        let signalled = std::sync::OnceLock::new();
        let shutdown = async {
            shutdown.await;
            let _ = signalled.set(tokio::time::Instant::now());
        };
        let shutdown = std::pin::pin!(shutdown);
        let mut shutdown: Pin<&mut (dyn Future<Output = ()> + Send)> = shutdown;
        self.fit_concurrency();
        let Some(runner) = self.register(&mut shutdown).await? else {
            // Stopped before anything could run: nothing was claimed, nothing to hand back.
            return Ok(WorkerReport::nothing_run(ExitReason::Shutdown));
        };
        let Started { parts, shared, runs, mut exits, wakeups } = parts::start(&self, runner).await;
        let mut claimer = Claimer {
            worker: &self,
            shared: &shared,
            runs: &runs,
            runner,
            shutdown,
            exits: &mut exits,
            wakeups,
            local_adds: self.store.added_here(),
            loading: self.loading.clone(),
            versions_loaded: Some(self.catalog.versions_loaded()),
            newest: 0,
            queues: queues::QueueChoice::new(&self.config.queues),
            failures: 0,
            capped: false,
            limits: limits::LimitsView::default(),
            next_start_on: None,
        };
        let (exit, cut) = loop {
            match claimer.claim_once().await {
                Step::Claimed => {}
                Step::Idle => {
                    self.idle.send_modify(|n| *n += 1);
                    if let Some(reason) = claimer.wait_for_work().await {
                        break (reason, None);
                    }
                }
                Step::Exit(reason, cut) => break (reason, cut),
            }
        };
        tracing::info!(runner_id = runner, ?exit, "worker stopping");
        // In-flight runs finish, and their outcomes are written, within the grace period; a
        // runner declared dead stops its runs at once (they run again elsewhere).
        let from = signalled.get().copied().or(cut.map(|c| c.asked)).unwrap_or_else(tokio::time::Instant::now);
        let plan = stop::StopPlan::new(exit, self.config.shutdown_grace, from);
        let health = parts.health.clone();
        let stopped = parts.stop(runs, shared, plan).await;
        // Runs left running: runs still claimed, and those the writer gave up on.
        let abandoned = stopped.claimed_left.max(health.abandoned.load(Ordering::Relaxed));
        self.mark_stopped(runner, exit, abandoned, cut, plan.gone_by).await;
        Ok(self.report(runner, exit, abandoned, &stopped, &health))
    }

    /// One pool slot per run at once: a run never waits for (or fails on) another's slot.
    fn fit_concurrency(&mut self) {
        let capacity = self.catalog.sandbox().capacity() as usize;
        if self.config.concurrency > capacity {
            let concurrency = self.config.concurrency;
            tracing::warn!(concurrency, capacity, "concurrency lowered to the sandbox's pool of instances");
            self.config.concurrency = capacity;
        }
        self.config.concurrency = self.config.concurrency.max(1);
    }

    /// Guest memory the runs may hold together, and the resident memory past which the worker
    /// exits.
    fn memory(&self) -> (u64, u64) {
        let budget = self.config.memory_budget(self.catalog.policy().limits.memory_bytes);
        (budget, self.config.rss_cap(budget))
    }

    /// Load the plugins directory in the background (the worker claims tasks of the handlers it
    /// has ready while others still compile) and register the runner once one is usable; None
    /// when `shutdown` came first.
    async fn register(
        &mut self,
        shutdown: &mut Pin<&mut (dyn Future<Output = ()> + Send)>,
    ) -> Result<Option<RunnerId>> {
        let mut loading = load_plugins(self.catalog.clone());
        let usable = tokio::select! {
            l = loading.wait_for(|l| l.usable > 0 || l.done) => l.map_or(0, |l| l.usable),
            _ = &mut *shutdown => return Ok(None),
        };
        self.loading = Some(loading);
        // Handlers deployed to the database are loaded by the `deploys` part, once registered.
        if usable == 0 && self.config.require_plugins {
            let mark = tokio::select! {
                mark = self.store.release_mark() => mark?,
                _ = &mut *shutdown => return Ok(None),
            };
            if mark > 0 {
                tracing::info!(
                    "no usable plugin in the plugins directory: running the handlers deployed to the database"
                );
            } else {
                return Err(crate::error::Error::NoPlugins { dir: self.catalog.dir().to_path_buf() });
            }
        }
        // The operator's limits, for every worker (one an operator set live is kept); before the
        // runner is registered, so a stop meanwhile leaves nothing behind.
        let limits = self.store.set_file_limits(&self.catalog.policy().run_limits, self.clock.now());
        let kept = tokio::select! {
            kept = limits => kept?,
            _ = &mut *shutdown => return Ok(None),
        };
        for name in kept {
            tracing::warn!(
                "the limit {name} was set live (taskhost limits set): the configuration file's is not applied \
                 (taskhost limits clear {name}, then start a worker, to go back to the file's)"
            );
        }
        let host = crate::overseer::liveness::local_identity();
        let (pid, now) = (std::process::id(), self.clock.now());
        let runner_id = self.store.register_runner(pid, &host, now, self.config.runner_limit).await?;
        if let Err(e) = self.store.set_runner_queues(runner_id, &self.config.queues).await {
            tracing::warn!(runner_id, "could not record the queues this runner claims from: {e}");
        }
        if let Err(e) = self.store.set_runner_handlers(runner_id, &self.catalog.served()).await {
            tracing::warn!(runner_id, "could not record the handlers this runner serves: {e}");
        }

        let (memory_budget, rss_cap) = self.memory();
        let concurrency = self.config.concurrency;
        tracing::info!(runner_id, pid, host = %host, concurrency, memory_budget, rss_cap, "worker started");
        Ok(Some(runner_id))
    }

    fn report(
        &self,
        runner_id: RunnerId,
        exit: ExitReason,
        abandoned: u64,
        stopped: &Stopped,
        health: &writer::WriterHealth,
    ) -> WorkerReport {
        let report = WorkerReport {
            runner_id,
            exit,
            runs_finished: health.finished.load(Ordering::Relaxed),
            runs_succeeded: health.succeeded.load(Ordering::Relaxed),
            runs_snoozed: health.snoozed.load(Ordering::Relaxed),
            runs_abandoned: abandoned,
            runs_ended_elsewhere: stopped.ended_elsewhere,
            outcomes_rejected: health.rejected.load(Ordering::Relaxed),
        };
        let (runs, succeeded, snoozed) = (report.runs_finished, report.runs_succeeded, report.runs_snoozed);
        let failed = runs.saturating_sub(succeeded + snoozed);
        tracing::info!(runner_id, runs, succeeded, snoozed, failed, "worker stopped");
        report
    }
}
