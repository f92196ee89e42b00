//! A worker's heartbeat and memory watch.
//!
//! Every interval the heartbeat tells the database the runner is alive. While outcomes cannot be
//! written for longer than the writer's limit the heartbeat stops, so that another worker's
//! overseer times this runner out and its tasks run again elsewhere. The memory watch checks
//! resident memory against the cap every second.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::claims::Claims;
use super::fence::Fence;
use super::release::{PutBackWhy, Releases};
use super::writer::{unix_ms, WriterHealth};
use super::ExitReason;
use crate::clock::SharedClock;
use crate::model::RunnerId;
use crate::store::SharedStore;

pub(super) struct Heartbeat {
    pub store: SharedStore,
    /// Whose loaded handlers the runner reports as the ones it serves.
    pub catalog: Arc<crate::plugins::Catalog>,
    pub clock: SharedClock,
    pub runner: RunnerId,
    pub interval: Duration,
    pub writer_stuck_limit: Duration,
    pub health: Arc<WriterHealth>,
    pub exit_tx: mpsc::UnboundedSender<ExitReason>,
    /// Told of every heartbeat that succeeded.
    pub fence: Arc<Fence>,
    /// Where the runs the fence stopped are parked.
    pub claims: Arc<Claims>,
    /// Where the runs the fence stopped are put back (the writer).
    pub releases: Releases,
}

impl Heartbeat {
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.interval);
        let mut reported: Option<crate::store::Served> = None;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let stuck_since = self.health.stuck_since_ms.load(Ordering::Relaxed);
            let stuck_ms = if stuck_since == 0 { 0 } else { unix_ms() - stuck_since };
            if stuck_ms > self.writer_stuck_limit.as_millis() as i64 {
                tracing::error!(
                    runner = self.runner,
                    "outcomes could not be written for {} s: not heartbeating, so that other workers take over",
                    stuck_ms / 1000
                );
                // Still look: whether the database answers (the writer needs to know) and whether
                // this runner was declared dead meanwhile (then stop).
                match tokio::time::timeout(self.interval.max(Duration::from_secs(1)), self.store.live_runners()).await {
                    Ok(Ok(live)) => {
                        self.health.db_ok_ms.store(unix_ms(), Ordering::Relaxed);
                        if !live.iter().any(|r| r.id == self.runner) {
                            tracing::error!(
                                runner = self.runner,
                                "this runner was timed out by the overseer; stopping"
                            );
                            let _ = self.exit_tx.send(ExitReason::RunnerLost);
                        }
                    }
                    Ok(Err(e)) => tracing::warn!(runner = self.runner, "the database does not answer: {e}"),
                    Err(_) => tracing::warn!(runner = self.runner, "the database does not answer"),
                }
                continue;
            }
            let sent = std::time::Instant::now();
            let beat = tokio::time::timeout(self.interval.max(Duration::from_secs(1)), self.beat(&mut reported)).await;
            match beat {
                Ok(Ok(true)) => {
                    self.health.db_ok_ms.store(unix_ms(), Ordering::Relaxed);
                    // The runs the fence stopped: their runner is alive after all, so nobody else
                    // would run them before their run timeout.
                    self.fence.alive(sent);
                    self.releases.put_back(self.claims.unpark(), self.clock.now(), PutBackWhy::Fenced);
                }
                Ok(Ok(false)) => {
                    tracing::error!(runner = self.runner, "this runner was timed out by the overseer; stopping");
                    let _ = self.exit_tx.send(ExitReason::RunnerLost);
                }
                Ok(Err(e)) => tracing::warn!(runner = self.runner, "heartbeat failed: {e}"),
                Err(_) => tracing::warn!(runner = self.runner, "heartbeat timed out"),
            }
        }
    }

    /// One heartbeat; report the handlers served when they changed.
    async fn beat(&self, reported: &mut Option<crate::store::Served>) -> crate::error::Result<bool> {
        crate::store::sync_clock(&*self.store, &*self.clock).await?;
        if !self.store.heartbeat(self.runner, self.clock.now()).await? {
            return Ok(false);
        }
        let handlers = self.catalog.served();
        if reported.as_ref() != Some(&handlers) {
            self.store.set_runner_handlers(self.runner, &handlers).await?;
            *reported = Some(handlers);
        }
        Ok(true)
    }
}

/// Ask the worker to finish and exit once its resident memory passes `cap` bytes.
pub(super) async fn memory_watch(
    cap: u64,
    interval: Duration,
    exit_tx: mpsc::UnboundedSender<ExitReason>,
    mut stop: watch::Receiver<bool>,
) {
    let pid = sysinfo::Pid::from_u32(std::process::id());
    let mut sys = sysinfo::System::new();
    let mut tick = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        if let Some(rss) = process_rss(&mut sys, pid) {
            if rss > cap {
                tracing::warn!(rss, cap, "resident memory passed the cap: finishing and exiting");
                let _ = exit_tx.send(ExitReason::MemoryCap);
                return;
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
