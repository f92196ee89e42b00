//! The claim loop: claims due runs while slots are free, waits for work (polling, or woken by
//! the database), and stops on a signal or when the runner must exit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::execute::Shared;
use super::{ExitReason, RunTasks, Worker};
use crate::model::*;
use crate::retry::Backoff;
use crate::store::ClaimRequest;

/// Waits between claims while the database fails them.
const CLAIM_BACKOFF: Backoff = Backoff { base: Duration::from_millis(50), max: Duration::from_secs(5), jitter: 0.5 };

impl Worker {
    pub(super) async fn claim_loop(
        &self,
        shared: &Arc<Shared>,
        runs: &RunTasks,
        runner_id: RunnerId,
        shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
        exit_rx: &mut mpsc::UnboundedReceiver<ExitReason>,
        // PostgreSQL wakes an idle worker when tasks are added; polling stays as the safety net.
        mut wakeups: Option<mpsc::Receiver<()>>,
    ) -> ExitReason {
        let cfg = &self.config;
        let slots = &runs.slots;
        let mut claim_failures = 0u32;
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
            // Paused queues are read before every claim, so a pause holds from the next claim on.
            // (A signal or an exit already there is taken first: no claim starts after it.)
            let paused = tokio::select! {
                biased;
                r = exit_rx.recv() => return r.unwrap_or(ExitReason::Shutdown),
                _ = &mut *shutdown => return ExitReason::Shutdown,
                paused = self.store.paused_queues() => paused,
            };
            let queues = match paused {
                Ok(paused) => cfg.queues.iter().filter(|q| !paused.contains(q)).cloned().collect::<Vec<_>>(),
                Err(e) => {
                    claim_failures += 1;
                    let wait = CLAIM_BACKOFF.wait(claim_failures);
                    tracing::warn!("reading the paused queues failed, retrying in {wait:?}: {e}");
                    tokio::select! {
                        _ = &mut *shutdown => return ExitReason::Shutdown,
                        _ = tokio::time::sleep(wait) => {}
                    }
                    continue;
                }
            };
            let now = self.clock.now();
            // Whether every plugin had its chance to load, read before the handler names: a drain
            // judged on names read while the last plugins were loading ended with their tasks due.
            let loaded = self.loading.as_ref().is_none_or(|l| l.borrow().done);
            // Only tasks whose handler is loaded here: a worker without a handler leaves its tasks
            // to workers that have it (or, after a horizon, to the overseer).
            let handlers = self.catalog.names();
            let limits = &self.catalog.policy().run_limits;
            let limited = limits.apply_to(&queues, Some(&handlers));
            // A signal during a claim: see `hand_back_cut_claim`.
            let claim = async {
                if queues.is_empty() {
                    return Ok(Vec::new());
                }
                let req = ClaimRequest {
                    runner: runner_id,
                    queues: &queues,
                    handlers: Some(&handlers),
                    limit,
                    now,
                    default_timeout: cfg.default_run_timeout,
                    limits: limited.then_some(limits),
                };
                self.store.claim_for(&req).await
            };
            // A claim waiting on another session's lock must not hold up a runner declared dead.
            // (Biased: a runner declared dead stops at once; a claim done when the signal comes is
            // taken, and its runs get the grace.)
            let mut claim = std::pin::pin!(claim);
            let cut = tokio::select! {
                biased;
                r = exit_rx.recv() => Err(r.unwrap_or(ExitReason::Shutdown)),
                r = &mut claim => Ok(r),
                _ = &mut *shutdown => Err(ExitReason::Shutdown),
            };
            let claimed = match cut {
                Ok(claimed) => claimed,
                Err(reason @ (ExitReason::Shutdown | ExitReason::MemoryCap)) => {
                    self.hand_back_cut_claim(claim, runs).await;
                    return reason;
                }
                Err(reason) => {
                    runs.claim_cut.store(true, Ordering::Relaxed);
                    return reason;
                }
            };
            let claimed = match claimed {
                Ok(c) => {
                    claim_failures = 0;
                    c
                }
                Err(e) => {
                    claim_failures += 1;
                    let wait = CLAIM_BACKOFF.wait(claim_failures);
                    tracing::warn!("claim failed, retrying in {wait:?}: {e}");
                    tokio::select! {
                        _ = &mut *shutdown => return ExitReason::Shutdown,
                        _ = tokio::time::sleep(wait) => {}
                    }
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
                    runs.spawn(shared, run, permit);
                    continue;
                };
                runs.spawn(shared, run, permit);
            }
            if got > 0 {
                continue;
            }
            // A draining worker is done only once every plugin had its chance to load.
            if cfg.drain && loaded && slots.available_permits() == cfg.concurrency.max(1) {
                let horizon = chrono::Duration::from_std(cfg.drain_horizon).unwrap_or_default();
                // Paused queues hold nothing a worker can run: they do not keep it draining.
                let due = tokio::select! {
                    r = async {
                        if queues.is_empty() {
                            return Ok(false);
                        }
                        // Now, not the claim's time: a task due meanwhile keeps the drain going.
                        self.store.has_due_work_for(&queues, Some(&handlers), self.clock.now() + horizon).await
                    } => r,
                    _ = &mut *shutdown => return ExitReason::Shutdown,
                };
                match due {
                    Ok(false) => return ExitReason::Drained,
                    Ok(true) => {}
                    Err(e) => tracing::warn!("checking for due work failed: {e}"),
                }
            }
            // Polling at the short interval: without wake-ups; when a limited run may end elsewhere
            // (nothing notifies that); and when draining, which ends when the last outcomes are
            // written (nothing notifies that either: waiting for a wake-up added up to the
            // notified poll interval to every drain on PostgreSQL).
            let poll = if wakeups.is_some() && !limited && !cfg.drain {
                cfg.notified_poll_interval
            } else {
                cfg.poll_interval
            };
            tokio::select! {
                _ = &mut *shutdown => return ExitReason::Shutdown,
                r = exit_rx.recv() => return r.unwrap_or(ExitReason::Shutdown),
                _ = tokio::time::sleep(poll) => {}
                woke = super::heartbeat::next(&mut wakeups) => {
                    if !woke {
                        wakeups = None; // the listener is gone: poll only
                    }
                }
            }
        }
    }
}

