//! Waiting for a task's end without polling: `GET /api/v1/tasks/{id}?wait=30s` answers when the
//! task is final (succeeded, dead, cancelled; or deleted) or when the wait ends, whichever comes
//! first, with the task as a plain `GET` has it.
//!
//! One watcher per server serves every waiter: while any wait is unanswered it reads, each
//! [`TICK`], which of those tasks are now final, and their answers with them (a chunk of
//! [`IDS_A_QUERY`] at a time, four statements a chunk, no row while nothing ends:
//! [`Store::final_details`](crate::store::Store::final_details)), and hands each to its waiters;
//! a task answered is not read again while its requests leave. While nobody waits it is not
//! running and costs nothing. Where the database has a cheap change marker (a stat of SQLite's
//! log, PostgreSQL's current snapshot, MariaDB's redo log position:
//! [`Store::change_marker`](crate::store::Store::change_marker)),
//! a tick that finds it as it was skips the read, but for one read every
//! [`SAFETY_READ`](super::marker::SAFETY_READ): an idle queue costs a marker a tick. Where the
//! database also rings when its files are written ([`Store::commit_bell`](crate::store::Store::commit_bell):
//! SQLite on Linux), the watcher looks at once, not at its next tick, at most a look each
//! [`READ_GAP`] through a burst of commits. The state is read, not events: a task that ends
//! between a waiter's registration and its first look is still found. (A task is deleted only once final, so a
//! wait misses its end only if it is also deleted, or replayed, before the next read: that wait is
//! answered when it runs out.) At most [`MAX_WAITERS`] wait at once (more get 503 `busy`), each
//! at most [`MAX_WAIT`]; a server that stops ends every wait at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{watch, Semaphore};

use super::ApiError;
use crate::model::{TaskDetail, TaskId};
use crate::store::SharedStore;

/// The longest wait asked: longer ones are refused (proxies cut idle requests near a minute).
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// Requests waiting at once, on one server.
pub const MAX_WAITERS: usize = 10_000;
/// How often the watcher looks for ends while any wait is unanswered, where the database has no
/// [`CommitBell`](crate::store::CommitBell) (and where it has one, in case it missed a commit).
pub const TICK: Duration = Duration::from_millis(20);
/// Between two looks at least (the marker read, and the tasks if it moved), however often the
/// bell rings (through a burst of ends, a read after each commit would take the cores the worker
/// needs).
const READ_GAP: Duration = Duration::from_millis(5);
/// Ids in one query of the watcher.
const IDS_A_QUERY: usize = 1_000;

/// The waiters of one server, and its watcher.
pub(super) struct Waits {
    awaited: Mutex<HashMap<TaskId, Awaited>>,
    /// Whether the watcher runs; changed only under `awaited`'s lock.
    watching: AtomicBool,
    slots: Arc<Semaphore>,
}

/// The requests waiting for one task.
struct Awaited {
    ended: watch::Sender<End>,
    waiters: usize,
}

/// Whether an awaited task ended, with its answer as the watcher read it with the others that
/// ended then (None: it could not be read, and the request reads it itself).
#[derive(Clone, Default)]
enum End {
    #[default]
    Not,
    Ended(Option<Arc<TaskDetail>>),
}

/// A server's signal that it stops: waits end at once (see `server.rs`).
#[derive(Clone)]
pub struct Stopping(pub watch::Receiver<bool>);

impl Default for Waits {
    fn default() -> Self {
        Waits {
            awaited: Mutex::new(HashMap::new()),
            watching: AtomicBool::new(false),
            slots: Arc::new(Semaphore::new(MAX_WAITERS)),
        }
    }
}

/// The `wait` of a request: a duration up to [`MAX_WAIT`].
pub(super) fn parse(text: &str) -> Result<Duration, ApiError> {
    let bad = |why: String| ApiError::bad("invalid", format!("wait={text:?}: {why}"));
    let wait = crate::text::parse_duration(text).map_err(bad)?;
    if wait > MAX_WAIT {
        return Err(bad(format!("at most {}s", MAX_WAIT.as_secs())));
    }
    Ok(wait)
}

