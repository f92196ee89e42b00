//! The runs of one worker: each claimed run in a task of its own, on a slot of its own.
//!
//! Three bounds hold what runs may take. A *slot* ([`RunTasks::slots`], the concurrency) is
//! held while a guest runs, and is free as soon as it is done. A *place* among the runs claimed
//! and not yet written ([`RunTasks::unwritten`], [`unwritten_limit`]) is held from the claim
//! until the outcome is in the database: it bounds the outcomes waiting for the writer and the
//! runs claimed ahead of a free slot. *Outcome bytes* ([`OUTCOME_BYTES`]) are taken by an
//! outcome before its guest's slot is given up, so however large a guest's results, the
//! outcomes waiting for the writer hold at most that much memory (besides one outcome per slot).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::claims::{Claims, Held};
use super::execute::{self, Executed, Shared};
use super::fence;
use super::release::{Holding, PutBackWhy, Release, Releases};
use crate::model::*;

/// Runs claimed and not yet written, at most: twice a full set of slots and a claim's worth
/// claimed ahead of them, so that one such set runs while the outcomes of the set before are
/// written.
pub(super) fn unwritten_limit(concurrency: usize, claim_batch: usize) -> usize {
    concurrency.max(1).saturating_add(claim_batch).saturating_mul(2)
}

/// Outcomes waiting for the writer hold at most this many bytes of results, logs and errors
/// (counted in KiB).
pub(super) const OUTCOME_BYTES: usize = 64 << 20;

/// How long a run claimed ahead of a free slot may expect to wait for one: the claim takes as
/// many runs beyond its free slots as the slots finish in this time, by their recent pace.
/// (2 ms claimed about a hundred no-op runs at the default concurrency, and SQLite's drain was
/// then a tenth slower than at a high one: the database's time a claim is spread over fewer.)
pub(super) const AHEAD_WINDOW: Duration = Duration::from_millis(10);

/// How long runs claimed ahead wait for a slot at most: past it, the pace misled (say, a long
/// run of another handler took the slots) and those not started go back to the queue,
/// uncounted, for a worker with a free slot. Far above [`AHEAD_WINDOW`]: a moment's noise does
/// not send them back.
pub(super) const AHEAD_WAIT_LIMIT: Duration = Duration::from_millis(100);

/// The recent time a guest takes, from the start of its run to its end (a moving average).
#[derive(Debug, Default)]
pub(super) struct Pace {
    nanos: AtomicU64,
}

impl Pace {
    fn record(&self, took: Duration) {
        let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        let old = self.nanos.load(Ordering::Relaxed);
        // One sixteenth of each new run: a few slow runs move it, one does not.
        let new = if old == 0 { took } else { old - old / 16 + took / 16 };
        self.nanos.store(new.max(1), Ordering::Relaxed);
    }

    /// How many runs `slots` slots finish within [`AHEAD_WINDOW`] at this pace (0 before any ran).
    pub fn ahead(&self, slots: usize) -> usize {
        let nanos = self.nanos.load(Ordering::Relaxed);
        if nanos == 0 {
            return 0;
        }
        let per_slot = AHEAD_WINDOW.as_nanos() / u128::from(nanos);
        usize::try_from(per_slot.saturating_mul(slots as u128)).unwrap_or(usize::MAX)
    }
}

/// Spawns run tasks and knows which are in flight.
pub(super) struct RunTasks {
    /// Every run claimed and not yet released.
    pub claims: Arc<Claims>,
    /// Stops the runs, and the claims, of a worker whose heartbeats fail.
    pub fence: Arc<fence::Fence>,
    /// Where every run's end goes: the outcome writer.
    pub releases: Releases,
    /// Turns true when the grace period is over: runs still going are dropped.
    pub abort: watch::Receiver<bool>,
    /// Runs stopped because they ended elsewhere (counted by the run tasks).
    pub ended_elsewhere: Arc<AtomicU64>,
    /// One permit a guest running: a run holds its permit until its guest is done.
    pub slots: Arc<Semaphore>,
    /// One permit a run claimed and not yet written: a run holds it until its outcome is in
    /// the database (or put back).
    pub unwritten: Arc<Semaphore>,
    /// One permit a KiB of outcomes waiting for the writer ([`OUTCOME_BYTES`]).
    pub outcome_bytes: Arc<Semaphore>,
    /// How long guests take lately.
    pub pace: Arc<Pace>,
    /// Told by the writer after each batch it wrote (one permit kept when no one waits).
    pub written: Arc<tokio::sync::Notify>,
    /// Runs claimed ahead of a free slot.
    pub ahead: Arc<Ahead>,
}

