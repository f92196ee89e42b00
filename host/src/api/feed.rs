//! The event stream's reader: one per server, reading while any stream is open
//! (`GET /api/v1/events`, see `events.rs`), and telling every stream the tasks whose state it
//! found changed since its last look.
//!
//! There is no log of events to read: the reader looks at the tasks that may have changed
//! ([`Store::glimpse`](crate::store::Store::glimpse): the newest, the running, those awaiting a
//! retry, those finished lately, and those a stream asked for by id), each [`TICK`] that the
//! database's change marker moved, and compares each with what it last saw (`feed/view.rs`). A
//! task is told when it is queued, starts a run, makes progress, fails a run (and is scheduled
//! again or awaits its retry), and when it ends; states a task passes through between two looks
//! are told as the last of them (a task queued, run and ended within a tick is told once, ended).
//! Nothing is written to the database for the stream: the claims and ends of tasks cost the same
//! with it open or not.

mod view;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{broadcast, watch, OwnedSemaphorePermit, Semaphore};

use super::ApiError;
use crate::model::TaskId;
use crate::store::{Brief, SharedStore};

/// How often the reader looks while a stream is open.
pub const TICK: Duration = Duration::from_millis(200);
/// Streams open at once, on one server.
pub const MAX_STREAMS: usize = 1_000;
/// Tasks asked for by id at once, over all the streams of one server.
pub const MAX_ASKED: usize = 2_000;
/// Looks a stream may fall behind by before it is told it lagged.
const BACKLOG: usize = 32;
/// How long a new stream waits for a new reader's first look (its baseline).
const PRIMING: Duration = Duration::from_secs(5);

/// The streams of one server, and their reader.
pub(super) struct Feed {
    shared: Mutex<Shared>,
    sender: broadcast::Sender<Arc<Told>>,
    slots: Arc<Semaphore>,
    /// Whether the reader running made its first look.
    primed: watch::Sender<bool>,
}

/// What a look found: the tasks changed since the look before, and the tasks a stream newly asked
/// for by id as they are (for the streams that asked: see `events.rs`); `lagged` when it could
/// not tell all (over [`view::MAX_TOLD`] changed, or more ended at once than a look reads).
#[derive(Debug, Default)]
pub(super) struct Told {
    pub changed: Vec<Said>,
    pub fresh: Vec<Said>,
    pub lagged: bool,
}

/// A task told, with its event's data: written once, by the first stream that tells it, for
/// every stream (not once a stream, nor for tasks no stream keeps).
#[derive(Debug)]
pub(super) struct Said {
    pub brief: Brief,
    data: std::sync::OnceLock<String>,
}

impl Said {
    /// The task in brief, as JSON.
    pub fn data(&self) -> &str {
        self.data.get_or_init(|| serde_json::to_string(&self.brief).unwrap_or_else(|_| String::from("{}")))
    }
}

impl From<Brief> for Said {
    fn from(brief: Brief) -> Self {
        Said { brief, data: std::sync::OnceLock::new() }
    }
}

struct Shared {
    /// The tasks streams asked for by id, with how many streams ask.
    asked: HashMap<TaskId, usize>,
    /// The tasks streams asked for since the last look.
    fresh: HashSet<TaskId>,
    /// Whether the reader runs.
    reading: bool,
}

/// An open stream's place: its events, and its tasks let go of when it is dropped.
pub(super) struct Subscription {
    pub events: broadcast::Receiver<Arc<Told>>,
    /// Opened before the reader's first look (the database could not be read): what changed
    /// until it is, it cannot tell. Completes once the reader has looked.
    pub unprimed: Option<watch::Receiver<bool>>,
    feed: Arc<Feed>,
    ids: Vec<TaskId>,
    _slot: OwnedSemaphorePermit,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            shared: Mutex::new(Shared { asked: HashMap::new(), fresh: HashSet::new(), reading: false }),
            sender: broadcast::Sender::new(BACKLOG),
            slots: Arc::new(Semaphore::new(MAX_STREAMS)),
            primed: watch::Sender::new(false),
        }
    }
}

