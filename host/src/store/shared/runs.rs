//! Runs: finding the overdue ones and what keeps a worker busy. (Ending runs, putting them back
//! and keeping a stopped run's record: `store/transitions/runs.rs`.)

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::rows;
use super::super::sql::{args, Arg, RUNNING};
use super::super::transitions;
use crate::error::Result;
use crate::model::*;

/// One update a run, the later reports of a run overriding the earlier (a report without
/// percent or results keeps the earlier's): a batch statement that met one run twice would
/// keep either (PostgreSQL's `UPDATE … FROM`), not the latest. In task order, as outcomes are
/// written (`transitions::runs`): two writes of the same running tasks lock them in one order,
/// never each waiting for the other (PostgreSQL found such a deadlock, a second lost each time).
pub fn coalesce_progress(updates: &[ProgressUpdate]) -> Vec<ProgressUpdate> {
    let mut merged: Vec<ProgressUpdate> = Vec::with_capacity(updates.len());
    let mut at: std::collections::HashMap<RunId, usize> = std::collections::HashMap::with_capacity(updates.len());
    for u in updates {
        match at.get(&u.run_id) {
            Some(&i) => {
                let m = &mut merged[i];
                m.percent = u.percent.or(m.percent);
                if u.results.is_some() {
                    m.results.clone_from(&u.results);
                }
            }
            None => {
                at.insert(u.run_id, merged.len());
                merged.push(u.clone());
            }
        }
    }
    merged.sort_by_key(|u| u.task_id);
    merged
}

/// The columns of a running task's row naming its run as `(id, task_queue_id)`, for
/// [`transitions::runs::pairs`].
pub(super) const RUNNING_TASK_RUN: &str = "run_id AS id, id AS task_queue_id";

/// Time out up to `limit` running runs whose `timeout_on` is at or before `cutoff`.
pub async fn time_out_overdue<D: Dialect>(
    db: &D,
    cutoff: DateTime<Utc>,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<u64> {
    let overdue = format!(
        "SELECT {RUNNING_TASK_RUN} FROM task_queue WHERE last_status = {RUNNING} AND run_timeout_on <= $1 LIMIT $2{}",
        D::SKIP_LOCKED
    );
    let overdue = &overdue;
    transaction(db, |tx| {
        Box::pin(async move {
            let runs = transitions::runs::pairs(&db.rows(Some(&mut tx.tx), overdue, args![cutoff, limit]).await?)?;
            transitions::runs::time_out(db, &mut tx.tx, &runs, now, transitions::TIMED_OUT).await?;
            Ok(runs.len() as u64)
        })
    })
    .await
}

pub async fn running_of<D: Dialect>(db: &D, runner: RunnerId) -> Result<Vec<RunId>> {
    let sql = format!("SELECT run_id AS id FROM task_queue WHERE last_status = {RUNNING} AND run_runner_id = $1");
    db.rows(None, &sql, args![runner]).await?.iter().map(|r| rows::id(r, "id")).collect()
}

/// Whether a scheduled task of `queues` (as a worker names them: `*` is every queue) is due, a task of them is running, or a failed task
/// awaits its retry. Three probes, each of a partial index (on PostgreSQL an OR of
/// statuses scanned the whole table).
pub async fn has_due_work<D: Dialect>(
    db: &D,
    queues: &[String],
    handlers: Option<&[String]>,
    now: DateTime<Utc>,
) -> Result<bool> {
    let scheduled = transitions::is::<D>(TaskState::Scheduled);
    let awaiting_retry = transitions::is::<D>(TaskState::AwaitingRetry);
    let not_paused = transitions::NOT_PAUSED;
    let running = transitions::is::<D>(TaskState::Running);
    let of_handlers = if handlers.is_some() { " AND task_handler_class IN ($3)" } else { "" };
    let every = queues.iter().any(|q| q == crate::model::EVERY_QUEUE);
    let of_queues = if every { "" } else { " AND queue IN ($2)" };
    let sql = format!(
        "SELECT CASE WHEN
             EXISTS (SELECT 1 FROM task_queue
                     WHERE {scheduled} AND scheduled_on <= $1{of_queues} AND {not_paused}{of_handlers})
             OR EXISTS (SELECT 1 FROM task_queue WHERE {running}{of_queues} AND {not_paused})
             OR EXISTS (SELECT 1 FROM task_queue WHERE {awaiting_retry}{of_handlers})
         THEN 1 ELSE 0 END AS due"
    );
    let values = [Arg::Time(now), Arg::Texts(queues), Arg::Texts(handlers.unwrap_or_default())];
    let found = db.rows(None, &sql, &values).await?;
    Ok(match found.first() {
        Some(r) => rows::id(r, "due")? != 0,
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(task_id: TaskId, percent: Option<u8>) -> ProgressUpdate {
        ProgressUpdate { task_id, run_id: task_id * 10, percent, results: None }
    }

    #[test]
    fn reports_are_one_a_run_the_latest_kept_in_task_order() {
        let merged =
            coalesce_progress(&[report(9, Some(10)), report(3, Some(50)), report(9, Some(20)), report(3, None)]);
        let seen: Vec<(TaskId, Option<u8>)> = merged.iter().map(|u| (u.task_id, u.percent)).collect();
        assert_eq!(seen, [(3, Some(50)), (9, Some(20))]);
    }
}