impl RunTasks {
    /// Run one claimed run in its own task, then, while runs claimed ahead wait
    /// ([`RunTasks::ahead`]), the next of them on the same slot: a guest done hands its slot on
    /// without waking the claim loop or spawning a task. A run stops at once (its store dropped)
    /// when the grace period ends or the database says it was cancelled or ended elsewhere (then
    /// what the guest logged and the fuel it used are kept on its row). Its slot is free once
    /// the guest is done; its place among the unwritten runs once its outcome is written.
    pub fn spawn(&self, shared: &Arc<Shared>, run: ClaimedRun, slot: OwnedSemaphorePermit, holding: Holding) {
        let shared = shared.clone();
        let mut abort = self.abort.clone();
        let claims = self.claims.clone();
        let releases = self.releases.clone();
        let ended_elsewhere = self.ended_elsewhere.clone();
        let fence = self.fence.clone();
        let (pace, outcome_bytes) = (self.pace.clone(), self.outcome_bytes.clone());
        let (ahead, unwritten) = (self.ahead.clone(), self.unwritten.clone());
        tokio::spawn(async move {
            let (mut run, mut holding) = (run, holding);
            loop {
                let run_id = run.run_id;
                let handler = run.handler.clone();
                let stop = claims.start(run_id);
                let began = Instant::now();
                tokio::select! {
                    executed = execute::execute_guarded(&shared, run, stop) => {
                        claims.done(run_id);
                        pace.record(began.elapsed());
                        match executed {
                            Executed::Ended(outcome) => {
                                log_outcome(&handler, &outcome);
                                // Bytes for the outcome before the slot goes to another guest.
                                let bytes = outcome_kib(&outcome);
                                holding.bytes = outcome_bytes.clone().acquire_many_owned(bytes).await.ok();
                                releases.send(Release::Ended(outcome), holding);
                                if let Some((next, held, place)) = ahead.take(&unwritten, &fence) {
                                    run = next;
                                    holding = Holding { held, place: Some(place), bytes: None };
                                    continue;
                                }
                            }
                            Executed::PutBack { at, reason, fallback } => {
                                drop(slot);
                                let why = PutBackWhy::HostBusy(reason);
                                let otherwise = Some(Box::new(fallback));
                                releases.send(Release::PutBack { run: run_id, at, why, otherwise }, holding);
                            }
                            // Put back when heartbeats are back (see fence.rs).
                            Executed::Stopped(_) if claims.fenced(run_id) => claims.park(holding.held),
                            Executed::Stopped(kept) => {
                                ended_elsewhere.fetch_add(1, Ordering::Relaxed);
                                if let Some(kept) = kept {
                                    releases.send(Release::Stopped(kept), holding);
                                }
                            }
                        }
                    }
                    _ = async { let _ = abort.wait_for(|a| *a).await; } => claims.done(run_id),
                }
                break;
            }
        });
    }
}

/// Runs claimed ahead of a free slot, first claimed first, each with when it goes back to the
/// queue if not started. The claim loop starts them as slots free (and puts back the rest past
/// their time, or when the worker stops); a run's task whose guest is done takes the next.
#[derive(Default)]
pub(super) struct Ahead {
    runs: std::sync::Mutex<std::collections::VecDeque<(ClaimedRun, Held, tokio::time::Instant)>>,
}

impl Ahead {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(ClaimedRun, Held, tokio::time::Instant)>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A claim's runs, after any waiting, to start by `give_up`.
    pub fn push(&self, claimed: Vec<(ClaimedRun, Held)>, give_up: tokio::time::Instant) {
        self.lock().extend(claimed.into_iter().map(|(run, held)| (run, held, give_up)));
    }

    /// The next waiting run, for the claim loop, which holds a slot and a place for it.
    pub fn pop(&self) -> Option<(ClaimedRun, Held)> {
        self.lock().pop_front().map(|(run, held, _)| (run, held))
    }

