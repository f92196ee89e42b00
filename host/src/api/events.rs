//! `GET /api/v1/events`: task events as Server-Sent Events, for the dashboard and any client that
//! would rather be told than poll. Each event is `event: task` with the task in brief as its data
//! (`{"id", "queue", "handler", "state", "attempt", "failures", "progress"?, "finished_on"?}`),
//! sent when the server's one reader (`feed.rs`) finds the task changed; `queue`, `handler` and
//! `task` (each a comma-separated list) keep only the tasks they name, and a stream asking for
//! tasks by id is first told their states as they are. When events were lost, the stream is told
//! `event: lagged` and goes on: `{"reason": "behind", "looks": N}` when it fell over the reader's
//! backlog behind (a client reading slower than events come), `{"reason": "burst"}` when more
//! changed at once than a look tells, `{"reason": "unavailable"}` when it opened before the
//! reader had read the database once (told once it has); a client then reads what it shows again. A comment every
//! 15 s keeps idle proxies from closing the stream.
//!
//! The last event of each look a stream is told carries an id (`id:`); a stream opened with the
//! header `Last-Event-ID` (a browser's `EventSource` sends it when it reconnects) is first told
//! the tasks of the looks it missed since that event, if the server still keeps them (the last
//! 256 looks, 20,000 tasks, and 30 s after the last stream closed: `feed.rs`), each as it was
//! then; otherwise it is told `lagged` with `{"reason": "resume"}`. A look torn by the disconnect
//! is told again whole. `taskhost serve` ends every stream when it
//! stops; a Rust application serving [`router`](super::router) itself ends them by adding the
//! layer `axum::Extension(taskhost::api::Stopping(rx))` and sending `true` on its channel
//! before its graceful shutdown (otherwise an open stream holds the shutdown).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use super::feed::{Resume, Said, Told};
use super::{ApiError, ApiState};
use crate::model::{TaskId, MAX_HANDLER_BYTES, MAX_QUEUE_BYTES};
use crate::store::{Brief, Look};

/// Tasks one stream may ask for by id.
pub const MAX_TASKS: usize = 100;
/// Queues, and handlers, one stream may name: each of a thousand streams holds its lists and
/// weighs every event against them, so a hostile query string (hundreds of KiB) may not.
pub const MAX_NAMES: usize = 100;
/// How often an idle stream is sent a comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Looks that told a stream nothing after which it is sent the last one's id alone (and its
/// first look's, whatever it told: a client has a place to resume from soon after it opens).
const QUIET_LOOKS: u32 = 64;

/// What a stream keeps: the tasks of these queues, handlers and ids (each list empty: all).
#[derive(Debug, Default)]
struct Filter {
    queues: HashSet<String>,
    handlers: HashSet<String>,
    tasks: HashSet<TaskId>,
}

impl Filter {
    fn parse(q: &BTreeMap<String, String>) -> Result<Filter, ApiError> {
        let mut f = Filter::default();
        let list = |v: &str| -> Vec<String> {
            v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
        };
        for (key, value) in q {
            let bad = |why: String| ApiError::bad("invalid", format!("{key}={value:?}: {why}"));
            // An empty list would keep everything: a caller whose list came out empty meant none.
            if list(value).is_empty() {
                return Err(bad("an empty list".into()));
            }
            match key.as_str() {
                "queue" => f.queues = names(list(value), "queues", MAX_QUEUE_BYTES).map_err(bad)?,
                "handler" => f.handlers = names(list(value), "handlers", MAX_HANDLER_BYTES).map_err(bad)?,
                "task" => {
                    let ids: Vec<String> = list(value);
                    if ids.len() > MAX_TASKS {
                        return Err(bad(format!("at most {MAX_TASKS} tasks")));
                    }
                    f.tasks = ids
                        .iter()
                        .map(|id| id.parse::<TaskId>().ok().filter(|n| *n > 0))
                        .collect::<Option<_>>()
                        .ok_or_else(|| bad("not a list of task ids".into()))?;
                }
                _ => return Err(bad("no such parameter (queue, handler, task)".into())),
            }
        }
        Ok(f)
    }

