//! What the event stream reads (`api/feed.rs`): the tasks that may have changed, in brief. Each
//! part is found by an index: the newest by the primary key, the running and those awaiting a
//! retry by their partial indexes (they are few), the finished by `finished_on`
//! (`task_queue_done`, and `task_queue_dead` for dead letters; MySQL's `task_queue_done` holds
//! both), the asked by id; the successes that deleted their tasks from `task_ends`, by
//! `finished_on` and by id (`transitions::ends`). No task's data is read.

use super::super::dialect::Dialect;
use super::super::plumbing::Cells;
use super::super::rows;
use super::super::sql::args;
use super::super::transitions::ends::END_COLUMNS;
use super::super::transitions::{is, is_any};
use super::super::types::{Brief, Glimpse, Look};
use crate::error::Result;
use crate::model::TaskState;

/// The columns [`rows::brief`] reads.
pub const BRIEF_COLUMNS: &str = "id, queue, task_handler_class, last_status, gave_up_on, run_attempt, run_percent, \
                                 task_runs_failed, finished_on";

/// Read what `look` asks, the finished last: a task that ends while the parts are read is found
/// there, or in a later look.
pub async fn glimpse<D: Dialect>(db: &D, look: &Look) -> Result<Glimpse> {
    let limit = look.limit.max(1);
    let read = |condition: String, order: &'static str| {
        format!("SELECT {BRIEF_COLUMNS} FROM task_queue WHERE {condition} ORDER BY {order} LIMIT {limit}")
    };
    let briefs = |found: Vec<D::Row>| found.iter().map(rows::brief).collect::<Result<Vec<Brief>>>();
    let mut glimpse = Glimpse::default();
    if let Some(newer_than) = look.newer_than {
        glimpse.new = briefs(db.rows(None, &read("id > $1".into(), "id"), args![newer_than]).await?)?;
    }
    if look.running {
        // In no order: ordered by id, SQLite scans the table for it rather than use the state's index.
        let unordered =
            |condition: String| format!("SELECT {BRIEF_COLUMNS} FROM task_queue WHERE {condition} LIMIT {limit}");
        glimpse.running = briefs(db.rows(None, &unordered(is::<D>(TaskState::Running)), &[]).await?)?;
        glimpse.retrying = briefs(db.rows(None, &unordered(is::<D>(TaskState::AwaitingRetry)), &[]).await?)?;
    }
    if !look.ids.is_empty() {
        glimpse.asked = briefs(db.rows(None, &read("id IN ($1)".into(), "id"), args![&look.ids[..]]).await?)?;
        // Those not there may have been deleted by their successes (`transitions::ends`).
        let missing: Vec<i64> =
            look.ids.iter().copied().filter(|id| !glimpse.asked.iter().any(|b| b.id == *id)).collect();
        if !missing.is_empty() {
            let sql = format!("SELECT {END_COLUMNS} FROM task_ends WHERE id IN ($1) ORDER BY id LIMIT {limit}");
            glimpse.asked.extend(ends(db.rows(None, &sql, args![&missing[..]]).await?)?);
            glimpse.asked.sort_by_key(|b| b.id);
        }
    }
    if let Some(after) = look.finished_after {
        let ended = is_any::<D>(&[TaskState::Succeeded, TaskState::Cancelled]);
        for condition in [ended, is::<D>(TaskState::Dead)] {
            let until = look.finished_until.map_or("", |_| " AND finished_on <= $2");
            let condition = format!("{condition} AND finished_on > $1{until}");
            let found = match look.finished_until {
                Some(t) => db.rows(None, &read(condition, "finished_on"), args![after, t]).await?,
                None => db.rows(None, &read(condition, "finished_on"), args![after]).await?,
            };
            let part = briefs(found)?;
            // A part cut at the limit was read up to its last end.
            if let Some(last) = part.last().and_then(|b| b.finished_on).filter(|_| part.len() >= limit as usize) {
                glimpse.finished_cut = Some(glimpse.finished_cut.map_or(last, |cut| cut.min(last)));
            }
            glimpse.finished.extend(part);
        }
        // The successes that deleted their tasks, from their ends, read as the parts above.
        let until = look.finished_until.map_or("", |_| " AND finished_on <= $2");
        let sql = format!(
            "SELECT {END_COLUMNS} FROM task_ends WHERE finished_on > $1{until} ORDER BY finished_on LIMIT {limit}"
        );
        let found = match look.finished_until {
            Some(t) => db.rows(None, &sql, args![after, t]).await?,
            None => db.rows(None, &sql, args![after]).await?,
        };
        let part = ends(found)?;
        if let Some(last) = part.last().and_then(|b| b.finished_on).filter(|_| part.len() >= limit as usize) {
            glimpse.finished_cut = Some(glimpse.finished_cut.map_or(last, |cut| cut.min(last)));
        }
        glimpse.finished.extend(part);
        glimpse.finished.sort_by_key(|b| b.finished_on);
    }
    if let Some((after, until)) = look.finished_window {
        // Summed over the same ranges of the same indexes, one row each: a reader learns whether
        // an end it has not seen was written late into the window without reading the window.
        let (mut n, mut ids, mut attempts) = (0u64, 0i64, 0i64);
        let parts = [is_any::<D>(&[TaskState::Succeeded, TaskState::Cancelled]), is::<D>(TaskState::Dead)];
        let parts = parts.into_iter().map(|c| ("task_queue", c)).chain([("task_ends", "1 = 1".to_string())]);
        for (table, condition) in parts {
            let sql = format!(
                "SELECT count(*) AS n, CAST(coalesce(sum(id), 0) AS {int}) AS ids,
                        CAST(coalesce(sum(run_attempt), 0) AS {int}) AS attempts FROM {table}
                 WHERE {condition} AND finished_on > $1 AND finished_on <= $2",
                int = D::INT
            );
            for r in &db.rows(None, &sql, args![after, until]).await? {
                n += rows::id(r, "n")?.max(0) as u64;
                ids = ids.wrapping_add(rows::id(r, "ids")?);
                attempts = attempts.wrapping_add(rows::id(r, "attempts")?);
            }
        }
        glimpse.window = Some((n, ids, attempts));
    }
    Ok(glimpse)
}

/// Tasks deleted by their successes, in brief, from rows of [`END_COLUMNS`].
fn ends<R: Cells>(found: Vec<R>) -> Result<Vec<Brief>> {
    let brief = |r: &R| -> Result<Brief> {
        Ok(Brief {
            id: rows::id(r, "id")?,
            queue: r.text("queue")?.unwrap_or_default(),
            handler: r.text("task_handler_class")?.unwrap_or_default(),
            state: TaskState::Succeeded,
            attempt: u32::try_from(r.int("run_attempt")?.unwrap_or(1)).unwrap_or(1),
            failures: 0,
            progress: None,
            finished_on: r.time("finished_on")?,
        })
    };
    found.iter().map(brief).collect()
}