    /// Every waiting run (to put back).
    pub fn drain(&self) -> Vec<(ClaimedRun, Held)> {
        self.lock().drain(..).map(|(run, held, _)| (run, held)).collect()
    }

    /// The next waiting run for a slot whose guest is done, with its place among the unwritten
    /// runs; None when none waits, none is in time, no place is free or the fence is up (the
    /// claim loop then deals with them).
    fn take(
        &self,
        unwritten: &Arc<Semaphore>,
        fence: &fence::Fence,
    ) -> Option<(ClaimedRun, Held, OwnedSemaphorePermit)> {
        if fence.is_fenced() {
            return None;
        }
        let mut runs = self.lock();
        if runs.front()?.2 <= tokio::time::Instant::now() {
            return None;
        }
        let place = unwritten.clone().try_acquire_owned().ok()?;
        runs.pop_front().map(|(run, held, _)| (run, held, place))
    }
}

/// The KiB an outcome takes of [`OUTCOME_BYTES`] (all of them at most).
fn outcome_kib(o: &RunOutcome) -> u32 {
    let kib = super::writer::size_of(o).div_ceil(1024);
    u32::try_from(kib.min(OUTCOME_BYTES / 1024)).unwrap_or(u32::MAX)
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
        RunEnd::Snoozed { until, .. } => {
            let next = format!("due at {}", until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
            tracing::info!(task, run, handler, outcome = "snoozed", next, duration_ms = ms, fuel, "run ended")
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A claimed run of `echo`, due and started now.
    pub(in crate::runner) fn claimed(run_id: RunId) -> ClaimedRun {
        let now = chrono::Utc::now();
        ClaimedRun {
            run_id,
            task_id: run_id,
            attempt: 1,
            handler: "echo".into(),
            queue: DEFAULT_QUEUE.into(),
            due_on: now,
            data: "{}".into(),
            queued_by: None,
            max_attempts: 0,
            task_runs_failed: 0,
            backoff: BackoffSettings::default(),
            snoozes: 0,
            depth: 0,
            started_on: now,
            timeout_on: now,
            key: None,
            fuel_key: None,
            delete_on_success: false,
            digest: None,
            unreadable: None,
        }
    }

    #[tokio::test]
    async fn a_slot_whose_guest_is_done_takes_the_next_run_claimed_ahead_in_time_with_a_place_unfenced() {
        let (ahead, claims) = (Ahead::default(), Arc::new(Claims::default()));
        let fence = fence::Fence::new(Duration::from_secs(1), Duration::from_secs(30));
        let held = |id| (claimed(id), claims.hold(id).expect("held"));
        let now = tokio::time::Instant::now();
        ahead.push(vec![held(1), held(2), held(3)], now + Duration::from_secs(60));
        let places = Arc::new(Semaphore::new(1));
        let (run, _held, place) = ahead.take(&places, &fence).expect("the first run");
        assert_eq!(run.run_id, 1, "first claimed, first taken");
        assert!(ahead.take(&places, &fence).is_none(), "no place free among the unwritten runs");
        drop(place);
        assert_eq!(ahead.take(&places, &fence).map(|(r, ..)| r.run_id), Some(2));
        assert!(ahead.take(&places, &fence::Fence::up()).is_none(), "the fence is up: the claim loop holds it back");
        let late = Ahead::default();
        late.push(vec![held(4)], now);
        assert!(late.take(&places, &fence).is_none(), "past its time: the claim loop puts it back");
        assert_eq!(ahead.drain().into_iter().map(|(r, _)| r.run_id).collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn runs_are_claimed_ahead_only_as_far_as_the_slots_finish_them_within_the_window() {
        let pace = Pace::default();
        assert_eq!(pace.ahead(16), 0, "nothing ran yet: no guess");
        pace.record(Duration::from_micros(20));
        assert_eq!(pace.ahead(16), 16 * 500, "20 µs runs: five hundred a slot in 10 ms");
        let slow = Pace::default();
        slow.record(Duration::from_millis(50));
        assert_eq!(slow.ahead(16), 0, "runs longer than the window are never claimed ahead");
        // One slow run among fast ones moves the pace a sixteenth of the way.
        pace.record(Duration::from_millis(10));
        assert!(pace.ahead(1) < 100 && pace.ahead(1) > 0, "{}", pace.ahead(1));
    }
}
