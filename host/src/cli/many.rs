//! `add --many FILE`: tasks from JSON lines, every line checked before any is queued, then
//! queued in chunks with a progress count.
//!
//! A line is a [`TaskInput`]: `{"handler": "resize", "data": {...}}`, with optional `queue`,
//! `priority`, `key`, `max_attempts`, `unique_key` (`unique_for`, `unique_states`), `queued_by`, `at`
//! (RFC 3339) and `run_timeout`.
//! Blank lines are skipped.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use taskhost::model::TaskInput;
use taskhost::App;

/// Tasks per transaction: a failure loses none of the chunks before it.
const CHUNK: usize = 10_000;

/// One line as a task; an error names the field at fault.
fn read_line(line: &str) -> std::result::Result<TaskInput, String> {
    let mut json = serde_json::Deserializer::from_str(line);
    let task = taskhost::api::read_fields(&mut json)?;
    json.end().map_err(|e| e.to_string())?;
    Ok(task)
}

/// Read, check and queue the tasks of `path` (`-`: standard input).
pub async fn add_many(app: &App, path: &str, text: &str) -> Result<()> {
    let mut tasks = Vec::new();
    let mut line_of = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let parsed: TaskInput =
            read_line(line).map_err(|e| anyhow::anyhow!("{path}, line {}: not a task: {e}", n + 1))?;
        tasks.push(parsed.task().map_err(|e| anyhow::anyhow!("{path}, line {}: {e}", n + 1))?);
        line_of.push(n + 1);
    }
    // Name the first line at fault; nothing is queued.
    if let Err((Some(i), e)) = app.client.validate_each(&tasks).await {
        return Err(anyhow::Error::new(e).context(format!("{path}, line {}", line_of[i])));
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
