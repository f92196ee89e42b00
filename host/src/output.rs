//! Human-readable tables and JSON for the CLI.

use std::fmt::Write;
use std::path::Path;

use taskhost::model::{task_json, Run, RunLimits, Task};
use taskhost::plugins::LoadReport;
use taskhost::sandbox::{GuestOutcome, RunResult};

mod flow;
pub use flow::{key_table, limit_summary, limit_table, queue_table};

/// `s` on one line, at most `max` characters: control characters (a key's, a queue's: anyone's
/// who queues) are shown as spaces, never sent to the terminal.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let s: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if s.chars().count() <= max {
        return s;
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The latest run's results, or its error.
fn outcome_of(task: &Task, runs: &[Run]) -> String {
    let Some(last) = runs.iter().rev().find(|r| r.finished_on.is_some()) else {
        return String::new();
    };
    let text = match (&last.error_code, &last.results) {
        (Some(code), _) => format!("{code}: {}", last.error_message.as_deref().unwrap_or("")),
        (None, Some(r)) => r.clone(),
        (None, None) => String::new(),
    };
    if task.gave_up_on.is_some() {
        format!("[dead] {text}")
    } else {
        text
    }
}

/// A wait since `t` in whole seconds, in words (`-`: none).
pub(crate) fn waited(t: Option<chrono::DateTime<chrono::Utc>>, now: chrono::DateTime<chrono::Utc>) -> String {
    t.map(|t| (now - t).num_seconds().max(0) as u64)
        .map_or_else(|| "-".into(), |s| humantime::format_duration(std::time::Duration::from_secs(s)).to_string())
}

/// `taskhost stats`: a line a handler and queue; times in milliseconds.
pub fn stats_table(stats: &[taskhost::stats::HandlerStats]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<14} {:<9} {:>7} {:>7} {:>5} {:>8} {:>6} {:>7} {:>9} {:>7} {:>6} {:>8} {:>8} {:>8} {:>8} {:>10} {:>6} {:>7}  LAST RUN (UTC)",
        "HANDLER", "QUEUE", "WAITING", "RUNNING", "DEAD", "SUCCESS", "FAILED", "TIMEOUT", "CANCELLED", "SNOOZED", "FAIL%",
        "AVG MS", "P50 MS", "P95 MS", "MAX MS", "AVG FUEL", "1 MIN", "1 HOUR"
    );
    let ms = |v: f64| format!("{v:.1}");
    for s in stats {
        let (avg, p50, p95, max) = match s.duration_ms {
            Some(d) => (ms(d.avg), ms(d.p50), ms(d.p95), d.max.to_string()),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let fuel = s.fuel.map(|f| format!("{:.0}", f.avg)).unwrap_or_else(|| "-".into());
        let last = s.last_run.map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string()).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{:<14} {:<9} {:>7} {:>7} {:>5} {:>8} {:>6} {:>7} {:>9} {:>7} {:>6} {:>8} {:>8} {:>8} {:>8} {:>10} {:>6} {:>7}  {last}",
            clip(&s.handler, 14),
            clip(&s.queue, 9),
            s.tasks.waiting + s.tasks.scheduled + s.tasks.awaiting_retry,
            s.tasks.running,
            s.tasks.dead,
            s.runs.succeeded,
            s.runs.failed,
            s.runs.timed_out,
            s.runs.cancelled,
            s.runs.snoozed,
            format!("{:.1}", s.failure_rate * 100.0),
            avg,
            p50,
            p95,
            max,
            fuel,
            s.last_minute,
            s.last_hour
        );
    }
    out
}

pub fn task_table(rows: &[(Task, Vec<Run>)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6}  {:<14} {:<9} {:>4} {:<20} {:<14} {:>6} {:>4} {:>5}  RESULTS / LAST ERROR",
        "ID", "HANDLER", "QUEUE", "PRIO", "DUE (UTC)", "STATE", "FAILED", "RUNS", "PROG"
    );
    for (t, runs) in rows {
        let progress = runs.last().map(|r| format!("{}%", r.percents_completed)).unwrap_or_default();
        let _ = writeln!(
            out,
            "{:>6}  {:<14} {:<9} {:>4} {:<20} {:<14} {:>6} {:>4} {:>5}  {}",
            t.id,
            clip(&t.handler, 14),
            clip(&t.queue, 9),
            t.priority,
            t.scheduled_on.format("%Y-%m-%d %H:%M:%S").to_string(),
            t.state.as_str(),
            format!("{}/{}", t.task_runs_failed, t.max_attempts),
            runs.len(),
            progress,
            clip(&outcome_of(t, runs), 70)
        );
    }
    out
}

