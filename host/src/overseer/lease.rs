//! The `overseer` lease: taken, renewed every third of its time to live, handed back at the
//! end. A renewal that does not answer within [`Lease::answer_within`] (a third of the time to
//! live) counts as lost: the services stop before the lease could have expired and been
//! taken by another overseer, so that two never run at once however long the database takes.

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
#[derive(Debug, Clone, Default)]
pub struct Leadership {
    held: Arc<AtomicBool>,
    tries: Arc<AtomicU64>,
    gained: Arc<AtomicU64>,
}

impl Leadership {
    /// Whether it holds the lease now (and so runs the services).
    pub fn is_leader(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    /// How many times it has tried to take or renew the lease.
    pub fn tries(&self) -> u64 {
        self.tries.load(Ordering::SeqCst)
    }

    /// How many times it took the lease (from no one, or from an overseer whose lease expired).
    pub fn times_gained(&self) -> u64 {
        self.gained.load(Ordering::SeqCst)
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

    /// How long a renewal may take and still count: a third of the time to live, so that a
    /// holder whose renewal did not answer stops a third of it before the lease expires.
    pub fn answer_within(&self) -> Duration {
        self.ttl / 3
    }

    /// Renew until `stop` turns true: the holder every third of the lease's time; the others
    /// sooner, to take over at once a lease handed back (see [`Lease::release`]).
    pub async fn keep(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            let third = self.ttl / 3;
            let wait = if self.leader.is_leader() { third } else { third.min(OverseerConfig::LEASE_RETRY) };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
            self.renew().await;
        }
    }

    /// Take or renew the lease; whether this overseer holds it.
    pub async fn renew(&self) -> bool {
        let mut pending = self.pending.lock().await;
        let (began, mut renewal) = match pending.take() {
            Some(under_way) => under_way,
            None => {
                let (store, clock, holder) = (self.store.clone(), self.clock.clone(), self.holder.clone());
                (Instant::now(), tokio::spawn(try_lease(store, clock, holder, self.ttl)))
            }
        };
        // In a task of its own: a query dropped halfway would leave its connection unread.
        let left = self.answer_within().saturating_sub(began.elapsed());
        let held = match tokio::time::timeout(left, &mut renewal).await {
            Ok(Ok(held)) if began.elapsed() <= self.answer_within() => held,
            // A renewal that answered too late (one left under way by an earlier call) may have
            // renewed from a time long past: it does not count, and the next one starts afresh.
            Ok(Ok(_)) => false,
            Ok(Err(e)) => {
                tracing::warn!("renewing the maintenance lease failed: {e}");
                false
            }
            Err(_) => {
                tracing::warn!(
                    "renewing the maintenance lease did not answer within {:?}: maintenance stops here until a \
                     renewal answers in time",
                    self.answer_within()
                );
                *pending = Some((began, renewal));
                false
            }
        };
        if held != self.leader.held.swap(held, Ordering::SeqCst) {
            if held {
                self.leader.gained.fetch_add(1, Ordering::SeqCst);
            }
            tracing::info!(holder = %self.holder, held, "maintenance lease changed hands");
        }
        // Counted last: a look that sees this try sees its outcome.
        self.leader.tries.fetch_add(1, Ordering::SeqCst);
        held
    }

    /// Hand the lease back if this overseer still holds it, once its last pass has ended. Tried
    /// even when the last renewal failed: the database may still name this holder.
    pub async fn release(&self) {
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