    fn keeps(&self, b: &Brief) -> bool {
        (self.queues.is_empty() || self.queues.contains(&b.queue))
            && (self.handlers.is_empty() || self.handlers.contains(&b.handler))
            && (self.tasks.is_empty() || self.tasks.contains(&b.id))
    }
}

/// A list of queue or handler names, bounded: at most [`MAX_NAMES`], none longer than any such
/// name can be (`longest` bytes).
fn names(list: Vec<String>, what: &str, longest: usize) -> Result<HashSet<String>, String> {
    if list.len() > MAX_NAMES {
        return Err(format!("at most {MAX_NAMES} {what}"));
    }
    if let Some(long) = list.iter().find(|n| n.len() > longest) {
        return Err(format!("a name of {} bytes: no {what} name is over {longest}", long.len()));
    }
    Ok(list.into_iter().collect())
}

/// Stream task events: when tasks are queued, start, make progress, fail a run and end.
#[utoipa::path(get, path = "/api/v1/events", operation_id = "events", tag = "tasks",
    params(
        ("queue" = Option<String>, Query, description = "Only tasks of these queues (comma-separated, at most 100)"),
        ("handler" = Option<String>, Query, description = "Only tasks of these handlers (comma-separated, at most 100)"),
        ("task" = Option<String>, Query, description = "Only these tasks (comma-separated ids, at most 100); their states as they are come first"),
        ("Last-Event-ID" = Option<String>, Header, description = "The id of the last event a stream read: the tasks of the looks it missed come first, if the server still keeps them (else `lagged` with `{\"reason\": \"resume\"}`)")),
    responses((status = 200, description = "Server-Sent Events: `event: task` with a task in brief as data; `event: lagged` with `{\"reason\": \"behind\", \"looks\": N}`, `{\"reason\": \"burst\"}`, `{\"reason\": \"unavailable\"}` or `{\"reason\": \"resume\"}` (events were lost: read again); the last event of each look has an `id`", content_type = "text/event-stream", body = Brief),
        (status = 501, description = "`no-streams`: this server serves one connection at a time (`--max-connections 1`), kept for requests answered at once", body = super::doc::ErrorBody), super::doc::Errors))]