impl Worker {
    /// A signal (or the memory cap) came during a claim: the claim may finish within the grace
    /// period (what this takes of it is taken from the runs' share), and what it claimed goes
    /// back to the queue unrun and uncounted. (Cut off, its runs would be timed out at exit as
    /// lost, each counting as a failure of its task.) A run that cannot go back is left to the exit.
    async fn hand_back_cut_claim(
        &self,
        claim: impl std::future::Future<Output = crate::error::Result<Vec<ClaimedRun>>>,
        runs: &RunTasks,
    ) {
        let started = std::time::Instant::now();
        // How many runs went back, and whether every one did.
        let handed_back = tokio::time::timeout(self.config.shutdown_grace, async {
            let claimed = match claim.await {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::warn!("a claim cut short by a signal failed: {e}");
                    return (0, false);
                }
            };
            let now = self.clock.now();
            let mut back = 0;
            for run in &claimed {
                // Each on its own: one that fails is left to the exit, the others still go back.
                match self.store.put_back(run.run_id, now).await {
                    Ok(_) => back += 1,
                    Err(e) => {
                        tracing::warn!(run_id = run.run_id, "could not put back a run claimed as the signal came: {e}")
                    }
                }
            }
            (back, back == claimed.len())
        })
        .await;
        let spent = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        runs.grace_spent_ms.store(spent, Ordering::Relaxed);
        let (back, all) = handed_back.unwrap_or((0, false));
        if back > 0 {
            tracing::info!(runs = back, "runs claimed as the signal came are back in the queue");
        }
        if !all {
            runs.claim_cut.store(true, Ordering::Relaxed);
        }
    }
}
