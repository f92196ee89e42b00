//! `add --many FILE`: tasks from JSON lines, every line checked before any is queued, then
//! queued in chunks with a progress count.
//!
//! A line is an object: `{"handler": "resize", "data": {...}}`, with optional `queue`,
//! `priority`, `max_retries`, `unique_key`, `queued_by` and `at` (RFC 3339). Blank lines are
//! skipped.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use serde::Deserialize;
use taskhost::model::NewTask;
use taskhost::App;

/// Tasks per transaction: a failure loses none of the chunks before it.
const CHUNK: usize = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    handler: String,
    #[serde(default = "empty_object")]
    data: serde_json::Value,
    queue: Option<String>,
    priority: Option<i32>,
    max_retries: Option<u32>,
    unique_key: Option<String>,
    queued_by: Option<String>,
    /// Read as `add --at` reads its value, to say what is wrong with it.
    at: Option<String>,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

impl Line {
    fn task(self) -> std::result::Result<NewTask, String> {
        let at = match &self.at {
            Some(at) => Some(super::args::parse_time(at).map_err(|e| format!("\"at\": {at:?}: {e}"))?),
            None => None,
        };
        let mut t = NewTask::new(self.handler, self.data.to_string());
        if let Some(q) = self.queue {
            t = t.with_queue(q);
        }
        if let Some(p) = self.priority {
            t = t.with_priority(p);
        }
        if let Some(n) = self.max_retries {
            t = t.with_max_retries(n);
        }
        t.unique_key = self.unique_key;
        t.queued_by = self.queued_by;
        t.scheduled_on = at;
        Ok(t)
    }
}

/// Read, check and queue the tasks of `path` (`-`: standard input).
pub async fn add_many(app: &App, path: &str, text: &str) -> Result<()> {
    let mut tasks = Vec::new();
    let mut line_of = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let parsed: Line = serde_json::from_str(line).with_context(|| format!("{path}, line {}: not a task", n + 1))?;
        tasks.push(parsed.task().map_err(|e| anyhow::anyhow!("{path}, line {}: {e}", n + 1))?);
        line_of.push(n + 1);
    }
    if app.client.validate(&tasks).await.is_err() {
        // Name the first line at fault; nothing is queued.
        for (t, n) in tasks.iter().zip(&line_of) {
            app.client.validate(std::slice::from_ref(t)).await.with_context(|| format!("{path}, line {n}"))?;
        }
    }
    let progress = std::io::stderr().is_terminal();
    let (mut created, mut existing, mut done) = (0, 0, 0);
    for chunk in tasks.chunks(CHUNK) {
        let added = app.client.add_many(chunk.to_vec()).await.with_context(|| {
            let next = line_of.get(done).copied().unwrap_or(0);
            format!(
                "queued {done} of {}; from line {next} on, nothing was queued",
                taskhost::text::count(tasks.len() as u64, "task")
            )
        })?;
        created += added.iter().filter(|a| a.created).count();
        existing += added.iter().filter(|a| !a.created).count();
        done += chunk.len();
        if progress {
            eprint!("\rqueued {done}/{}", tasks.len());
        }
    }
    if progress {
        eprintln!();
    }
    println!(
        "queued {} ({existing} already queued under their unique keys)",
        taskhost::text::count(created as u64, "task")
    );
    Ok(())
}
