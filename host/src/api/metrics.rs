//! `GET /metrics`: this process's counters and histograms ([`crate::metrics`]) and what the
//! database holds at each scrape: tasks by status; by handler and queue, unfinished tasks, dead
//! letters and runs ended (every worker's, so one scrape of `serve` sees them all); each queue's
//! depth, lag and pause; the live runners; each flow-control limit's values, runs in flight and
//! the due tasks it holds back; each waiting key's tasks and wait (the [`KEY_SERIES`]
//! longest-waiting keys: keys come from whoever queues, and a series a key is all a scraper
//! should be asked to keep). A handler's or queue's series stay, at 0, once it has
//! had a run: an alert on them does not go silent when the queue empties.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

use super::{ApiError, ApiState};
use crate::metrics::{render_counter, render_gauge, Labels, MAX_SERIES};
use crate::stats::HandlerStats;
use crate::store::{KeyInfo, LimitInfo};

pub(super) async fn scrape(State(state): State<Arc<ApiState>>) -> Result<impl IntoResponse, ApiError> {
    let store = state.client.store();
    let counts = store.counts().await?;
    let queues = state.client.queues().await?;
    let runners = store.live_runners().await?;
    let mut out = String::new();
    crate::metrics::global().render(&mut out);
    let by_status = [
        ("waiting", counts.waiting),
        ("scheduled", counts.scheduled),
        ("running", counts.running),
        ("success", counts.success),
        ("error", counts.error),
        ("timeout", counts.timeout),
        ("cancelled", counts.cancelled),
    ];
    let samples: Vec<_> = by_status.iter().map(|(s, n)| (vec![("status", s.to_string())], *n as f64)).collect();
    render_gauge(&mut out, "taskhost_tasks", "Tasks in the database by the status of their latest run.", &samples);
    let waiting = [(vec![], state.waits.waiting() as f64)];
    render_gauge(&mut out, "taskhost_api_waiting_requests", "Requests waiting for a task's end (`?wait=`).", &waiting);
    let streams = [(vec![], state.feed.streams() as f64)];
    render_gauge(&mut out, "taskhost_api_event_streams", "Event streams open (`/api/v1/events`).", &streams);
    let looks = [(vec![], state.feed.looks() as f64)];
    let help = "Looks of the event streams' reader that told something (the last one's number ends their events' ids).";
    render_counter(&mut out, "taskhost_api_event_looks_total", help, &looks);
    let stats = state.client.stats(None, None).await?;
    let stats = &stats[..stats.len().min(MAX_SERIES)];
    per_handler(&mut out, stats);
    let queues = &queues[..queues.len().min(MAX_SERIES)];
    let mut depth = Vec::new();
    for q in queues {
        for (state, n) in [("due", q.due), ("later", q.later), ("running", q.running)] {
            depth.push((vec![("queue", q.name.clone()), ("state", state.to_string())], n as f64));
        }
    }
    // A queue emptied is no longer listed; one that had runs keeps its series, at 0.
    let mut gone: Vec<&str> =
        stats.iter().map(|h| h.queue.as_str()).filter(|n| !queues.iter().any(|q| q.name == *n)).collect();
    gone.sort_unstable();
    gone.dedup();
    for name in gone {
        for state in ["due", "later", "running"] {
            depth.push((vec![("queue", name.to_string()), ("state", state.to_string())], 0.0));
        }
    }
    render_gauge(&mut out, "taskhost_queue_depth", "Unfinished tasks of a queue: due now, due later, running.", &depth);
    let now = state.client.now();
    let lag: Vec<_> = queues
        .iter()
        .map(|q| {
            let behind = q.oldest_due.map_or(0.0, |due| (now - due).num_milliseconds().max(0) as f64 / 1000.0);
            (vec![("queue", q.name.clone())], behind)
        })
        .collect();
    render_gauge(&mut out, "taskhost_queue_lag_seconds", "How long the longest-waiting due task has waited.", &lag);
    let paused: Vec<_> =
        queues.iter().map(|q| (vec![("queue", q.name.clone())], f64::from(u8::from(q.paused_on.is_some())))).collect();
    render_gauge(&mut out, "taskhost_queue_paused", "1 when the queue is paused.", &paused);
    let live = [(vec![], runners.len() as f64)];
    render_gauge(&mut out, "taskhost_runners", "Live runners (worker processes).", &live);
    let limits = state.client.limits().await?;
    let keys = state.client.keys(None, KEY_SERIES).await?;
    let waiting: Vec<KeyInfo> = keys.into_iter().filter(|k| k.due > 0).collect();
    flow(&mut out, &limits[..limits.len().min(MAX_SERIES)], &waiting, now);
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out))
}

/// The keys a scrape has series of, at most: the longest-waiting ones with due tasks.
pub const KEY_SERIES: u32 = 100;

