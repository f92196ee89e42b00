//! How a statement written once is spelled for each database.
//!
//! Shared statements are written in PostgreSQL's spelling: `$1`, `$2` … placeholders (a number
//! may stand more than once), and `IN ($N)` or `NOT IN ($N)` where argument N is a list. Each
//! database's part passes them through [`render`], which hands it every placeholder in order:
//! PostgreSQL keeps the numbers and turns lists into `= ANY($N)`; SQLite keeps the numbers and
//! reads lists with `json_each`; MySQL has only `?`, so it binds arguments as they stand in the
//! text and expands lists into `?, ?, ?`.
//!
//! Status words are written into statements from their enums ([`SCHEDULED`] …), never bound:
//! a bound status would hide PostgreSQL's partial indexes (`WHERE status = 'running'`) from
//! its plans. Host error codes and messages are bound.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::model::{RunStatus, RunnerStatus};

/// One argument of a shared statement.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// An integer, or NULL.
    Int(Option<i64>),
    /// A text, or NULL.
    Text(Option<&'a str>),
    /// A time.
    Time(DateTime<Utc>),
    /// A time, or NULL.
    MaybeTime(Option<DateTime<Utc>>),
    /// A list, allowed only as `IN ($N)` or `NOT IN ($N)`.
    Ints(&'a [i64]),
    /// A list, allowed only as `IN ($N)` or `NOT IN ($N)`.
    Texts(&'a [String]),
    /// Bytes (a piece of a component).
    Bytes(&'a [u8]),
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(v: &'a [u8]) -> Self {
        Arg::Bytes(v)
    }
}
impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<u32> for Arg<'_> {
    fn from(v: u32) -> Self {
        Arg::Int(Some(i64::from(v)))
    }
}
impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Some(v))
    }
}
impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::Text(v)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(Some(v))
    }
}
impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Arg::Text(v.as_deref())
    }
}
impl From<Option<DateTime<Utc>>> for Arg<'_> {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Arg::MaybeTime(v)
    }
}
impl From<DateTime<Utc>> for Arg<'_> {
    fn from(v: DateTime<Utc>) -> Self {
        Arg::Time(v)
    }
}
impl<'a> From<&'a [i64]> for Arg<'a> {
    fn from(v: &'a [i64]) -> Self {
        Arg::Ints(v)
    }
}
impl<'a> From<&'a Vec<i64>> for Arg<'a> {
    fn from(v: &'a Vec<i64>) -> Self {
        Arg::Ints(v)
    }
}
impl<'a> From<&'a [String]> for Arg<'a> {
    fn from(v: &'a [String]) -> Self {
        Arg::Texts(v)
    }
}

/// `args![a, b, …]`: the arguments of a shared statement, `$1` first.
macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$($crate::store::sql::Arg::from($a)),*][..] };
}
pub(crate) use args;

/// `INSERT INTO` this to queue one task, with [`new_task_args`]: `$9` stands twice, as the
/// unique key is also the active one.
pub const NEW_TASK: &str = "task_queue (queued_on, queued_by_id, scheduled_on, task_handler_class, task_data,
         max_retries, queue, priority, unique_key, active_unique_key, run_timeout, backoff_base_ms, backoff_max_ms,
         parent_id, depth, unique_until, unique_states, share_key, pinned_digest)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)";

/// Whose child a task being added is: the task whose run queued it, and how deep it is then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage {
    /// The parent task.
    pub parent: crate::model::TaskId,
    /// The child's depth (its parent's and one).
    pub depth: i64,
}

/// The parent and depth columns of a task added under `lineage` (none: no one's, depth 0).
pub fn lineage_values(lineage: Option<Lineage>) -> (Option<i64>, i64) {
    (lineage.map(|l| l.parent), lineage.map_or(0, |l| l.depth))
}

/// The values of [`NEW_TASK`].
pub fn new_task_args(t: &crate::model::NewTask, now: DateTime<Utc>, lineage: Option<Lineage>) -> Vec<Arg<'_>> {
    let (parent, depth) = lineage_values(lineage);
    args![
        now,
        &t.queued_by,
        t.scheduled_on.unwrap_or(now),
        &t.handler,
        &t.data,
        t.max_attempts,
        &t.queue,
        i64::from(t.priority),
        &t.unique_key,
        t.run_timeout.map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
        t.backoff.base_ms,
        t.backoff.max_ms,
        parent,
        depth,
        // Bounded by `NewTask::check` (100 years); past the calendar, no period rather than a panic.
        t.unique_for.and_then(|p| now.checked_add_signed(chrono::Duration::from_std(p).ok()?)),
        // The default is written as none, as the tasks added before the column were.
        (t.unique_states != crate::model::UniqueStates::Unfinished).then(|| t.unique_states.as_str()),
        &t.key,
        &t.version,
    ]
    .to_vec()
}

/// A placeholder of a shared statement, as [`render`] meets it (indexes from 0).
#[derive(Debug, Clone, Copy)]
pub enum Slot {
    /// `$N`: argument N.
    One(usize),
    /// `IN ($N)` or `NOT IN ($N)`: the list argument N.
    List {
        /// Which argument.
        index: usize,
        /// `NOT IN`.
        negated: bool,
    },
}

