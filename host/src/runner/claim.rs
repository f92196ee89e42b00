//! Claiming: one turn ([`Claimer::claim_once`]) waits for a free slot, claims due runs of the
//! queues not paused and the handlers loaded here, and starts them; an idle worker waits
//! ([`Claimer::wait_for_work`]) for a wake-up from the database or its poll. Every wait gives
//! way to a signal or a reason to exit, and a claim under way when one comes is handed back
//! ([`super::put_back`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::execute::Shared;
use super::put_back::{hand_back_cut_claim, CutClaim};
use super::release::Holding;
use super::run_tasks::AHEAD_WAIT_LIMIT;
use super::{ExitReason, Held, RunTasks, Worker};
use crate::model::*;
use crate::retry::Backoff;
use crate::store::ClaimRequest;

mod give_back;
mod idle;
use give_back::{hand_back, put_back_waiting};

/// Waits between claims while the database fails them.
const CLAIM_BACKOFF: Backoff = Backoff { base: Duration::from_millis(50), max: Duration::from_secs(5), jitter: 0.5 };

/// What one turn of claiming came to.
pub(super) enum Step {
    /// Runs were claimed and started: claim again at once (more may be due).
    Claimed,
    /// Nothing was claimed: wait for work.
    Idle,
    /// Stop claiming; with what handing back a claim cut short cost, if one was.
    Exit(ExitReason, Option<CutClaim>),
}

/// The claim loop's state.
pub(super) struct Claimer<'w> {
    pub worker: &'w Worker,
    pub shared: &'w Arc<Shared>,
    pub runs: &'w RunTasks,
    pub runner: RunnerId,
    pub shutdown: Pin<&'w mut (dyn Future<Output = ()> + Send)>,
    pub exits: &'w mut mpsc::UnboundedReceiver<ExitReason>,
    /// PostgreSQL wakes an idle worker when tasks are added; polling stays as the safety net.
    pub wakeups: Option<mpsc::Receiver<()>>,
    /// Changes when this process queued tasks on this store ([`crate::store::Store::added_here`]).
    pub local_adds: Option<tokio::sync::watch::Receiver<u64>>,
    /// Changes as each plugin of the first load is ready: its due tasks are claimed then, not
    /// at the next poll.
    pub loading: Option<tokio::sync::watch::Receiver<super::Loading>>,
    /// Changes as each deployed version is loaded: its due tasks are claimed then.
    pub versions_loaded: Option<tokio::sync::watch::Receiver<u64>>,
    /// The newest task's id at the last probe ([`crate::store::Store::newest_task_id`]) that
    /// saw it change; a claim follows each such probe, so none of those tasks waits for a poll.
    pub newest: TaskId,
    /// The queues it claims from.
    pub queues: super::queues::QueueChoice,
    /// Claims failed in a row.
    pub failures: u32,
    /// Whether the last claim touched a cap on runs in flight (a capped run may end elsewhere,
    /// and nothing notifies that) or a queue weighed by fuel: such a worker polls at the short
    /// interval ([`crate::model::RunLimits::wants_short_poll`]).
    pub capped: bool,
    /// The flow-control limits, as last read.
    pub limits: super::limits::LimitsView,
    /// When a rate limit that held the last claim's runs back allows the next start (the
    /// database's time): an idle worker claims again then.
    pub next_start_on: Option<chrono::DateTime<chrono::Utc>>,
}

/// What a claim asks for, read fresh before each one.
struct Ask {
    queues: Vec<String>,
    handlers: Vec<String>,
    /// Whether every plugin had its chance to load (read before the handler names: a drain
    /// judged on names read while the last plugins were loading ended with their tasks due).
    loaded: bool,
    limit: u32,
}

