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
//!
//! Each look that tells something is numbered; the reader keeps the last [`HISTORY`] of them (at
//! most [`HISTORY_TASKS`] tasks), and goes on reading for [`LINGER`] after the last stream closed,
//! so a client that reconnects with the id of the last event it read (`Last-Event-ID`, which a
//! browser's `EventSource` sends by itself) is told what it missed: see [`Feed::subscribe`].

mod view;

use std::collections::{HashMap, HashSet, VecDeque};
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
/// Looks kept for streams that resume, at most.
const HISTORY: usize = 256;
/// Tasks told in the looks kept, at most (the oldest looks go first).
const HISTORY_TASKS: usize = 20_000;
/// How long the reader goes on after the last stream closed, so one that reconnects resumes.
pub const LINGER: Duration = Duration::from_secs(30);

/// The streams of one server, and their reader.
pub(super) struct Feed {
    /// This feed's name in event ids (`NAME-SEQ`): an id of another server, or of this one
    /// before it restarted, is not taken for one of its own.
    name: String,
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
    /// Its number, from 1, in the order told.
    pub seq: u64,
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
    /// The last looks told, oldest first, and how many tasks they tell.
    history: VecDeque<Arc<Told>>,
    history_tasks: usize,
    /// The last look's number, and the first of the running reader's (a stream that read less
    /// cannot resume: between two readers nothing was seen).
    seq: u64,
    first_of_reader: u64,
}

/// Where a stream opened with the id of the last event it read stands.
pub(super) enum Resume {
    /// No id given.
    Fresh,
    /// The looks it missed, to tell first (none: it missed nothing).
    Missed(Vec<Arc<Told>>),
    /// It cannot be told what it missed: another server's id, or looks no longer kept.
    Lost,
}

/// An open stream's place: its events, and its tasks let go of when it is dropped.
pub(super) struct Subscription {
    pub events: broadcast::Receiver<Arc<Told>>,
    /// What it missed since the event id it gave.
    pub resume: Resume,
    /// Opened before the reader's first look (the database could not be read): what changed
    /// until it is, it cannot tell. Completes once the reader has looked.
    pub unprimed: Option<watch::Receiver<bool>>,
    feed: Arc<Feed>,
    ids: Vec<TaskId>,
    _slot: OwnedSemaphorePermit,
}

impl Default for Feed {
    fn default() -> Self {
        // The process and when it started: another server's, or a restarted one's, differs.
        let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let shared = Shared {
            asked: HashMap::new(),
            fresh: HashSet::new(),
            reading: false,
            history: VecDeque::new(),
            history_tasks: 0,
            seq: 0,
            first_of_reader: 1,
        };
        Feed {
            name: format!("{:x}{:x}", std::process::id(), started.as_micros()),
            shared: Mutex::new(shared),
            sender: broadcast::Sender::new(BACKLOG),
            slots: Arc::new(Semaphore::new(MAX_STREAMS)),
            primed: watch::Sender::new(false),
        }
    }
}

impl Feed {
    /// A new stream, following `ids` besides every other task; the next look tells those
    /// tasks' states as they are. Answered once the reader has its baseline, so a task queued
    /// after it is told. Given the id of the last event a stream read (`last`), what it missed
    /// since: the looks after that one, read with the receiver under one lock, so none is told
    /// twice or lost between them.
    pub async fn subscribe(
        self: &Arc<Self>,
        store: &SharedStore,
        ids: Vec<TaskId>,
        last: Option<&str>,
    ) -> Result<Subscription, ApiError> {
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
                // What the last reader told cannot be resumed from: between the two, nothing was seen.
                shared.first_of_reader = shared.seq + 1;
                shared.history.clear();
                shared.history_tasks = 0;
                tokio::spawn(read(self.clone(), store.clone()));
            }
            let resume = last.map_or(Resume::Fresh, |id| self.missed(&shared, id));
            Subscription { events, resume, unprimed: None, feed: self.clone(), ids, _slot: slot }
        };
        // A reader that cannot look (the database down) keeps trying: the stream opens meanwhile,
        // and is told it lagged once the reader has looked.
        let mut primed = self.primed.subscribe();
        let in_time = tokio::time::timeout(PRIMING, primed.wait_for(|p| *p)).await.is_ok_and(|p| p.is_ok());
        subscription.unprimed = (!in_time).then_some(primed);
        Ok(subscription)
    }

    /// The looks told after the one `last` names (`NAME-SEQ`), if all are kept.
    fn missed(&self, shared: &Shared, last: &str) -> Resume {
        let seq = last.strip_prefix(self.name.as_str()).and_then(|s| s.strip_prefix('-')).and_then(|s| s.parse().ok());
        let Some(seq) = seq.filter(|s: &u64| *s <= shared.seq && *s >= shared.first_of_reader) else {
            return Resume::Lost;
        };
        let oldest = shared.history.front().map_or(shared.seq + 1, |t| t.seq);
        if oldest > seq + 1 {
            return Resume::Lost;
        }
        Resume::Missed(shared.history.iter().filter(|t| t.seq > seq).cloned().collect())
    }

    /// An event's id: this feed's name and the look's number.
    pub fn event_id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.name)
    }

    /// Tell the streams a look, numbered and kept for those that resume.
    fn tell(&self, mut told: Told) {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.seq += 1;
        told.seq = shared.seq;
        let told = Arc::new(told);
        shared.history_tasks += told.changed.len() + told.fresh.len();
        shared.history.push_back(told.clone());
        while shared.history.len() > HISTORY || (shared.history_tasks > HISTORY_TASKS && shared.history.len() > 1) {
            if let Some(old) = shared.history.pop_front() {
                shared.history_tasks -= old.changed.len() + old.fresh.len();
            }
        }
        // None listening is no error (a reader lingering).
        let _ = self.sender.send(told);
    }

    /// Looks told since the server started (each one's number is its events' id).
    pub fn looks(&self) -> u64 {
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).seq
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
    let mut alone_since: Option<tokio::time::Instant> = None;
    loop {
        tick.tick().await;
        let (asked, fresh): (Vec<TaskId>, HashSet<TaskId>) = {
            let mut shared = feed.shared.lock().unwrap_or_else(|p| p.into_inner());
            let alone = feed.sender.receiver_count() == 0;
            alone_since = alone.then(|| alone_since.unwrap_or_else(tokio::time::Instant::now));
            if alone_since.is_some_and(|t| t.elapsed() >= LINGER) {
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
                    feed.tell(told);
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