pub(super) async fn stream(
    State(state): State<Arc<ApiState>>,
    super::params::Params(q): super::params::Params,
    stopping: Option<Extension<super::wait::Stopping>>,
    held: Option<Extension<super::server::LongHeld>>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let filter = Filter::parse(&q)?;
    let turn = held.map(|Extension(h)| h.take(false)).transpose()?;
    let store = state.client.store();
    if !filter.tasks.is_empty() {
        let found = store
            .glimpse(&Look { ids: filter.tasks.iter().copied().collect(), limit: MAX_TASKS as u32, ..Look::default() })
            .await?;
        if let Some(id) = filter.tasks.iter().find(|id| !found.asked.iter().any(|b| b.id == **id)) {
            return Err(crate::error::Error::TaskNotFound(*id).into());
        }
    }
    // Any text: only an id this server wrote, and still keeps, resumes (one not text: none does).
    let last = headers.get("last-event-id").map(|v| v.to_str().map_or("-", str::trim)).filter(|v| !v.is_empty());
    let mut subscription = state.feed.subscribe(store, filter.tasks.iter().copied().collect(), last).await?;
    let stopping = stopping.map(|Extension(s)| s.0);
    let feed = state.feed.clone();
    let mut stream =
        Stream { filter, told: HashMap::new(), feed, missed: VecDeque::new(), quiet: QUIET_LOOKS, _turn: turn };
    let mut queue = VecDeque::new();
    match std::mem::replace(&mut subscription.resume, Resume::Fresh) {
        Resume::Fresh => {}
        Resume::Missed(looks) => stream.missed = looks.into(),
        Resume::Lost => queue.push_back(Event::default().event("lagged").data(r#"{"reason":"resume"}"#)),
    }
    let start = (subscription, stream, stopping, queue);
    let events = futures::stream::unfold(start, |(mut sub, mut stream, mut stopping, mut queue)| async move {
        loop {
            if let Some(event) = queue.pop_front() {
                return Some((Ok::<Event, Infallible>(event), (sub, stream, stopping, queue)));
            }
            // What a resumed stream missed, a look at a time as it is read (the looks are the
            // feed's own, shared: a stream that stops reading holds no copy of them).
            if let Some(told) = stream.missed.pop_front() {
                queue.extend(stream.tell(&told));
                continue;
            }
            let got = tokio::select! {
                got = sub.events.recv() => got,
                _ = primed(&mut sub.unprimed), if sub.unprimed.is_some() => {
                    sub.unprimed = None;
                    queue.push_back(Event::default().event("lagged").data(r#"{"reason":"unavailable"}"#));
                    continue;
                }
                _ = stopped(&mut stopping) => return None,
            };
            match got {
                Ok(told) => queue.extend(stream.tell(&told)),
                Err(RecvError::Lagged(looks)) => queue.push_back(
                    Event::default().event("lagged").data(format!(r#"{{"reason":"behind","looks":{looks}}}"#)),
                ),
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let mut response = Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    // Proxies that buffer answers would hold the events back.
    response.headers_mut().insert("x-accel-buffering", axum::http::HeaderValue::from_static("no"));
    Ok(response)
}

/// An open stream: what it keeps, and the last state it told of each task it asked for by id.
struct Stream {
    filter: Filter,
    told: HashMap<TaskId, Brief>,
    feed: Arc<super::feed::Feed>,
    /// The looks a resumed stream missed, yet to be told.
    missed: VecDeque<Arc<Told>>,
    /// Looks told since the last id it was sent.
    quiet: u32,
    /// Its connection's turn to be held long, while it is open.
    _turn: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Stream {
    /// The events of a look for this stream: the changed tasks it keeps, and the tasks it asked
    /// for that the reader tells as they are, unless it told that already; the last with the
    /// look's id.
    fn tell<'a>(&'a mut self, told: &'a Told) -> impl Iterator<Item = Event> + 'a {
        let changed = told.changed.iter().filter(|s| self.filter.keeps(&s.brief));
        let fresh = told.fresh.iter().filter(|s| self.filter.keeps(&s.brief) && !self.filter.tasks.is_empty());
        let mut out: Vec<Event> = Vec::new();
        if told.lagged {
            out.push(Event::default().event("lagged").data(r#"{"reason":"burst"}"#));
        }
        for said in changed.chain(fresh) {
            let b = &said.brief;
            if self.filter.tasks.contains(&b.id) {
                if self.told.get(&b.id) == Some(b) {
                    continue;
                }
                self.told.insert(b.id, b.clone());
            }
            out.push(event(said));
        }
        self.quiet += 1;
        // An id alone after many looks that told it nothing (a filtered stream): its client's
        // place stays within the looks the server keeps (SSE: an id is taken without data).
        let last = out.pop().or_else(|| (self.quiet >= QUIET_LOOKS).then(Event::default));
        if let Some(last) = last {
            out.push(last.id(self.feed.event_id(told.seq)));
            self.quiet = 0;
        }
        out.into_iter()
    }
}

/// A task's event.
fn event(said: &Said) -> Event {
    Event::default().event("task").data(said.data())
}

/// Completes once the reader has looked (a stream opened before it could).
async fn primed(unprimed: &mut Option<watch::Receiver<bool>>) {
    match unprimed {
        Some(rx) => drop(rx.wait_for(|p| *p).await),
        None => std::future::pending().await,
    }
}

/// Completes once the server stops; never, for a router served otherwise.
async fn stopped(stopping: &mut Option<watch::Receiver<bool>>) {
    match stopping {
        Some(rx) => drop(rx.wait_for(|s| *s).await),
        None => std::future::pending().await,
    }
}
