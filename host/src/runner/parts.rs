//! A worker's background parts — heartbeat, fence, run watch, memory watch, overseer, plugin watcher,
//! progress and outcome writers — started together ([`start`]) and stopped together
//! ([`Parts::stop`]) within the grace period.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinHandle;

use super::claims::Claims;
use super::execute::Shared;
use super::fence::Fence;
use super::heartbeat::{self, Heartbeat};
use super::put_back::PutBacks;
use super::release::Releases;
use super::run_watch::RunWatch;
use super::stop::StopPlan;
use super::writer::{OutcomeWriter, WriterHealth};
use super::{progress, ExitReason, RunTasks, Worker};
use crate::model::RunnerId;
use crate::overseer::Overseer;

/// The parts running beside the claim loop, and how to stop them.
pub(super) struct Parts {
    /// Turns true when the parts must stop.
    stop: watch::Sender<bool>,
    /// Turns true when the grace period is over: runs still going are dropped, the writer gives up.
    abort: watch::Sender<bool>,
    pub health: Arc<WriterHealth>,
    handles: Vec<(&'static str, JoinHandle<()>)>,
}

/// What the claim loop and the runs get from the parts.
pub(super) struct Started {
    pub parts: Parts,
    pub shared: Arc<Shared>,
    pub runs: RunTasks,
    /// Reasons to exit the parts find (a lost runner, the memory cap).
    pub exits: mpsc::UnboundedReceiver<ExitReason>,
    pub wakeups: Option<mpsc::Receiver<()>>,
}

/// Start every part for the runner `runner`.
pub(super) async fn start(w: &Worker, runner: RunnerId) -> Started {
    let cfg = &w.config;
    let (stop, stop_rx) = watch::channel(false);
    let (abort, abort_rx) = watch::channel(false);
    let (exit_tx, exits) = mpsc::unbounded_channel::<ExitReason>();
    let health = Arc::new(WriterHealth::default());
    let claims = Arc::new(Claims::default());
    let fence = Arc::new(Fence::new(cfg.heartbeat_interval, cfg.heartbeat_horizon));
    // Every end of a claimed run goes to the outcome writer (see release.rs).
    let (releases, releases_rx) = Releases::channel();
    let mut handles = vec![("fence", tokio::spawn(fence.clone().watch(claims.clone(), stop_rx.clone())))];
    let beat = Heartbeat {
        store: w.store.clone(),
        catalog: w.catalog.clone(),
        clock: w.clock.clone(),
        runner,
        interval: cfg.heartbeat_interval,
        writer_stuck_limit: cfg.writer_stuck_limit,
        health: health.clone(),
        exit_tx: exit_tx.clone(),
        fence: fence.clone(),
        claims: claims.clone(),
        releases: releases.clone(),
    };
    handles.push(("heartbeat", tokio::spawn(beat.run(stop_rx.clone()))));
    let (wakeups, cancels) = wakeups(w).await;
    let watch_runs = RunWatch {
        store: w.store.clone(),
        clock: w.clock.clone(),
        runner,
        claims: claims.clone(),
        fence: fence.clone(),
        interval: cfg.run_check_interval,
        cancels,
        releases: releases.clone(),
    };
    handles.push(("run watch", tokio::spawn(watch_runs.run(stop_rx.clone()))));
    let (_, rss_cap) = w.memory();
    let memory = heartbeat::memory_watch(rss_cap, cfg.rss_check_interval, exit_tx, stop_rx.clone());
    handles.push(("memory watch", tokio::spawn(memory)));
    handles.extend(beside(w, &stop_rx));
    // At most 1,024 reports of at most 64 KiB partial results each are queued.
    let (progress_tx, progress_rx) = mpsc::channel(1024);
    handles.push(("progress writer", tokio::spawn(progress::progress_loop(w.store.clone(), progress_rx))));
    let written = Arc::new(tokio::sync::Notify::new());
    let writer = OutcomeWriter {
        store: w.store.clone(),
        batch: cfg.finish_batch,
        batch_bytes: cfg.finish_batch_bytes,
        linger: cfg.batch_linger,
        write_timeout: cfg.write_timeout,
        health: health.clone(),
        give_up: abort_rx.clone(),
        written: written.clone(),
    };
    // The writer first: stopping, its last batch is the one that matters most.
    handles.insert(0, ("outcome writer", tokio::spawn(writer.run(releases_rx))));
    let unwritten_limit = super::run_tasks::unwritten_limit(cfg.concurrency, cfg.claim_batch);
    let runs = RunTasks {
        claims,
        fence,
        releases,
        abort: abort_rx,
        ended_elsewhere: Arc::default(),
        slots: Arc::new(Semaphore::new(cfg.concurrency.max(1))),
        unwritten: Arc::new(Semaphore::new(unwritten_limit)),
        outcome_bytes: Arc::new(Semaphore::new(super::run_tasks::OUTCOME_BYTES / 1024)),
        pace: Arc::default(),
        written,
        ahead: Arc::default(),
    };
    Started { parts: Parts { stop, abort, health, handles }, shared: shared(w, progress_tx), runs, exits, wakeups }
}

/// The parts that need nothing of the others: the overseer, if this worker runs one, the reader of
/// deployed handlers, and the plugins directory's watcher, if asked for.
fn beside(w: &Worker, stop_rx: &watch::Receiver<bool>) -> Vec<(&'static str, JoinHandle<()>)> {
    let mut handles = Vec::new();
    if let Some(oc) = w.config.overseer.clone() {
        let o = Overseer::new(w.store.clone(), w.clock.clone(), oc);
        let rx = stop_rx.clone();
        handles.push(("overseer", tokio::spawn(async move { o.run_until(rx).await })));
    }
    let deploys = super::deploys::Deploys {
        store: w.store.clone(),
        catalog: w.catalog.clone(),
        interval: super::deploys::RELEASE_POLL,
    };
    handles.push(("deploys", tokio::spawn(deploys.run(stop_rx.clone()))));
    if let Some(every) = w.config.watch_plugins {
        handles.push(("plugin watcher", tokio::spawn(w.catalog.clone().watch(every, stop_rx.clone()))));
    }
    handles
}

/// The database's wake-ups (tasks added, tasks cancelled), if it gives any; polling only when it
/// does not, or cannot.
async fn wakeups(w: &Worker) -> (Option<mpsc::Receiver<()>>, Option<mpsc::Receiver<()>>) {
    match w.store.wakeups().await {
        Ok(Some(w)) => (Some(w.tasks), Some(w.cancels)),
        Ok(None) => (None, None),
        Err(e) => {
            tracing::warn!("no wake-ups from the database, polling only: {e}");
            (None, None)
        }
    }
}

/// What every run shares: the catalog, the memory budget, the progress channel, the put-backs.
fn shared(w: &Worker, progress_tx: mpsc::Sender<crate::model::ProgressUpdate>) -> Arc<Shared> {
    let (budget, _) = w.memory();
    let budget_mib = u32::try_from(budget.div_ceil(1 << 20)).unwrap_or(u32::MAX >> 4).min(u32::MAX >> 4);
    Arc::new(Shared {
        catalog: w.catalog.clone(),
        clock: w.clock.clone(),
        backoff: w.config.backoff,
        progress_tx,
        memory: Arc::new(Semaphore::new(budget_mib.max(1) as usize)),
        memory_budget_mib: budget_mib,
        put_backs: PutBacks::new(w.config.put_back_limit, w.clock.clone()),
        store: Some(w.store.clone()),
    })
}

/// What stopping found.
pub(super) struct Stopped {
    /// Runs still claimed when the grace period ended: still going, their outcome not written,
    /// not yet put back.
    pub claimed_left: u64,
    /// Runs stopped because the database said they had ended elsewhere (cancelled, timed out).
    pub ended_elsewhere: u64,
}

impl Parts {
    /// Let every run claimed be released by `plan.runs_until` (the runs in flight finish and
    /// their outcomes are written, the runs going back are put back), then stop every part by
    /// `plan.parts_until`, cancelling the rest (a part may be waiting on a database that is down:
    /// none may hold the process past the grace).
    pub async fn stop(self, runs: RunTasks, shared: Arc<Shared>, plan: StopPlan) -> Stopped {
        let within = plan.runs_until.saturating_duration_since(tokio::time::Instant::now());
        let claimed_left = runs.claims.settle(within).await as u64;
        let _ = self.abort.send(true);
        let ended_elsewhere = runs.ended_elsewhere.load(Ordering::Relaxed);
        drop(runs);
        drop(shared);
        let _ = self.stop.send(true);
        let aborts: Vec<_> = self.handles.iter().map(|(name, t)| (*name, t.abort_handle())).collect();
        let all = futures::future::join_all(self.handles.into_iter().map(|(_, t)| t));
        if tokio::time::timeout_at(plan.parts_until, all).await.is_err() {
            for (name, abort) in aborts.iter().filter(|(_, a)| !a.is_finished()) {
                tracing::warn!("the {name} did not stop in time: cancelled");
                abort.abort();
            }
        }
        Stopped { claimed_left, ended_elsewhere }
    }
}