impl Feed {
    /// A new stream, following `ids` besides every other task; the next look tells those
    /// tasks' states as they are. Answered once the reader has its baseline, so a task queued
    /// after it is told.
    pub async fn subscribe(self: &Arc<Self>, store: &SharedStore, ids: Vec<TaskId>) -> Result<Subscription, ApiError> {
        let busy = |message: String| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message);
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return Err(busy(format!("{MAX_STREAMS} event streams are open already: try again later")));
        };
        let mut subscription = {
            let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
            let more = ids.iter().filter(|id| !shared.asked.contains_key(id)).count();
            if shared.asked.len() + more > MAX_ASKED {
                let message = format!("{MAX_ASKED} tasks are followed by id already: try again later, or by queue");
                return Err(busy(message));
            }
            for id in &ids {
                *shared.asked.entry(*id).or_default() += 1;
                shared.fresh.insert(*id);
            }
            let events = self.sender.subscribe();
            if !std::mem::replace(&mut shared.reading, true) {
                self.primed.send_replace(false);
                tokio::spawn(read(self.clone(), store.clone()));
            }
            Subscription { events, unprimed: None, feed: self.clone(), ids, _slot: slot }
        };
        // A reader that cannot look (the database down) keeps trying: the stream opens meanwhile,
        // and is told it lagged once the reader has looked.
        let mut primed = self.primed.subscribe();
        let in_time = tokio::time::timeout(PRIMING, primed.wait_for(|p| *p)).await.is_ok_and(|p| p.is_ok());
        subscription.unprimed = (!in_time).then_some(primed);
        Ok(subscription)
    }

    /// Streams open now.
    pub fn streams(&self) -> usize {
        MAX_STREAMS - self.slots.available_permits()
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut shared = self.feed.shared.lock().unwrap_or_else(|p| p.into_inner());
        for id in &self.ids {
            if let Some(n) = shared.asked.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    shared.asked.remove(id);
                }
            }
        }
    }
}

/// The reader: a look each tick the database changed, while any stream is open.
async fn read(feed: Arc<Feed>, store: SharedStore) {
    // However it ends (a panic too), the next stream starts another.
    let mut reading = Reading { feed: &feed, cleared: false };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut gate = super::marker::Gate::default();
    let mut view = view::View::default();
    let mut failing = false;
    loop {
        tick.tick().await;
        let (asked, fresh): (Vec<TaskId>, HashSet<TaskId>) = {
            let mut shared = feed.shared.lock().unwrap_or_else(|p| p.into_inner());
            if feed.sender.receiver_count() == 0 {
                // Under the lock, so a stream subscribing now starts another reader.
                shared.reading = false;
                reading.cleared = true;
                return;
            }
            (shared.asked.keys().copied().collect(), std::mem::take(&mut shared.fresh))
        };
        // A task newly asked for is told at once, changed or not.
        let pass = gate.pass(&store, "the event stream").await;
        if pass.is_none() && fresh.is_empty() && view.primed() {
            continue;
        }
        let looked = view.look(&store, asked, &fresh).await;
        if let Some(pass) = pass {
            gate.done(pass, looked.is_ok());
        }
        match looked {
            Ok(told) => {
                failing = false;
                feed.primed.send_replace(true);
                if !told.changed.is_empty() || !told.fresh.is_empty() || told.lagged {
                    // None listening is no error: the next tick ends the reader.
                    let _ = feed.sender.send(Arc::new(told));
                }
            }
            Err(e) => {
                // Told at the next look that succeeds.
                feed.shared.lock().unwrap_or_else(|p| p.into_inner()).fresh.extend(fresh);
                // Said once a spell of failures: the streams stay open meanwhile.
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!("the event stream's look failed: {e}");
                }
            }
        }
    }
}

/// Marks the reader gone if it ended otherwise than by finding no stream open (which marks it
/// under the lock itself: clearing again later could hide a successor).
struct Reading<'a> {
    feed: &'a Feed,
    cleared: bool,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if !self.cleared {
            self.feed.shared.lock().unwrap_or_else(|p| p.into_inner()).reading = false;
        }
    }
}
