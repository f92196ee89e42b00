//! Every run this worker claimed and has not yet released: one entry a run, from its claim's
//! answer until the outcome writer applied what became of it ([`super::release`]). Whoever asks
//! about a claimed run asks here: the run watch (which runs are executing, which are held), the
//! fence (stop them all), the heartbeat (what the fence stopped, to put back), the stopping
//! worker (what is left).
//!
//! An entry is kept by a [`Held`], which travels with its run: ahead of a free slot, on its
//! slot, then in its release; dropped once the release is applied, it ends the entry. While the
//! run's guest executes, the entry has a way to stop it. A run the fence stopped, or a claimed
//! one it held back, is *parked*: its entry outlives its Held until a heartbeat succeeds and it
//! is put back ([`Claims::unpark`]). A run the database has running here with no entry is an
//! orphan to the run watch ([`Claims::disown`]); an answer arriving later for one is dropped.
//! A stopping worker waits for the entries to end ([`Claims::settle`]): those left are runs left
//! running, which its runner's time-out ends.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use crate::model::RunId;

/// How many orphans put back are remembered, to drop an answer that arrives for one after all.
const REMEMBERED_ORPHANS: usize = 1024;

/// The runs this worker claimed and has not released (see the module's documentation).
#[derive(Debug, Default)]
pub(super) struct Claims {
    inner: Mutex<Inner>,
    /// Told whenever an entry ends.
    ended: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    runs: HashMap<RunId, Entry>,
    /// Orphans put back lately.
    orphaned: VecDeque<RunId>,
}

#[derive(Debug, Default)]
struct Entry {
    /// Set while its guest executes: notified to stop it.
    stop: Option<Arc<Notify>>,
    /// The fence stopped it: it goes back to the queue; it did not end elsewhere.
    fenced: bool,
    /// Kept without a [`Held`], for the next heartbeat that succeeds to put back.
    parked: bool,
}

/// A run's entry lives while this does (or while it is parked).
pub(super) struct Held {
    run: RunId,
    claims: Arc<Claims>,
}

impl Held {
    pub fn run(&self) -> RunId {
        self.run
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held({})", self.run)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut inner = self.claims.lock();
        if inner.runs.get(&self.run).is_some_and(|e| !e.parked) {
            inner.runs.remove(&self.run);
            drop(inner);
            self.claims.ended.notify_waiters();
        }
    }
}

impl Claims {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enter a run a claim answered with; None when it was put back as an orphan meanwhile
    /// (then it must not start), or is held already.
    pub fn hold(self: &Arc<Self>, run: RunId) -> Option<Held> {
        let mut inner = self.lock();
        if inner.orphaned.contains(&run) || inner.runs.contains_key(&run) {
            return None;
        }
        inner.runs.insert(run, Entry::default());
        Some(Held { run, claims: self.clone() })
    }

    /// Its guest starts: the returned handle is notified if it must stop.
    pub fn start(&self, run: RunId) -> Arc<Notify> {
        let stop = Arc::new(Notify::new());
        if let Some(entry) = self.lock().runs.get_mut(&run) {
            entry.stop = Some(stop.clone());
        }
        stop
    }

    /// Its guest is done (or dropped).
    pub fn done(&self, run: RunId) {
        if let Some(entry) = self.lock().runs.get_mut(&run) {
            entry.stop = None;
        }
    }

    /// The runs whose guests execute.
    pub fn executing(&self) -> Vec<RunId> {
        self.lock().runs.iter().filter(|(_, e)| e.stop.is_some()).map(|(&run, _)| run).collect()
    }

    /// Stop a run's guest (the database ended the run elsewhere).
    pub fn stop(&self, run: RunId) {
        if let Some(stop) = self.lock().runs.get(&run).and_then(|e| e.stop.as_ref()) {
            stop.notify_one();
        }
    }

    /// Stop every guest executing, as the fence does; how many.
    pub fn fence_all(&self) -> usize {
        let mut inner = self.lock();
        let mut stopped = 0;
        for entry in inner.runs.values_mut() {
            if let Some(stop) = &entry.stop {
                entry.fenced = true;
                stop.notify_one();
                stopped += 1;
            }
        }
        stopped
    }

    /// Whether the fence stopped this run.
    pub fn fenced(&self, run: RunId) -> bool {
        self.lock().runs.get(&run).is_some_and(|e| e.fenced)
    }

    /// Keep a run the fence stopped, or held back, until heartbeats are back.
    pub fn park(&self, held: Held) {
        if let Some(entry) = self.lock().runs.get_mut(&held.run) {
            entry.parked = true;
        }
    }

    /// Heartbeats are back: the parked runs, each held again, to put back.
    pub fn unpark(self: &Arc<Self>) -> Vec<Held> {
        let mut inner = self.lock();
        let parked = inner.runs.iter_mut().filter(|(_, e)| e.parked);
        let runs: Vec<RunId> = parked
            .map(|(&run, entry)| {
                *entry = Entry::default();
                run
            })
            .collect();
        runs.into_iter().map(|run| Held { run, claims: self.clone() }).collect()
    }

    /// Whether this run has an entry.
    pub fn holds(&self, run: RunId) -> bool {
        self.lock().runs.contains_key(&run)
    }

    /// How many runs have an entry.
    pub fn len(&self) -> usize {
        self.lock().runs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Enter a run with no entry as an orphan, to put back; None when it has one after all. An
    /// answer arriving for it later is dropped.
    pub fn disown(self: &Arc<Self>, run: RunId) -> Option<Held> {
        let mut inner = self.lock();
        if inner.runs.contains_key(&run) {
            return None;
        }
        if !inner.orphaned.contains(&run) {
            if inner.orphaned.len() >= REMEMBERED_ORPHANS {
                inner.orphaned.pop_front();
            }
            inner.orphaned.push_back(run);
        }
        inner.runs.insert(run, Entry::default());
        Some(Held { run, claims: self.clone() })
    }

    /// Wait until no entry is left, for `within` at most; how many are left.
    pub async fn settle(&self, within: Duration) -> usize {
        let all_ended = async {
            loop {
                let ended = self.ended.notified();
                let mut ended = std::pin::pin!(ended);
                // Registered before looking: an entry ending between the two wakes it.
                ended.as_mut().enable();
                if self.is_empty() {
                    return;
                }
                ended.await;
            }
        };
        let _ = tokio::time::timeout(within, all_ended).await;
        self.len()
    }
}

#[cfg(test)]
mod tests;
