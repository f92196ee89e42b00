//! The `overseer` lease: taken, renewed every third of its time to live (counted from when
//! each renewal began), handed back at the end.
//!
//! A renewal counts for two thirds of the time to live from when it began, and only if it
//! answered within them: leadership lapses by itself then, unless a later renewal answered in
//! time. The database's lease runs the whole time to live from the same moment, so a holder whose
//! database keeps it waiting stops starting passes a third of the lease before another could take
//! it (a pass already under way ends as it would have). A renewal runs in a task of its own;
//! one still under way is waited for by the next try rather than doubled, and given up once its
//! answer could no longer count.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::OverseerConfig;
use crate::clock::SharedClock;
use crate::store::SharedStore;

/// How long handing the lease back may take; past it the lease expires as it would have.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// What an overseer knows of its lease, every change counted (so a test or a dashboard can tell
/// that nothing happened between two looks).
#[derive(Debug, Clone)]
pub struct Leadership {
    /// Whether the last renewal that answered said this node holds the lease.
    held: Arc<AtomicBool>,
    /// Milliseconds after `since` until which the last renewal that counted holds.
    until_ms: Arc<AtomicU64>,
    since: Instant,
    tries: Arc<AtomicU64>,
    gained: Arc<AtomicU64>,
}

impl Default for Leadership {
    fn default() -> Self {
        Leadership {
            held: Arc::default(),
            until_ms: Arc::default(),
            since: Instant::now(),
            tries: Arc::default(),
            gained: Arc::default(),
        }
    }
}

impl Leadership {
    /// Whether it holds the lease now (and so runs the services).
    pub fn is_leader(&self) -> bool {
        self.held.load(Ordering::SeqCst) && self.ms(Instant::now()) < self.until_ms.load(Ordering::SeqCst)
    }

    /// How many times it has tried to take or renew the lease.
    pub fn tries(&self) -> u64 {
        self.tries.load(Ordering::SeqCst)
    }

    /// How many times it took the lease (from no one, or from an overseer whose lease expired).
    pub fn times_gained(&self) -> u64 {
        self.gained.load(Ordering::SeqCst)
    }

    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.since).as_millis()).unwrap_or(u64::MAX)
    }
}

/// This node's claim on the lease.
pub(super) struct Lease {
    store: SharedStore,
    clock: SharedClock,
    holder: String,
    ttl: Duration,
    leader: Leadership,
    /// A renewal that has not answered yet, and when it began: waited for again rather than
    /// a second one started beside it.
    pending: Mutex<Option<(Instant, JoinHandle<bool>)>>,
}

impl Lease {
    pub fn new(store: SharedStore, clock: SharedClock, holder: String, ttl: Duration) -> Self {
        Lease { store, clock, holder, ttl, leader: Leadership::default(), pending: Mutex::default() }
    }

    pub fn leadership(&self) -> Leadership {
        self.leader.clone()
    }

    /// How long a renewal counts from when it began (and so how long it may take to count).
    fn counts_for(&self) -> Duration {
        self.ttl * 2 / 3
    }

    /// Renew until `stop` turns true: the holder every third of the lease's time from when the
    /// last renewal began; the others sooner, to take over at once a lease handed back.
    pub async fn keep(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut began = Instant::now();
        loop {
            let third = self.ttl / 3;
            let wait = if self.leader.is_leader() { third } else { third.min(OverseerConfig::LEASE_RETRY) };
            tokio::select! {
                _ = tokio::time::sleep_until(began + wait) => {}
                _ = stop.changed() => return,
            }
            began = Instant::now();
            self.renew().await;
        }
    }

    /// Take or renew the lease, waiting a third of its time at most for the answer; whether
    /// this overseer leads now.
    pub async fn renew(&self) -> bool {
        let mut pending = self.pending.lock().await;
        let (began, mut renewal) = match pending.take() {
            // Its answer could no longer count (and it may never come: a half-open connection).
            Some((began, renewal)) if began.elapsed() >= self.counts_for() => {
                renewal.abort();
                self.start()
            }
            Some(under_way) => under_way,
            None => self.start(),
        };
        match tokio::time::timeout(self.ttl / 3, &mut renewal).await {
            Ok(Ok(held)) => self.answered(held, began),
            Ok(Err(e)) => {
                tracing::warn!("renewing the maintenance lease failed: {e}");
                self.answered(false, began);
            }
            Err(_) => {
                tracing::warn!(
                    "renewing the maintenance lease has not answered for {:?}: this node leads until {:?} after \
                     its last renewal that answered in time",
                    began.elapsed(),
                    self.counts_for()
                );
                *pending = Some((began, renewal));
            }
        }
        // Counted last: a look that sees this try sees its outcome.
        self.leader.tries.fetch_add(1, Ordering::SeqCst);
        self.leader.is_leader()
    }

    fn start(&self) -> (Instant, JoinHandle<bool>) {
        let (store, clock, holder) = (self.store.clone(), self.clock.clone(), self.holder.clone());
        (Instant::now(), tokio::spawn(try_lease(store, clock, holder, self.ttl)))
    }

    /// A renewal that began at `began` answered `held`.
    fn answered(&self, held: bool, began: Instant) {
        let leader = &self.leader;
        let was = leader.is_leader();
        let until = began + self.counts_for();
        if !held {
            leader.held.store(false, Ordering::SeqCst);
        } else if Instant::now() < until {
            leader.until_ms.fetch_max(leader.ms(until), Ordering::SeqCst);
            leader.held.store(true, Ordering::SeqCst);
        }
        // Held, but answered too late to count: it extends nothing; the next renewal may.
        let now = leader.is_leader();
        if now != was {
            if now {
                leader.gained.fetch_add(1, Ordering::SeqCst);
            }
            tracing::info!(holder = %self.holder, held = now, "maintenance lease changed hands");
        }
    }

    /// Hand the lease back if this overseer still holds it, once its last pass has ended. Tried
    /// even when the last renewal failed: the database may still name this holder.
    pub async fn release(&self) {
        // A renewal landing after the release would take the lease back.
        if let Some((_, renewal)) = self.pending.lock().await.take() {
            renewal.abort();
            let _ = renewal.await;
        }
        self.leader.held.store(false, Ordering::SeqCst);
        let released = self.store.release_lease(OverseerConfig::LEASE, &self.holder, self.clock.now());
        match tokio::time::timeout(RELEASE_TIMEOUT, released).await {
            Ok(Ok(true)) => tracing::info!(holder = %self.holder, "maintenance lease released"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::warn!("releasing the maintenance lease failed: {e}"),
            Err(_) => tracing::warn!("releasing the maintenance lease failed: the database did not answer"),
        }
    }
}

/// One try at the lease, on the database's clock.
async fn try_lease(store: SharedStore, clock: SharedClock, holder: String, ttl: Duration) -> bool {
    if let Err(e) = crate::store::sync_clock(&*store, &*clock).await {
        tracing::warn!("reading the database's time failed: {e}");
    }
    match store.try_lease(OverseerConfig::LEASE, &holder, clock.now(), ttl).await {
        Ok(held) => held,
        Err(e) => {
            tracing::warn!("renewing the maintenance lease failed: {e}");
            false
        }
    }
}
