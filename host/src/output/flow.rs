//! The flow-control tables: queues with their limits, keys, limits.

use std::fmt::Write;

use super::{clip, waited};

/// `taskhost queues`: each queue's due, later and running tasks, its limits and the due tasks
/// they hold back, how far behind it is, the live workers that claim from it, and whether it is
/// paused.
pub fn queue_table(queues: &[taskhost::store::QueueInfo], now: chrono::DateTime<chrono::Utc>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:>8} {:>8} {:>8} {:>11} {:>10} {:>8} {:>10} {:>7}  PAUSED",
        "QUEUE", "DUE", "LATER", "RUNNING", "MAX RUNNING", "RATE", "HELD", "LAG", "WORKERS"
    );
    for q in queues {
        let paused = q.paused_on.map(|t| format!("paused since {}", t.format("%Y-%m-%d %H:%M:%S"))).unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<20} {:>8} {:>8} {:>8} {:>11} {:>10} {:>8} {:>10} {:>7}  {paused}",
            clip(&q.name, 20),
            q.due,
            q.later,
            q.running,
            q.max_running.map_or_else(|| "-".into(), |n| n.to_string()),
            q.rate_limit.as_deref().map_or_else(|| "-".into(), |r| r.split(' ').next().unwrap_or(r).to_string()),
            q.held_back.map_or_else(|| "-".into(), |n| n.to_string()),
            waited(q.oldest_due, now),
            q.served_by
        );
    }
    out
}

/// `taskhost queues --keys`: a line a key in a queue, the longest-waiting first.
pub fn key_table(keys: &[taskhost::store::KeyInfo], now: chrono::DateTime<chrono::Utc>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<32} {:<20} {:>8} {:>8} {:>8} {:>10} {:>6} {:>12}",
        "KEY", "QUEUE", "DUE", "LATER", "RUNNING", "WAIT", "WEIGHT", "FUEL/RUN"
    );
    for k in keys {
        let _ = writeln!(
            out,
            "{:<32} {:<20} {:>8} {:>8} {:>8} {:>10} {:>6} {:>12}",
            clip(&k.key, 32),
            clip(&k.queue, 20),
            k.due,
            k.later,
            k.running,
            waited(k.waiting_since, now),
            k.weight.unwrap_or(taskhost::model::DEFAULT_WEIGHT),
            k.fuel_per_run.map_or_else(|| "-".to_string(), |f| f.to_string())
        );
    }
    out
}

/// `taskhost limits`: a line a limit.
pub fn limit_table(limits: &[taskhost::store::LimitInfo]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<32} {:>11} {:>12} {:>6} {:>7} {:>12} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8}  SET BY",
        "LIMIT",
        "MAX RUNNING",
        "RATE",
        "BURST",
        "PER KEY",
        "RATE PER KEY",
        "WEIGHT",
        "FUEL/TURN",
        "ON SUCCESS",
        "RUNNING",
        "DUE",
        "HELD"
    );
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for l in limits {
        let by = match (l.set_by, l.updated_on) {
            (Some(by), Some(on)) => format!("{} at {}", by.as_str(), on.format("%Y-%m-%d %H:%M:%S")),
            (Some(by), None) => by.as_str().to_string(),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<32} {:>11} {:>12} {:>6} {:>7} {:>12} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8}  {by}",
            clip(&format!("{}:{}", l.scope.as_str(), l.target), 32),
            or_dash(l.max_running.map(|n| n.to_string())),
            or_dash(l.rate.clone()),
            or_dash(l.rate_burst.filter(|_| l.rate.is_some()).map(|n| n.to_string())),
            or_dash(l.max_running_per_key.map(|n| n.to_string())),
            // A burst per key, if any, after a `+`: 5/1s+2.
            or_dash(l.rate_per_key.as_ref().map(|r| match l.rate_burst_per_key {
                Some(b) if b > 0 => format!("{r}+{b}"),
                _ => r.clone(),
            })),
            or_dash(l.weight.map(|n| n.to_string())),
            or_dash(l.fuel_per_turn.map(|n| n.to_string())),
            l.on_success.as_str(),
            l.running,
            l.due,
            l.held_back
        );
    }
    out
}

/// What a limit holds, in words: `max running 3, rate 5/1s, …` (`none` for nothing).
pub fn limit_summary(l: &taskhost::model::Limit) -> String {
    let mut parts = Vec::new();
    if let Some(n) = l.max_running {
        parts.push(format!("max running {n}"));
    }
    if let Some(r) = l.rate {
        parts.push(format!("rate {r}"));
    }
    if let Some(n) = l.max_running_per_key {
        parts.push(format!("max running per key {n}"));
    }
    if let Some(r) = l.rate_per_key {
        parts.push(format!("rate per key {r}"));
    }
    if let Some(f) = l.fuel_per_turn {
        parts.push(format!("fuel per turn {f}"));
    }
    if let Some(w) = l.weight {
        parts.push(format!("weight {w}"));
    }
    if l.on_success != taskhost::model::OnSuccess::Keep {
        parts.push(format!("on success {}", l.on_success.as_str()));
    }
    if parts.is_empty() {
        return "none".into();
    }
    parts.join(", ")
}
