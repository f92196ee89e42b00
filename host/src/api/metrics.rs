//! `GET /metrics`: this process's counters and histograms ([`crate::metrics`]) and what the
//! database holds at each scrape: tasks by status; by handler and queue, unfinished tasks, dead
//! letters and runs ended (every worker's, so one scrape of `serve` sees them all); each queue's
//! depth, lag and pause; the live runners. A handler's or queue's series stay, at 0, once it has
//! had a run: an alert on them does not go silent when the queue empties.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

use super::{ApiError, ApiState};
use crate::metrics::{render_counter, render_gauge, Labels, MAX_SERIES};
use crate::stats::HandlerStats;

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
    Ok(([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out))
}

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