/// By handler and queue: dead letters, unfinished tasks by state, runs ended by how.
fn per_handler(out: &mut String, stats: &[HandlerStats]) {
    let pair = |h: &HandlerStats| -> Labels { vec![("handler", h.handler.clone()), ("queue", h.queue.clone())] };
    let of = |h: &HandlerStats, key: &'static str, value: &str| -> Labels {
        let mut labels = pair(h);
        labels.push((key, value.to_string()));
        labels
    };
    let dead: Vec<_> = stats.iter().map(|h| (pair(h), h.tasks.dead as f64)).collect();
    render_gauge(out, "taskhost_dead_letters", "Tasks given up on, kept until replayed or deleted.", &dead);
    let waiting = stats.iter().flat_map(|h| {
        let t = &h.tasks;
        [
            ("waiting", t.waiting),
            ("scheduled", t.scheduled),
            ("running", t.running),
            ("awaiting_retry", t.awaiting_retry),
        ]
        .map(|(state, n)| (of(h, "state", state), n as f64))
    });
    let waiting: Vec<_> = waiting.collect();
    render_gauge(out, "taskhost_handler_tasks", "Unfinished tasks of a handler on a queue, by state.", &waiting);
    let ended = stats.iter().flat_map(|h| {
        let r = &h.runs;
        let endings = [("success", r.succeeded), ("error", r.failed), ("timeout", r.timed_out)];
        endings
            .into_iter()
            .chain([("cancelled", r.cancelled), ("snoozed", r.snoozed)])
            .map(|(outcome, n)| (of(h, "outcome", outcome), n as f64))
    });
    let ended: Vec<_> = ended.collect();
    let help = "Runs ended, by every worker, as the database's statistics count them.";
    render_counter(out, "taskhost_runs_ended_total", help, &ended);
}

/// Each limit (`limit="queue:NAME"`): its values as set, runs in flight, due tasks and those it
/// holds back now; each key (`queue`, `key`): its tasks by state and how long it has waited.
fn flow(out: &mut String, limits: &[LimitInfo], keys: &[KeyInfo], now: chrono::DateTime<chrono::Utc>) {
    let id = |l: &LimitInfo| format!("{}:{}", l.scope.as_str(), l.target);
    let name = |l: &LimitInfo| -> Labels { vec![("limit", id(l))] };
    let set = limits.iter().flat_map(|l| {
        let values = [
            ("max_running", l.max_running),
            ("max_running_per_key", l.max_running_per_key),
            ("weight", l.weight),
            ("rate_burst", l.rate_burst.filter(|_| l.rate.is_some())),
            ("rate_burst_per_key", l.rate_burst_per_key.filter(|_| l.rate_per_key.is_some())),
        ];
        let rate = l.rate.as_deref().and_then(per_second).map(|r| ("rate_per_second", r));
        let per_key = l.rate_per_key.as_deref().and_then(per_second).map(|r| ("rate_per_key_per_second", r));
        let fuel = l.fuel_per_turn.map(|f| ("fuel_per_turn", f as f64));
        values
            .into_iter()
            .filter_map(|(what, v)| v.map(|v| (what, f64::from(v))))
            .chain(rate)
            .chain(per_key)
            .chain(fuel)
            .map(move |(what, v)| (vec![("limit", id(l)), ("value", what.to_string())], v))
    });
    let set: Vec<_> = set.collect();
    render_gauge(out, "taskhost_limit", "A flow-control limit as set, by what it sets.", &set);
    let of =
        |f: fn(&LimitInfo) -> u64| -> Vec<(Labels, f64)> { limits.iter().map(|l| (name(l), f(l) as f64)).collect() };
    render_gauge(out, "taskhost_limit_running", "Runs in flight under a limit.", &of(|l| l.running));
    render_gauge(out, "taskhost_limit_due", "Due tasks under a limit (of queues not paused).", &of(|l| l.due));
    let help = "Due tasks a limit holds back now (beyond its room, or its keys' rooms under a cap or rate per key).";
    render_gauge(out, "taskhost_limit_held_back", help, &of(|l| l.held_back));
    let at = |k: &KeyInfo| -> Labels { vec![("queue", k.queue.clone()), ("key", k.key.clone())] };
    let tasks = keys.iter().flat_map(|k| {
        [("due", k.due), ("later", k.later), ("running", k.running)].map(|(state, n)| {
            let mut labels = at(k);
            labels.push(("state", state.to_string()));
            (labels, n as f64)
        })
    });
    let tasks: Vec<_> = tasks.collect();
    render_gauge(
        out,
        "taskhost_key_tasks",
        "Unfinished tasks of a key in a queue: due now, due later, running.",
        &tasks,
    );
    let wait = keys.iter().map(|k| {
        let waited = k.waiting_since.map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0);
        (at(k), waited)
    });
    let wait: Vec<_> = wait.collect();
    let help = "How long a key's longest-waiting due task has waited in a queue (the longest-waiting keys).";
    render_gauge(out, "taskhost_key_wait_seconds", help, &wait);
}

/// `N/PERIOD` (as [`LimitInfo::rate`] writes it) in starts a second.
fn per_second(rate: &str) -> Option<f64> {
    let (n, period) = rate.split_once('/')?;
    let seconds = humantime::parse_duration(period).ok()?.as_secs_f64();
    (seconds > 0.0).then(|| n.parse::<f64>().ok().map(|n| n / seconds)).flatten()
}
