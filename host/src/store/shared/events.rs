//! What the event stream reads (`api/feed.rs`): the tasks that may have changed, in brief. Each
//! part is found by an index: the newest by the primary key, the running and those awaiting a
//! retry by their partial indexes (they are few), the finished by `finished_on`
//! (`task_queue_done`, and `task_queue_dead` for dead letters; MySQL's `task_queue_done` holds
//! both), the asked by id; the successes that deleted their tasks from their rows of `task_ends`,
//! by `finished_on` and by id (`transitions::ends`). No task's data is read.

use super::super::dialect::Dialect;
use super::super::rows;
use super::super::sql::args;
use super::super::transitions::ends::{EndsRow, Lookup};
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
        // A statement a span of ids (`ends::SPAN`): those followed are mostly a few spans.
        for lookup in Lookup::of(&missing).into_iter().take(limit as usize) {
            for row in lookup.found(&db.rows(None, lookup.sql(), &lookup.args()).await?)? {
                glimpse.asked.extend(briefs_of(&row));
            }
        }
        glimpse.asked.sort_by_key(|b| b.id);
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
        finished_ends(db, look, after, limit, &mut glimpse).await?;
        glimpse.finished.sort_by_key(|b| b.finished_on);
    }
    if let Some((after, until)) = look.finished_window {
        // Summed over the same ranges of the same indexes, one row each: a reader learns whether
        // an end it has not seen was written late into the window without reading the window.
        let (mut n, mut ids, mut attempts) = (0u64, 0i64, 0i64);
        let parts = [is_any::<D>(&[TaskState::Succeeded, TaskState::Cancelled]), is::<D>(TaskState::Dead)];
        let parts = parts.into_iter().map(|c| (c, "count(*)", "id", "run_attempt", "task_queue"));
        // And the ends of tasks deleted by their successes, each at its first attempt.
        let parts = parts.chain([("1 = 1".to_string(), "sum(n)", "ids_sum", "n", "task_ends")]);
        for (condition, count, id, attempt, table) in parts {
            let sql = format!(
                "SELECT CAST(coalesce({count}, 0) AS {int}) AS n, CAST(coalesce(sum({id}), 0) AS {int}) AS ids,
                        CAST(coalesce(sum({attempt}), 0) AS {int}) AS attempts FROM {table}
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

/// The successes that deleted their tasks, from their ends (a row a batch, each end at the
/// batch's time), read as [`glimpse`]'s finished parts: whole rows, until `limit`'s worth of ends.
async fn finished_ends<D: Dialect>(
    db: &D,
    look: &Look,
    after: chrono::DateTime<chrono::Utc>,
    limit: u32,
    glimpse: &mut Glimpse,
) -> Result<()> {
    let until = look.finished_until.map_or("", |_| " AND finished_on <= $2");
    let sql = format!(
        "SELECT finished_on, queue, task_handler_class, ids FROM task_ends WHERE finished_on > $1{until}
         ORDER BY finished_on LIMIT {limit}"
    );
    let found = match look.finished_until {
        Some(t) => db.rows(None, &sql, args![after, t]).await?,
        None => db.rows(None, &sql, args![after]).await?,
    };
    let (mut told, mut last) = (0usize, None);
    for r in &found {
        let row = EndsRow::read(r)?;
        told += row.ids.len();
        last = Some(row.finished_on);
        glimpse.finished.extend(briefs_of(&row));
        if told >= limit as usize {
            break;
        }
    }
    if let Some(last) = last.filter(|_| told >= limit as usize || found.len() >= limit as usize) {
        glimpse.finished_cut = Some(glimpse.finished_cut.map_or(last, |cut| cut.min(last)));
    }
    Ok(())
}

/// The tasks of a row of ends, in brief: each succeeded at its first attempt, when its batch ended.
fn briefs_of(row: &EndsRow) -> impl Iterator<Item = Brief> + '_ {
    row.ids.iter().map(move |&id| Brief {
        id,
        queue: row.queue.clone(),
        handler: row.handler.clone(),
        state: TaskState::Succeeded,
        attempt: 1,
        failures: 0,
        progress: None,
        finished_on: Some(row.finished_on),
    })
}