pub fn tasks_json(rows: &[(Task, Vec<Run>)], pretty: bool) -> serde_json::Result<String> {
    let v: Vec<_> = rows.iter().map(|(t, runs)| task_json(t, runs)).collect::<serde_json::Result<_>>()?;
    if pretty {
        serde_json::to_string_pretty(&v)
    } else {
        serde_json::to_string(&v)
    }
}

pub fn task_detail(t: &Task, runs: &[Run]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "task {}  handler {}  queue {}  priority {}", t.id, t.handler, t.queue, t.priority);
    let _ = writeln!(
        out,
        "  state       {}  (last run {}, {} failed in a row of {} attempts)",
        t.state, t.last_status, t.task_runs_failed, t.max_attempts
    );
    let _ = writeln!(out, "  queued      {} by {}", t.queued_on, t.queued_by.as_deref().unwrap_or("-"));
    let _ = writeln!(out, "  scheduled   {}", t.scheduled_on);
    if t.snoozes > 0 {
        let _ = writeln!(
            out,
            "  snoozed     {}",
            match t.snoozes {
                1 => "once".to_string(),
                n => format!("{n} times"),
            }
        );
    }
    if let Some(parent) = t.parent_id {
        let _ = writeln!(out, "  parent      task {parent} (queued by its run; {} deep)", t.depth);
    }
    if let Some(g) = t.gave_up_on {
        let _ = writeln!(out, "  gave up     {g} (dead letter: `taskhost retry {}` replays it)", t.id);
    }
    if let Some(k) = &t.key {
        let _ = writeln!(out, "  key         {k} (its share: taskhost limits)");
    }
    if let Some(v) = &t.version {
        let _ = writeln!(out, "  version     {v} (pinned: its runs run this version)");
    }
    if let Some(k) = &t.unique_key {
        let held = match t.unique_states {
            taskhost::model::UniqueStates::Unfinished => "while unfinished",
            taskhost::model::UniqueStates::Succeeded => "while unfinished or succeeded",
            taskhost::model::UniqueStates::Any => "in any state",
        };
        let until = t.unique_until.map(|u| format!(", at most until {u}")).unwrap_or_default();
        let _ = writeln!(out, "  unique key  {k} (kept {held}{until})");
    }
    let _ = writeln!(out, "  data        {}", clip(&t.data, 200));
    for r in runs {
        let _ = writeln!(out, "run {} (attempt {}): {}  {}%", r.id, r.attempt, r.status, r.percents_completed);
        if let Some(s) = r.started_on {
            let _ =
                writeln!(out, "  started     {s} by runner {}", r.runner_id.map(|i| i.to_string()).unwrap_or_default());
        }
        if let Some(f) = r.finished_on {
            let _ = writeln!(out, "  finished    {f} ({} ms)", r.duration_ms.unwrap_or(0));
        }
        if let (Some(c), Some(source)) = (&r.error_code, r.error_source()) {
            let from = match source {
                taskhost::sandbox::ErrorSource::Host => "host",
                taskhost::sandbox::ErrorSource::Guest => "handler",
            };
            let message = taskhost::text::printable(r.error_message.as_deref().unwrap_or(""));
            let _ = writeln!(out, "  error       {c} (from the {from}): {message}");
        }
        if let Some(res) = &r.results {
            let _ = writeln!(out, "  results     {}", clip(res, 500));
        }
        if let Some(d) = &r.component_digest {
            let _ = writeln!(out, "  component   sha256:{d}  fuel used {}", r.fuel_used.unwrap_or(0));
        }
        if let Some(l) = &r.logs {
            for line in l.lines().take(20) {
                let _ = writeln!(out, "  log         {}", taskhost::text::one_line(line));
            }
        }
    }
    out
}