impl Waits {
    /// Wait until task `id` is final, `within` has passed or the server stops: the task's
    /// answer, when the watcher read it. Registered before `first_look` runs: a first look that
    /// finds the task final ends the wait at once, and one that does not cannot miss its end.
    pub async fn until_final<F>(
        self: &Arc<Self>,
        store: &SharedStore,
        id: TaskId,
        within: Duration,
        stopping: Option<Stopping>,
        first_look: F,
    ) -> Result<Option<Arc<TaskDetail>>, ApiError>
    where
        F: std::future::Future<Output = Result<bool, ApiError>>,
    {
        let Ok(_slot) = self.slots.clone().try_acquire_owned() else {
            let message = format!("{MAX_WAITERS} requests are waiting already: ask again later, or without wait");
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message));
        };
        let mut ended = self.register(store, id);
        let _leave = Leave { waits: self, id };
        if first_look.await? {
            return Ok(None);
        }
        let stopped = async {
            match stopping {
                Some(Stopping(mut rx)) => drop(rx.wait_for(|s| *s).await),
                None => std::future::pending().await,
            }
        };
        let end = async {
            match ended.wait_for(|e| matches!(e, End::Ended(_))).await {
                Ok(end) => match &*end {
                    // Shared with the task's other waiters: each serializes it, none copies it.
                    End::Ended(Some(detail)) => Some(detail.clone()),
                    End::Ended(None) | End::Not => None,
                },
                Err(_) => None,
            }
        };
        tokio::select! {
            detail = end => Ok(detail),
            _ = tokio::time::sleep(within) => Ok(None),
            _ = stopped => Ok(None),
        }
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        MAX_WAITERS - self.slots.available_permits()
    }

    fn register(self: &Arc<Self>, store: &SharedStore, id: TaskId) -> watch::Receiver<End> {
        let mut awaited = self.awaited.lock().unwrap_or_else(|p| p.into_inner());
        let entry = awaited.entry(id).or_insert_with(|| Awaited { ended: watch::Sender::new(End::Not), waiters: 0 });
        // Answered, and its requests not all gone: the task may have been replayed since, so the
        // newcomer waits on a new end (the others keep the answer they were sent).
        if matches!(*entry.ended.borrow(), End::Ended(_)) {
            entry.ended = watch::Sender::new(End::Not);
        }
        entry.waiters += 1;
        let rx = entry.ended.subscribe();
        if !self.watching.swap(true, Ordering::SeqCst) {
            tokio::spawn(watch_tasks(self.clone(), store.clone()));
        }
        rx
    }
}

/// Takes a waiter off its task's list when its request ends, however it ends.
struct Leave<'a> {
    waits: &'a Waits,
    id: TaskId,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut awaited = self.waits.awaited.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = awaited.get_mut(&self.id) {
            a.waiters -= 1;
            if a.waiters == 0 {
                awaited.remove(&self.id);
            }
        }
    }
}