impl Claimer<'_> {
    /// Wait for a free slot, claim due runs and start them.
    pub async fn claim_once(&mut self) -> Step {
        if let Ok(reason) = self.exits.try_recv() {
            return Step::Exit(reason, None);
        }
        if self.runs.fence.is_fenced() {
            return Step::Idle;
        }
        let free = match self.free_slots().await {
            Ok(0) => return Step::Claimed,
            Ok(free) => free,
            Err(reason) => return Step::Exit(reason, None),
        };
        // Tasks this process queues from here on wake the next wait; those before, the queues read
        // next and this claim see. (Marked after that read, a task queued between them was in
        // neither: a worker of every queue then read no queue for it and slept to its poll.)
        if let Some(adds) = &mut self.local_adds {
            adds.borrow_and_update();
        }
        let queues = match self.queues_now().await {
            Ok(Ok(queues)) => queues,
            Ok(Err(e)) => return self.back_off(&format!("listing the queues failed: {e}")).await,
            Err(reason) => return Step::Exit(reason, None),
        };
        match self.limits_now().await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return self.back_off(&format!("reading the limits failed: {e}")).await,
            Err(reason) => return Step::Exit(reason, None),
        }
        let ask = match self.ask(free, queues).await {
            Ok(ask) => ask,
            Err(reason) => return Step::Exit(reason, None),
        };
        let mut claimed = match self.claim(&ask).await {
            Ok(Ok(claimed)) => claimed,
            Ok(Err(e)) => return self.back_off(&format!("claim failed: {e}")).await,
            Err(step) => return step,
        };
        self.failures = 0;
        super::limits::mark_by_limits(&mut claimed, &self.limits.now);
        if claimed.is_empty() {
            self.queues.found_nothing();
        } else {
            // Held from its answer on: the run watch takes a run this worker does not hold for
            // an orphan and puts it back (then it must not start here).
            let claims = &self.runs.claims;
            let held = claimed.into_iter().filter_map(|run| match claims.hold(run.run_id) {
                Some(held) => Some((run, held)),
                None => {
                    tracing::warn!(
                        run_id = run.run_id,
                        "a claim's answer came after its run was put back: not started"
                    );
                    None
                }
            });
            return self.start(held.collect()).await.unwrap_or(Step::Claimed);
        }
        self.idle_or_drained(&ask).await
    }

    /// Free slots (a slot is free when its guest is done, and while fewer than
    /// [`super::run_tasks::unwritten_limit`] runs await their outcome's write), waiting for one
    /// and lingering briefly for more: one claim of many beats many claims of one.
    async fn free_slots(&mut self) -> Result<usize, ExitReason> {
        let cfg = &self.worker.config;
        let (slots, unwritten) = (&self.runs.slots, &self.runs.unwritten);
        let free = || slots.available_permits().min(unwritten.available_permits());
        if free() == 0 {
            let wait = |n: u32| async move {
                drop(slots.acquire_many(n).await);
                drop(unwritten.acquire_many(n).await);
            };
            tokio::select! {
                _ = &mut self.shutdown => return Err(ExitReason::Shutdown),
                r = self.exits.recv() => return Err(r.unwrap_or(ExitReason::Shutdown)),
                _ = wait(1) => {}
            }
            let want = (cfg.concurrency / 2).clamp(1, cfg.claim_batch.max(1)) as u32;
            let _ = tokio::time::timeout(cfg.batch_linger, wait(want)).await;
        }
        Ok(free())
    }

    /// The queues to claim from now (the claim itself leaves paused ones out, so a pause holds
    /// from the next claim on); Err when a signal or a reason to exit came meanwhile.
    async fn queues_now(&mut self) -> Result<crate::error::Result<Vec<String>>, ExitReason> {
        let (store, choice) = (self.worker.store.as_ref(), &mut self.queues);
        tokio::select! {
            biased;
            r = self.exits.recv() => Err(r.unwrap_or(ExitReason::Shutdown)),
            _ = &mut self.shutdown => Err(ExitReason::Shutdown),
            q = choice.current(store) => Ok(q),
        }
    }

    /// The limits read again when due; Err when a signal or a reason to exit came meanwhile (a
    /// read waiting on a lock must not hold up a stop).
    async fn limits_now(&mut self) -> Result<crate::error::Result<()>, ExitReason> {
        let (store, limits) = (self.worker.store.as_ref(), &mut self.limits);
        tokio::select! {
            biased;
            r = self.exits.recv() => Err(r.unwrap_or(ExitReason::Shutdown)),
            _ = &mut self.shutdown => Err(ExitReason::Shutdown),
            r = limits.refresh(store) => Ok(r),
        }
    }

    /// What to claim from `queues`: the handlers loaded, and how many runs.
    async fn ask(&mut self, free: usize, queues: Vec<String>) -> Result<Ask, ExitReason> {
        let cfg = &self.worker.config;
        // A signal or an exit already there is taken first: no claim starts after it.
        tokio::select! {
            biased;
            r = self.exits.recv() => return Err(r.unwrap_or(ExitReason::Shutdown)),
            _ = &mut self.shutdown => return Err(ExitReason::Shutdown),
            _ = std::future::ready(()) => {}
        }
        let loaded =
            self.worker.loading.as_ref().is_none_or(|l| l.borrow().done) && self.worker.catalog.deploys_settled();
        // Only tasks whose handler is loaded here: a worker without a handler leaves its tasks
        // to workers that have it (or, after a horizon, to the overseer).
        let handlers = self.worker.catalog.names();
        // Beyond the free slots, as many as the slots finish in a moment at their recent pace:
        // concurrency caps the guests running, not the runs a round trip claims.
        let room = self.runs.unwritten.available_permits();
        let limit = free.saturating_add(self.runs.pace.ahead(cfg.concurrency)).min(room).min(cfg.claim_batch.max(1));
        Ok(Ask { queues, handlers, loaded, limit: limit.max(1) as u32 })
    }

    /// The claim itself; Err when a signal or a reason to exit came while it was under way.
    async fn claim(&mut self, ask: &Ask) -> Result<crate::error::Result<Vec<ClaimedRun>>, Step> {
        let worker = self.worker;
        let limits = &self.limits.now;
        let parts = super::queues::claims_of(&ask.queues, &ask.handlers, limits);
        self.capped = limits.wants_short_poll(&ask.queues, &ask.handlers);
        let (runner, now) = (self.runner, worker.clock.now());
        let next_start_on = &mut self.next_start_on;
        *next_start_on = None;
        let claim = async {
            let mut all: Vec<ClaimedRun> = Vec::new();
            for (queues, limited) in &parts {
                let left = ask.limit.saturating_sub(all.len() as u32);
                if left == 0 {
                    break;
                }
                let req = ClaimRequest {
                    runner,
                    queues,
                    handlers: Some(&ask.handlers),
                    limit: left,
                    now,
                    default_timeout: worker.config.default_run_timeout,
                    limits: limited.then_some(limits),
                    paced_by_server: true,
                };
                match worker.store.claim_paced(&req).await {
                    Ok(claimed) => {
                        all.extend(claimed.runs);
                        // The earliest of the parts'.
                        *next_start_on = match (claimed.next_start_on, *next_start_on) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                    }
                    Err(e) if all.is_empty() => return Err(e),
                    // The runs the first part claimed are this worker's: run them.
                    Err(e) => {
                        tracing::warn!("part of a claim failed: {e}");
                        break;
                    }
                }
            }
            Ok(all)
        };
        // A claim waiting on another session's lock must not hold up a runner declared dead.
        // (Biased: a runner declared dead stops at once; a claim done when the signal comes is
        // taken, and its runs get the grace.)
        let mut claim = std::pin::pin!(claim);
        let cut = tokio::select! {
            biased;
            r = self.exits.recv() => r.unwrap_or(ExitReason::Shutdown),
            r = &mut claim => return Ok(r),
            _ = &mut self.shutdown => ExitReason::Shutdown,
        };
        Err(match cut {
            ExitReason::Shutdown | ExitReason::MemoryCap => {
                let grace = super::stop::runs_share(worker.config.shutdown_grace);
                let (releases, claims) = (&self.runs.releases, &self.runs.claims);
                Step::Exit(cut, Some(hand_back_cut_claim(releases, claims, &worker.clock, grace, claim).await))
            }
            // A runner declared dead: its claim is cut off, its runs timed out with it.
            reason => Step::Exit(reason, Some(CutClaim { asked: tokio::time::Instant::now(), all_back: false })),
        })
    }

    /// Start each claimed run in its own task, on a slot of its own, as slots free (runs
    /// claimed ahead wait for one, and a run's task whose guest is done takes the next of them
    /// itself). While the fence is up a run is not started but held back, to be put back when
    /// heartbeats are back; a signal or a reason to exit puts back the runs not started (Some:
    /// the step it came to).
    async fn start(&mut self, claimed: Vec<(ClaimedRun, Held)>) -> Option<Step> {
        // Runs claimed ahead were expected to find a slot within the window: past this, the pace
        // misled (a long run took the slots), and they go back for a worker with a free slot.
        let give_up = tokio::time::Instant::now() + AHEAD_WAIT_LIMIT;
        let ahead = &self.runs.ahead;
        ahead.push(claimed, give_up);
        let cut = loop {
            let (unwritten, slots) = (&self.runs.unwritten, &self.runs.slots);
            let permits = async { (permit(unwritten).await, permit(slots).await) };
            tokio::select! {
                biased;
                r = self.exits.recv() => break r.unwrap_or(ExitReason::Shutdown),
                _ = &mut self.shutdown => break ExitReason::Shutdown,
                p = permits => match (p, ahead.pop()) {
                    // Run tasks took the rest.
                    (_, None) => return None,
                    ((Some(place), Some(slot)), Some((run, held))) if !self.runs.fence.is_fenced() => {
                        let holding = Holding { held, place: Some(place), bytes: None };
                        self.runs.spawn(self.shared, run, slot, holding);
                    }
                    // Held back: put back when heartbeats are back (see fence.rs).
                    ((Some(_), Some(_)), Some((_, held))) => self.runs.claims.park(held),
                    // Closed (the semaphores never are): nothing can start.
                    (_, Some(_)) => {
                        drop(ahead.drain());
                        return None;
                    }
                },
                _ = tokio::time::sleep_until(give_up) => {
                    put_back_waiting(&self.runs.releases, ahead.drain());
                    return None;
                }
            }
        };
        Some(hand_back(self.worker, &self.runs.releases, cut, ahead.drain()))
    }

    /// Nothing was claimed: a draining worker with nothing in flight and nothing due is done.
    async fn idle_or_drained(&mut self, ask: &Ask) -> Step {
        let cfg = &self.worker.config;
        if !(cfg.drain && self.runs.claims.is_empty()) {
            return Step::Idle;
        }
        // While plugins still load, only a queue with nothing due for any handler ends the drain
        // (it need not wait for every compile); once loaded, nothing due for the loaded ones.
        let handlers = ask.loaded.then_some(&ask.handlers[..]);
        let horizon = chrono::Duration::from_std(cfg.drain_horizon).unwrap_or_default();
        // Paused queues hold nothing a worker can run: they do not keep it draining.
        let due = tokio::select! {
            r = async {
                if cfg.queues.is_empty() {
                    return Ok(false);
                }
                // Now, not the claim's time: a task due meanwhile keeps the drain going. The
                // queues as given (`*` too), not as last read: a new queue keeps it going.
                let until = self.worker.clock.now() + horizon;
                self.worker.store.has_due_work_for(&cfg.queues, handlers, until).await
            } => r,
            _ = &mut self.shutdown => return Step::Exit(ExitReason::Shutdown, None),
        };
        match due {
            Ok(false) => Step::Exit(ExitReason::Drained, None),
            Ok(true) => Step::Idle,
            Err(e) => {
                tracing::warn!("checking for due work failed: {e}");
                Step::Idle
            }
        }
    }

    /// Wait, longer each time, after the database failed us; Claimed to try again.
    async fn back_off(&mut self, what: &str) -> Step {
        self.failures += 1;
        let wait = CLAIM_BACKOFF.wait(self.failures);
        tracing::warn!("{what}; retrying in {wait:?}");
        tokio::select! {
            _ = &mut self.shutdown => Step::Exit(ExitReason::Shutdown, None),
            _ = tokio::time::sleep(wait) => Step::Claimed,
        }
    }
}

/// A permit of `semaphore`, at once when one is free; None when it is closed.
async fn permit(semaphore: &Arc<tokio::sync::Semaphore>) -> Option<tokio::sync::OwnedSemaphorePermit> {
    match semaphore.clone().try_acquire_owned() {
        Ok(permit) => Some(permit),
        Err(_) => semaphore.clone().acquire_owned().await.ok(),
    }
}
