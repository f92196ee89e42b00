//! A claim's rows read into [`ClaimedTask`]s: by position, each row on its own.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{int, n32, text, time, TASKS};
use crate::error::Result;
use crate::model::*;
use crate::store::plumbing::{Cells, Col};

/// A task a claim has just marked running, before its run is known: the columns every claim
/// returns (`id`, handler, data, … `priority`, `scheduled_on`).
#[derive(Debug)]
pub struct ClaimedTask {
    pub task_id: TaskId,
    pub priority: i64,
    pub scheduled_on: DateTime<Utc>,
    pub handler: String,
    pub queue: String,
    pub data: String,
    pub queued_by: Option<String>,
    pub max_attempts: u32,
    pub failed: u32,
    pub snoozes: u32,
    pub depth: u32,
    pub backoff: BackoffSettings,
    pub run_timeout: Option<i64>,
    pub key: Option<String>,
    /// The version its run runs (`run_digest`, see [`crate::store::components`]).
    pub digest: Option<String>,
    /// Why its row could not be read, if it could not (see [`ClaimedTask::read_all`]).
    pub unreadable: Option<String>,
}

/// The columns of `task_queue` a claim returns, in this order.
pub const CLAIM_COLUMNS: &str = "id, task_handler_class, task_data, queued_by_id, max_retries, task_runs_failed, \
                                 run_timeout, backoff_base_ms, backoff_max_ms, priority, scheduled_on, queue, \
                                 snoozes, depth, share_key";

/// Where each column [`ClaimedTask::read`] reads sits in a claim's rows, found once a claim.
struct ClaimCols<'a> {
    id: Col<'a>,
    priority: Col<'a>,
    scheduled_on: Col<'a>,
    handler: Col<'a>,
    queue: Col<'a>,
    data: Col<'a>,
    queued_by: Col<'a>,
    max_attempts: Col<'a>,
    failed: Col<'a>,
    snoozes: Col<'a>,
    depth: Col<'a>,
    backoff_base_ms: Col<'a>,
    backoff_max_ms: Col<'a>,
    run_timeout: Col<'a>,
    key: Col<'a>,
    digest: Col<'a>,
}

impl ClaimCols<'static> {
    fn of<R>(r: &R) -> Self
    where
        R: sqlx::Row,
        for<'c> &'c str: sqlx::ColumnIndex<R>,
    {
        let at = |name| Col::found(r, name);
        ClaimCols {
            id: at("id"),
            priority: at("priority"),
            scheduled_on: at("scheduled_on"),
            handler: at("task_handler_class"),
            queue: at("queue"),
            data: at("task_data"),
            queued_by: at("queued_by_id"),
            max_attempts: at("max_retries"),
            failed: at("task_runs_failed"),
            snoozes: at("snoozes"),
            depth: at("depth"),
            backoff_base_ms: at("backoff_base_ms"),
            backoff_max_ms: at("backoff_max_ms"),
            run_timeout: at("run_timeout"),
            key: at("share_key"),
            digest: at("run_digest"),
        }
    }
}

impl ClaimedTask {
    fn read(r: &impl Cells, c: &ClaimCols) -> Result<Self> {
        Ok(ClaimedTask {
            task_id: int(r, TASKS, c.id)?,
            priority: int(r, TASKS, c.priority)?,
            scheduled_on: time(r, TASKS, c.scheduled_on)?,
            handler: text(r, TASKS, c.handler)?,
            queue: text(r, TASKS, c.queue)?,
            data: text(r, TASKS, c.data)?,
            queued_by: r.text(c.queued_by)?,
            max_attempts: n32(int(r, TASKS, c.max_attempts)?),
            failed: n32(int(r, TASKS, c.failed)?),
            snoozes: n32(int(r, TASKS, c.snoozes)?),
            depth: n32(int(r, TASKS, c.depth)?),
            backoff: BackoffSettings { base_ms: r.int(c.backoff_base_ms)?, max_ms: r.int(c.backoff_max_ms)? },
            run_timeout: r.int(c.run_timeout)?,
            key: r.text(c.key)?,
            digest: r.text(c.digest)?,
            unreadable: None,
        })
    }