/// Copy `sql`, letting `write` spell each placeholder (it appends to the text so far).
pub fn render(
    sql: &str,
    args: &[Arg<'_>],
    mut write: impl FnMut(&mut String, Slot) -> std::result::Result<(), String>,
) -> Result<String> {
    let bad = |reason: String| Error::invalid("statement", format!("{reason}: {sql}"));
    let mut out = String::with_capacity(sql.len() + 32);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..].bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push('$');
            rest = &rest[at + 1..];
            continue;
        }
        let n: usize = rest[at + 1..at + 1 + digits].parse().map_err(|_| bad("bad placeholder".into()))?;
        let index = n.checked_sub(1).filter(|i| *i < args.len()).ok_or_else(|| bad(format!("no argument ${n}")))?;
        rest = &rest[at + 1 + digits..];
        match args[index] {
            Arg::Ints(_) | Arg::Texts(_) => {
                // `IN ($N)`: the database's part writes the whole test.
                if !out.ends_with("IN (") || !rest.starts_with(')') {
                    return Err(bad(format!("list ${n} outside IN (${n})")));
                }
                out.truncate(out.len() - "IN (".len());
                let negated = out.ends_with("NOT ");
                if negated {
                    out.truncate(out.len() - "NOT ".len());
                }
                rest = &rest[1..];
                write(&mut out, Slot::List { index, negated }).map_err(bad)?;
            }
            _ => write(&mut out, Slot::One(index)).map_err(bad)?,
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A status word as an SQL string literal, for `format!`ting into statements.
#[derive(Debug, Clone, Copy)]
pub struct Lit(&'static str);

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.0)
    }
}

/// Statuses of runs, and of tasks (`last_status`).
pub const SCHEDULED: Lit = Lit(RunStatus::Scheduled.as_str());
/// See [`SCHEDULED`].
pub const RUNNING: Lit = Lit(RunStatus::Running.as_str());
/// See [`SCHEDULED`].
pub const SUCCESS: Lit = Lit(RunStatus::Success.as_str());
/// See [`SCHEDULED`].
pub const ERROR: Lit = Lit(RunStatus::Error.as_str());
/// See [`SCHEDULED`].
pub const TIMEOUT: Lit = Lit(RunStatus::Timeout.as_str());
/// See [`SCHEDULED`].
pub const CANCELLED: Lit = Lit(RunStatus::Cancelled.as_str());
/// A run's status only: see [`RunStatus::Snoozed`].
pub const SNOOZED: Lit = Lit(RunStatus::Snoozed.as_str());
/// A task's status only: see [`RunStatus::Waiting`].
pub const WAITING: Lit = Lit(RunStatus::Waiting.as_str());
/// A task that finished without being given up on: rotation deletes these by age, and this
/// condition is repeated word for word where the partial index `task_queue_done` must serve
/// (SQLite uses a partial index only when its condition appears in the query).
pub const DONE: &str = "last_status IN ('success', 'cancelled')";
/// The condition on `task_queue` (unaliased) of the tasks whose run that succeeded is kept on
/// their row (`transitions::kept_run`): `run_duration_ms` is set by a success and cleared by a
/// replay and a claim, NULL on a task that succeeded before runs were kept so (its run is a row of
/// `task_runs`). The status is asked too, so that a row an older version replayed (without
/// clearing it) is never taken for one.
pub const KEPT: &str = "(last_status = 'success' AND run_duration_ms IS NOT NULL)";
/// Statuses of runners.
pub const RUNNER_RUNNING: Lit = Lit(RunnerStatus::Running.as_str());
/// See [`RUNNER_RUNNING`].
pub const RUNNER_TIMEOUT: Lit = Lit(RunnerStatus::Timeout.as_str());

/// A list as the JSON array SQLite's `json_each` reads.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub fn json_list<T: serde::Serialize>(values: &[T]) -> std::result::Result<String, String> {
    serde_json::to_string(values).map_err(|e| e.to_string())
}

/// How a database bounds a read by the rows it walks.
#[derive(Debug, Clone, Copy)]
pub enum Walk {
    /// A subquery of the window's rows, the filter outside it.
    Nested {
        /// Whether the outer query keeps an `ORDER BY` (the planner sees it is met; SQLite
        /// sorts again, reading the whole window, and keeps the subquery's order without it).
        ordered: bool,
    },
    /// The window's end found first by the claim index alone (no task's row read), the read
    /// bounded by it: MariaDB (its subqueries with a LIMIT are read whole, and its `ROWS
    /// EXAMINED` counts a task once or three times as the plan goes, and other handlers' tasks).
    Bounded,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(sql: &str, args: &[Arg<'_>]) -> Result<String> {
        render(sql, args, |out, slot| {
            match slot {
                Slot::One(i) => out.push_str(&format!("${}", i + 1)),
                Slot::List { index, negated } => {
                    out.push_str(&format!("{}ANY(${})", if negated { "NOT " } else { "" }, index + 1))
                }
            }
            Ok(())
        })
    }

    #[test]
    fn placeholders_and_lists_reach_the_database_part_in_order() {
        let ids = vec![1i64, 2];
        let sql = numbered("UPDATE t SET a = $2 WHERE id IN ($1) AND b NOT IN ($1) AND c = $2", args![&ids, 5i64]);
        assert_eq!(sql.ok().as_deref(), Some("UPDATE t SET a = $2 WHERE id ANY($1) AND b NOT ANY($1) AND c = $2"));
    }

    #[test]
    fn a_list_outside_in_or_a_missing_argument_is_refused() {
        let ids = vec![1i64];
        assert!(numbered("SELECT $1", args![&ids]).is_err());
        assert!(numbered("SELECT $2", args![1i64]).is_err());
        assert_eq!(numbered("SELECT '$' || $1", args![1i64]).ok().as_deref(), Some("SELECT '$' || $1"));
    }

    #[test]
    fn statuses_are_written_as_quoted_words_from_their_enums() {
        assert_eq!(format!("status = {RUNNING}"), "status = 'running'");
        assert_eq!(format!("{RUNNER_TIMEOUT}"), "'timeout'");
    }
}
