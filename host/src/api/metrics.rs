//! `GET /metrics`: this process's counters and histograms ([`crate::metrics`]) and gauges read
//! from the database at each scrape: tasks by status, dead letters, each queue's depth, lag and
//! pause, and the live runners.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

use super::{ApiError, ApiState};
use crate::metrics::{render_gauge, MAX_SERIES};

pub(super) async fn scrape(State(state): State<Arc<ApiState>>) -> Result<impl IntoResponse, ApiError> {
    let store = state.client.store();
    let counts = store.counts().await?;
    let queues = state.client.queues().await?;
    let runners = store.live_runners().await?;
    let mut out = String::new();
    crate::metrics::global().render(&mut out);
    let by_status = [
        ("scheduled", counts.scheduled),
        ("running", counts.running),
        ("success", counts.success),
        ("error", counts.error),
        ("timeout", counts.timeout),
        ("cancelled", counts.cancelled),
    ];
    let samples: Vec<_> = by_status.iter().map(|(s, n)| (vec![("status", s.to_string())], *n as f64)).collect();
    render_gauge(&mut out, "taskhost_tasks", "Tasks in the database by the status of their latest run.", &samples);
    let dead = [(vec![], counts.dead as f64)];
    render_gauge(&mut out, "taskhost_dead_letters", "Tasks given up on, kept until replayed or deleted.", &dead);
    let queues = &queues[..queues.len().min(MAX_SERIES)];
    let mut depth = Vec::new();
    for q in queues {
        for (state, n) in [("due", q.due), ("later", q.later), ("running", q.running)] {
            depth.push((vec![("queue", q.name.clone()), ("state", state.to_string())], n as f64));
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