/// The watcher: each tick, the awaited tasks now final wake their waiters; it ends
/// when nobody waits (the next waiter starts it again).
async fn watch_tasks(waits: Arc<Waits>, store: SharedStore) {
    // However it ends (a panic too), the next waiter starts another.
    let mut watching = Watching { waits: &waits, cleared: false };
    // Where the database rings at a commit, the watcher looks at once; else (and as well) each tick.
    let mut bell = store.commit_bell();
    // Ticks keep their pace whatever a read takes (a read of thousands of ids can take a tick).
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    let mut gate = super::marker::Gate::default();
    // No look before this (READ_GAP after the last look's end).
    let mut next_look = tokio::time::Instant::now();
    loop {
        if tick_or_bell(&mut tick, &mut bell).await {
            gate.disturb();
        }
        {
            let awaited = waits.awaited.lock().unwrap_or_else(|p| p.into_inner());
            if awaited.is_empty() {
                // Marked under the lock, so a waiter registering now starts another watcher.
                waits.watching.store(false, Ordering::SeqCst);
                watching.cleared = true;
                return;
            }
        }
        // Through a burst of commits, a look each READ_GAP at most (the commits meanwhile are
        // read then: the bell rang, or the marker moved).
        tokio::time::sleep_until(next_look).await;
        let pass = gate.pass(&store, "waits").await;
        next_look = tokio::time::Instant::now() + READ_GAP;
        let Some(pass) = pass else { continue };
        // A task already answered is not read again while its waiters leave.
        let ids: Vec<TaskId> = {
            let awaited = waits.awaited.lock().unwrap_or_else(|p| p.into_inner());
            awaited.iter().filter(|(_, a)| matches!(*a.ended.borrow(), End::Not)).map(|(id, _)| *id).collect()
        };
        if ids.is_empty() {
            continue;
        }
        let mut all_read = true;
        for chunk in ids.chunks(IDS_A_QUERY) {
            match answer_ended(&waits, &store, chunk).await {
                Ok(()) => failing = false,
                Err(e) => {
                    // Said once a spell of failures: the waits end at their time meanwhile.
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!("reading the awaited tasks failed: {e}");
                    }
                    all_read = false;
                }
            }
        }
        gate.done(pass, all_read);
        next_look = tokio::time::Instant::now() + READ_GAP;
    }
}

/// Wait for the next tick, or for the database's bell: whether it rang. A bell that fails is
/// said once and dropped: ticks go on.
async fn tick_or_bell(tick: &mut tokio::time::Interval, bell: &mut Option<crate::store::CommitBell>) -> bool {
    let Some(ringing) = bell.as_mut() else {
        tick.tick().await;
        return false;
    };
    let heard = tokio::select! {
        _ = tick.tick() => Ok(false),
        rang = ringing.rung() => rang.map(|()| true),
    };
    heard.unwrap_or_else(|e| {
        tracing::warn!("the database's commit bell failed, so waits look each {TICK:?}: {e}");
        *bell = None;
        false
    })
}

/// Hand the tasks of `ids` that are final their answers. A read the database refuses for the
/// data it meets (a row this version cannot read) is split until the task at fault is alone:
/// its requests read it themselves and say what is wrong, the others are answered as usual. An
/// error that may pass (the database unreachable) is returned: the next tick reads again.
async fn answer_ended(waits: &Waits, store: &SharedStore, ids: &[TaskId]) -> crate::error::Result<()> {
    let mut pending = vec![ids];
    while let Some(ids) = pending.pop() {
        let (ended, unread) = match store.final_details(ids).await {
            Ok(ended) => (ended, None),
            Err(e) if e.is_retryable() => return Err(e),
            Err(_) if ids.len() > 1 => {
                let (first, second) = ids.split_at(ids.len() / 2);
                pending.extend([first, second]);
                continue;
            }
            Err(e) => {
                let id = ids.first().copied();
                tracing::debug!(task = ?id, "an awaited task cannot be read, so its requests read it: {e}");
                (Vec::new(), id)
            }
        };
        let awaited = waits.awaited.lock().unwrap_or_else(|p| p.into_inner());
        for detail in ended {
            if let Some(a) = awaited.get(&detail.task.id) {
                a.ended.send_replace(End::Ended(Some(Arc::new(detail))));
            }
        }
        if let Some(a) = unread.and_then(|id| awaited.get(&id)) {
            a.ended.send_replace(End::Ended(None));
        }
    }
    Ok(())
}

/// Marks the watcher gone if it ended otherwise than by finding nobody waiting (which marks it
/// under the lock itself: clearing again later could hide a successor).
struct Watching<'a> {
    waits: &'a Waits,
    cleared: bool,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        if !self.cleared {
            let _awaited = self.waits.awaited.lock().unwrap_or_else(|p| p.into_inner());
            self.waits.watching.store(false, Ordering::SeqCst);
        }
    }
}
