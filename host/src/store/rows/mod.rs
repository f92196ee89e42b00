//! Rows read into records, once for every database (each gives its columns as [`Cells`]).

use std::str::FromStr;

use chrono::{DateTime, Utc};

use super::plumbing::{Cells, Col};
use super::types::RetryCandidate;
use crate::error::{Error, Result};
use crate::model::*;

pub(crate) mod claimed;
pub use claimed::{ClaimedTask, CLAIM_COLUMNS};

const TASKS: &str = "task_queue";
const RUNS: &str = "task_runs";
const RUNNERS: &str = "task_runners";

fn need<T>(table: &'static str, col: &str, v: Option<T>) -> Result<T> {
    v.ok_or_else(|| Error::CorruptRow { table, reason: format!("{col} is NULL") })
}

fn int<'c>(r: &impl Cells, table: &'static str, col: impl Into<Col<'c>>) -> Result<i64> {
    let col = col.into();
    need(table, col.name, r.int(col)?)
}

/// A count or number as u32 (negative → 0).
pub(crate) fn n32(v: i64) -> u32 {
    v.clamp(0, u32::MAX as i64) as u32
}

fn text<'c>(r: &impl Cells, table: &'static str, col: impl Into<Col<'c>>) -> Result<String> {
    let col = col.into();
    need(table, col.name, r.text(col)?)
}

fn time<'c>(r: &impl Cells, table: &'static str, col: impl Into<Col<'c>>) -> Result<DateTime<Utc>> {
    let col = col.into();
    need(table, col.name, r.time(col)?)
}

fn status<T: FromStr<Err = UnknownStatus>>(r: &impl Cells, table: &'static str, col: &str) -> Result<T> {
    text(r, table, col)?.parse().map_err(|e: UnknownStatus| Error::CorruptRow { table, reason: e.to_string() })
}

fn backoff(r: &impl Cells) -> Result<BackoffSettings> {
    Ok(BackoffSettings { base_ms: r.int("backoff_base_ms")?, max_ms: r.int("backoff_max_ms")? })
}

/// A task's state, from a row with its `last_status` and `gave_up_on`.
pub fn task_state(r: &impl Cells) -> Result<TaskState> {
    Ok(TaskState::of(status(r, TASKS, "last_status")?, r.time("gave_up_on")?.is_some()))
}

/// The columns of `task_queue` [`task`] reads: a listing's, without the texts of a run kept on the
/// row (a succeeded task's results and logs, up to megabytes each).
pub const TASK_COLUMNS: &str =
    "id, queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, last_status, \
     max_retries, task_runs_failed, snoozes, parent_id, depth, waiting_for, awaiting_signal, awaiting_until, queue, \
     priority, share_key, pinned_digest, unique_key, unique_until, unique_states, run_timeout, backoff_base_ms, \
     backoff_max_ms, gave_up_on";

pub fn task(r: &impl Cells) -> Result<Task> {
    let last_status = status(r, TASKS, "last_status")?;
    let gave_up_on = r.time("gave_up_on")?;
    let finished = TaskState::of(last_status, gave_up_on.is_some()).is_final();
    Ok(Task {
        state: TaskState::of(last_status, gave_up_on.is_some()),
        id: int(r, TASKS, "id")?,
        queued_on: time(r, TASKS, "queued_on")?,
        queued_by: r.text("queued_by_id")?,
        scheduled_on: time(r, TASKS, "scheduled_on")?,
        handler: text(r, TASKS, "task_handler_class")?,
        data: text(r, TASKS, "task_data")?,
        last_status,
        max_attempts: n32(int(r, TASKS, "max_retries")?),
        task_runs_failed: n32(int(r, TASKS, "task_runs_failed")?),
        snoozes: n32(int(r, TASKS, "snoozes")?),
        parent_id: r.int("parent_id")?,
        depth: n32(int(r, TASKS, "depth")?),
        waiting_for: n32(int(r, TASKS, "waiting_for")?),
        // Meaningful only while it is unfinished (its end leaves them as they were).
        awaiting_signal: r.text("awaiting_signal")?.filter(|_| !finished),
        awaiting_until: r.time("awaiting_until")?.filter(|_| !finished),
        queue: text(r, TASKS, "queue")?,
        priority: int(r, TASKS, "priority")?.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
        key: r.text("share_key")?,
        version: r.text("pinned_digest")?,
        unique_key: r.text("unique_key")?,
        unique_until: r.time("unique_until")?,
        unique_states: match r.text("unique_states")? {
            None => UniqueStates::Unfinished,
            Some(s) => {
                s.parse().map_err(|e| Error::CorruptRow { table: TASKS, reason: format!("unique_states: {e}") })?
            }
        },
        run_timeout_secs: r.int("run_timeout")?,
        backoff: backoff(r)?,
        gave_up_on,
        last_error: None,
    })
}

/// The `id` of each row.
pub fn ids<R: Cells>(found: &[R]) -> Result<Vec<i64>> {
    found.iter().map(|r| id(r, "id")).collect()
}

pub fn signal(r: &impl Cells) -> Result<Signal> {
    const SIGNALS: &str = "task_signals";
    Ok(Signal {
        id: int(r, SIGNALS, "id")?,
        task_id: int(r, SIGNALS, "task_id")?,
        name: text(r, SIGNALS, "name")?,
        data: text(r, SIGNALS, "data")?,
        sent_on: time(r, SIGNALS, "sent_on")?,
        read_by_run: r.int("read_by_run")?,
    })
}