    /// A claimed task whose row could not be read, for `reason`: what can be read of it is kept
    /// for its run's record, and the rest left empty; it is not run (see [`Self::read_all`]).
    fn unreadable(r: &impl Cells, c: &ClaimCols, now: DateTime<Utc>, reason: String) -> Result<Self> {
        let task_id = int(r, TASKS, c.id)?;
        tracing::warn!(task_id, "a claimed task's row cannot be read, so it is given up as unreadable-task: {reason}");
        let text = |col| r.text(col).ok().flatten();
        let count = |col| r.int(col).ok().flatten().map(n32).unwrap_or(0);
        Ok(ClaimedTask {
            task_id,
            priority: r.int(c.priority).ok().flatten().unwrap_or(0),
            // (Not read again: a time is what a driver may panic on, and say so once more.)
            scheduled_on: now,
            handler: text(c.handler).unwrap_or_default(),
            queue: text(c.queue).unwrap_or_default(),
            data: "{}".into(),
            queued_by: None,
            max_attempts: count(c.max_attempts).max(1),
            failed: count(c.failed),
            snoozes: count(c.snoozes),
            depth: count(c.depth),
            backoff: BackoffSettings::default(),
            run_timeout: None,
            key: text(c.key),
            digest: None,
            unreadable: Some(reason),
        })
    }

    /// Read claimed rows, in claim order (an `UPDATE … RETURNING` returns them in any order):
    /// the rows of one statement, or of statements alike, whose columns sit alike in each.
    ///
    /// A row that cannot be read (a value written past `taskhost_add`: text in an integer
    /// column on SQLite, a zero date on MariaDB, `-infinity` on PostgreSQL) fails its own task,
    /// not the claim: it comes back [`unreadable`](Self::unreadable), and its run ends
    /// as `unreadable-task`, not retried. Failing the claim would fail every claim of its queue
    /// for as long as the row is there. Only a row whose id cannot be read fails the claim.
    pub fn read_all<R>(rows: &[R], now: DateTime<Utc>) -> Result<Vec<Self>>
    where
        R: Cells + sqlx::Row,
        for<'c> &'c str: sqlx::ColumnIndex<R>,
    {
        let Some(first) = rows.first() else { return Ok(Vec::new()) };
        let cols = ClaimCols::of(first);
        let mut claimed = Vec::with_capacity(rows.len());
        for r in rows {
            claimed.push(match Self::read(r, &cols) {
                Ok(c) => c,
                Err(e) => Self::unreadable(r, &cols, now, e.to_string())?,
            });
        }
        claimed.sort_by_key(|c| (c.priority, c.scheduled_on, c.task_id));
        Ok(claimed)
    }

    /// When its run, started at `now`, times out.
    pub fn timeout_on(&self, now: DateTime<Utc>, default: Duration) -> DateTime<Utc> {
        timeout_on(now, self.run_timeout, default)
    }

    pub fn into_run(self, run_id: RunId, attempt: i64, now: DateTime<Utc>, default: Duration) -> ClaimedRun {
        ClaimedRun {
            run_id,
            task_id: self.task_id,
            attempt: n32(attempt).max(1),
            timeout_on: self.timeout_on(now, default),
            handler: self.handler,
            queue: self.queue,
            due_on: self.scheduled_on,
            data: self.data,
            queued_by: self.queued_by,
            max_attempts: self.max_attempts,
            task_runs_failed: self.failed,
            backoff: self.backoff,
            snoozes: self.snoozes,
            depth: self.depth,
            started_on: now,
            key: self.key,
            fuel_key: None,
            delete_on_success: false,
            digest: self.digest,
            unreadable: self.unreadable,
        }
    }
}

/// When a run started at `now` times out: its task's run timeout (seconds), else the default.
pub fn timeout_on(now: DateTime<Utc>, run_timeout_secs: Option<i64>, default: Duration) -> DateTime<Utc> {
    let timeout = run_timeout_secs.map(|s| Duration::from_secs(s.max(0) as u64)).unwrap_or(default);
    let timeout = chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::days(36500));
    now.checked_add_signed(timeout).unwrap_or(now)
}