/// The plugins as loaded, with each handler's `max_running` from the operator's file.
pub fn plugin_table(reports: &[LoadReport], dir: &Path, limits: &RunLimits) -> String {
    let mut out = String::new();
    if reports.is_empty() {
        let _ = writeln!(out, "no plugins (*.wasm) in {}", dir.display());
        return out;
    }
    let _ = writeln!(out, "{:<16} {:<18} {:>9} {:>11}  STATUS", "PLUGIN", "SHA256", "LOAD", "MAX RUNNING");
    for r in reports {
        let digest = r.digest.as_deref().map(|d| format!("{}…", &d[..16.min(d.len())])).unwrap_or_default();
        let load = format!("{:.0?}{}", r.load_time, if r.cached { "*" } else { "" });
        let status = match &r.status {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("unusable: {}", clip(e, 200)),
        };
        let max =
            limits.handlers.get(&r.name).and_then(|l| l.max_running).map_or_else(|| "-".into(), |n| n.to_string());
        let _ = writeln!(out, "{:<16} {:<18} {:>9} {:>11}  {}", clip(&r.name, 16), digest, load, max, status);
    }
    let _ = writeln!(out, "(* = compiled code loaded from the cache)");
    out
}

pub fn plugins_json(reports: &[LoadReport], limits: &RunLimits) -> serde_json::Result<String> {
    let v: Vec<_> = reports
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name, "sha256": r.digest, "ok": r.status.is_ok(),
                "error": r.status.as_ref().err(), "cached": r.cached,
                "load_ms": (r.load_time.as_secs_f64() * 10_000.0).round() / 10.0,
                "max_running": limits.handlers.get(&r.name).and_then(|l| l.max_running),
                "rate_limit": limits.handlers.get(&r.name).and_then(|l| l.rate).map(|r| r.to_string()),
            })
        })
        .collect();
    serde_json::to_string_pretty(&v)
}

pub fn run_once(r: &RunResult) -> String {
    let mut out = String::new();
    match &r.outcome {
        GuestOutcome::Success(res) => {
            let _ = writeln!(out, "success: {}", res.as_deref().unwrap_or("(no results)"));
        }
        GuestOutcome::Failed(f) => {
            let _ = writeln!(
                out,
                "failed: {} ({}): {}",
                f.code,
                if f.retryable { "retryable" } else { "not retryable" },
                f.message
            );
        }
        GuestOutcome::Stopped => out.push_str("stopped before it ended\n"),
        GuestOutcome::Snoozed(after) => {
            let _ = writeln!(out, "snoozed: a queued task would be due again in {}", taskhost::text::duration(*after));
        }
        GuestOutcome::Awaiting(wait) => {
            let name = taskhost::text::one_line(&wait.name);
            let timeout = taskhost::text::duration(wait.timeout);
            let _ = writeln!(
                out,
                "waits for the signal {name:?}: a queued task would be due when it is sent, or in {timeout}"
            );
        }
    }
    let _ = writeln!(out, "progress {}%  fuel {}  time {:.1?}", r.report.percent.unwrap_or(0), r.fuel_used, r.elapsed);
    for c in &r.children {
        let _ = writeln!(out, "queued (not written: no database here) {} {}", c.task.handler, clip(&c.task.data, 200));
    }
    for line in r.report.logs().unwrap_or_default().lines() {
        let _ = writeln!(out, "log {line}");
    }
    out
}

/// A task's signals for `show`: the one it awaits, then those sent, newest last.
pub fn signals(t: &Task, signals: &[taskhost::model::Signal]) -> String {
    let mut out = String::new();
    if let (Some(name), Some(until), false) = (&t.awaiting_signal, t.awaiting_until, t.state.is_final()) {
        let name = taskhost::text::one_line(name);
        let _ = writeln!(out, "awaits      signal {name:?} until {}", until.format("%Y-%m-%d %H:%M:%S UTC"));
    }
    for s in signals {
        let read = match s.read_by_run {
            Some(run) => format!("read by run {run}"),
            None => "unread".to_string(),
        };
        let (name, data) = (taskhost::text::one_line(&s.name), taskhost::text::one_line(&s.data));
        let sent = s.sent_on.format("%Y-%m-%d %H:%M:%S");
        let _ = writeln!(out, "signal      {name:?} sent {sent}, {read}: {}", clip(&data, 200));
    }
    out
}