pub fn run(r: &impl Cells) -> Result<Run> {
    Ok(Run {
        id: int(r, RUNS, "id")?,
        task_id: int(r, RUNS, "task_queue_id")?,
        attempt: n32(int(r, RUNS, "attempt")?),
        created_on: time(r, RUNS, "created_on")?,
        started_on: r.time("started_on")?,
        percents_completed: int(r, RUNS, "percents_completed")?.clamp(0, 100) as u8,
        finished_on: r.time("finished_on")?,
        results: r.text("results")?,
        status: status(r, RUNS, "status")?,
        error_code: r.text("error_code")?,
        error_message: r.text("error_message")?,
        runner_id: r.int("task_runner_id")?,
        duration_ms: r.int("duration_ms")?,
        component_digest: r.text("component_digest")?,
        fuel_used: r.int("fuel_used")?,
        logs: r.text("logs")?,
    })
}

/// A task in brief, from a row of [`BRIEF_COLUMNS`](super::shared::events::BRIEF_COLUMNS).
pub fn brief(r: &impl Cells) -> Result<super::types::Brief> {
    let state = task_state(r)?;
    Ok(super::types::Brief {
        id: int(r, TASKS, "id")?,
        queue: text(r, TASKS, "queue")?,
        handler: text(r, TASKS, "task_handler_class")?,
        state,
        attempt: n32(int(r, TASKS, "run_attempt")?),
        failures: n32(int(r, TASKS, "task_runs_failed")?),
        progress: (state == TaskState::Running)
            .then(|| r.int("run_percent"))
            .transpose()?
            .map(|p| p.unwrap_or(0).clamp(0, 100) as u8),
        finished_on: if state.is_final() { r.time("finished_on")? } else { None },
    })
}

/// The running run of a running task, from its task's row (see `store::transitions`).
pub fn running_run(r: &impl Cells) -> Result<Run> {
    let started_on = time(r, TASKS, "run_started_on")?;
    Ok(Run {
        id: int(r, TASKS, "run_id")?,
        task_id: int(r, TASKS, "id")?,
        attempt: n32(int(r, TASKS, "run_attempt")?),
        created_on: started_on,
        started_on: Some(started_on),
        percents_completed: r.int("run_percent")?.unwrap_or(0).clamp(0, 100) as u8,
        finished_on: None,
        results: r.text("run_results")?,
        status: RunStatus::Running,
        error_code: None,
        error_message: None,
        runner_id: r.int("run_runner_id")?,
        duration_ms: None,
        component_digest: None,
        fuel_used: None,
        logs: None,
    })
}

/// Whether a row of `task_queue` (its `last_status`, `gave_up_on` and `run_duration_ms`) holds a
/// run that succeeded: [`KEPT`](super::sql::KEPT), read in Rust.
pub fn is_kept(r: &impl Cells) -> Result<bool> {
    Ok(task_state(r)? == TaskState::Succeeded && r.int("run_duration_ms")?.is_some())
}

/// The run that succeeded kept on a succeeded task's row, if it is kept there (see
/// `store::transitions`; a task that succeeded before runs were kept so has its run in `task_runs`).
pub fn kept_run(r: &impl Cells) -> Result<Option<Run>> {
    if !is_kept(r)? {
        return Ok(None);
    }
    let Some(duration_ms) = r.int("run_duration_ms")? else { return Ok(None) };
    let started_on = time(r, TASKS, "run_started_on")?;
    Ok(Some(Run {
        id: int(r, TASKS, "run_id")?,
        task_id: int(r, TASKS, "id")?,
        attempt: n32(int(r, TASKS, "run_attempt")?),
        created_on: started_on,
        started_on: Some(started_on),
        percents_completed: 100,
        finished_on: r.time("finished_on")?,
        results: r.text("run_results")?,
        status: RunStatus::Success,
        error_code: None,
        error_message: None,
        runner_id: r.int("run_runner_id")?,
        duration_ms: Some(duration_ms),
        component_digest: r.text("run_digest")?,
        fuel_used: r.int("run_fuel_used")?,
        logs: r.text("run_logs")?,
    }))
}

pub fn runner(r: &impl Cells) -> Result<Runner> {
    Ok(Runner {
        id: int(r, RUNNERS, "id")?,
        process_id: n32(int(r, RUNNERS, "process_id")?),
        host_name: text(r, RUNNERS, "host_name")?,
        started_on: time(r, RUNNERS, "started_on")?,
        finished_on: r.time("finished_on")?,
        status: status(r, RUNNERS, "status")?,
        heartbeat_on: time(r, RUNNERS, "heartbeat_on")?,
        handlers: r.text("handlers")?.and_then(|t| serde_json::from_str(&t).ok()),
        queues: r.text("queues")?.and_then(|t| serde_json::from_str(&t).ok()),
    })
}

/// A failed task's facts for its retry. A row that cannot be read (a count written past
/// `taskhost_add` as text, on SQLite) gives its task up, said in the log: failing instead would
/// stop every retry behind it, pass after pass, as an unreadable claimed row would every claim.
pub fn retry_candidate(r: &impl Cells) -> Result<RetryCandidate> {
    let read = || -> Result<RetryCandidate> {
        Ok(RetryCandidate {
            task_id: int(r, TASKS, "id")?,
            failures: n32(int(r, TASKS, "task_runs_failed")?),
            max_attempts: n32(int(r, TASKS, "max_retries")?),
            backoff: backoff(r)?,
        })
    };
    read().or_else(|e| {
        let task_id = int(r, TASKS, "id")?;
        tracing::warn!(task_id, "a failed task's row cannot be read, so it is given up, not retried: {e}");
        Ok(RetryCandidate { task_id, failures: 1, max_attempts: 1, backoff: BackoffSettings::default() })
    })
}

/// The first column of a one-column row, as an integer.
pub fn id<'c>(r: &impl Cells, col: impl Into<Col<'c>>) -> Result<i64> {
    int(r, TASKS, col)
}
