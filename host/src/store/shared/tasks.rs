//! Adding tasks, reading them and their runs, counting them, and replaying a dead letter.

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg};
pub(crate) use super::super::transitions::add::{add_one, add_tasks_in, add_tasks_in_tx};
use super::super::transitions::{self, from, is};
use crate::error::{Error, Result};
use crate::model::*;

pub async fn get<D: Dialect>(db: &D, tx: Option<&mut TxOf<D>>, id: TaskId) -> Result<Option<Task>> {
    let found = db.rows(tx, "SELECT * FROM task_queue WHERE id = $1", args![id]).await?;
    found.first().map(rows::task).transpose()
}

/// The newest task's id, 0 for none: the primary key's last entry.
pub async fn newest_id<D: Dialect>(db: &D) -> Result<TaskId> {
    let found = db.rows(None, "SELECT COALESCE(MAX(id), 0) AS id FROM task_queue", &[]).await?;
    found.first().map_or(Ok(0), |r| rows::id(r, "id"))
}

/// A task's runs, oldest first: those ended, from `task_runs`, then the one on the task's row,
/// running or succeeded. (Read in that order, a run that ends in between is not missed: it is
/// found twice, and kept as it ended, or found running.)
pub async fn runs_of<D: Dialect>(db: &D, task_id: TaskId) -> Result<Vec<Run>> {
    let row = db.rows(None, "SELECT * FROM task_queue WHERE id = $1", args![task_id]).await?;
    let on_row = match row.first() {
        Some(r) if rows::task_state(r)? == TaskState::Running => Some(rows::running_run(r)?),
        Some(r) => rows::kept_run(r)?,
        None => None,
    };
    let found = db.rows(None, "SELECT * FROM task_runs WHERE task_queue_id = $1 ORDER BY id", args![task_id]).await?;
    let mut runs = found.iter().map(rows::run).collect::<Result<Vec<_>>>()?;
    if let Some(run) = on_row.filter(|r| !runs.iter().any(|e| e.id == r.id)) {
        runs.push(run);
    }
    Ok(runs)
}

/// Tasks matching a filter, oldest or newest first. Only the filter's own tests are in the statement, so
/// each is a plain comparison an index can serve.
pub async fn list<D: Dialect>(db: &D, f: &TaskFilter) -> Result<Vec<Task>> {
    // A dead letter's last error, from its latest run (runs are found by their task's index).
    let latest = |column| {
        format!("(SELECT r.{column} FROM task_runs r WHERE r.task_queue_id = task_queue.id ORDER BY r.id DESC LIMIT 1)")
    };
    // `--dead` and `state=dead` name the same tasks: both read their last error.
    let dead = f.dead || f.state == Some(TaskState::Dead);
    let mut sql = match dead {
        true => format!(
            "SELECT {}, {} AS last_error_code, {} AS last_error_message FROM task_queue WHERE 1 = 1",
            rows::TASK_COLUMNS,
            latest("error_code"),
            latest("error_message")
        ),
        false => format!("SELECT {} FROM task_queue WHERE 1 = 1", rows::TASK_COLUMNS),
    };
    let mut values: Vec<Arg<'_>> = Vec::new();
    let tests = [
        ("last_status", f.status.map(|s| s.as_str())),
        ("queue", f.queue.as_deref()),
        ("task_handler_class", f.handler.as_deref()),
    ];
    for (column, value) in tests {
        if let Some(v) = value {
            values.push(Arg::Text(Some(v)));
            sql.push_str(&format!(" AND {column} = ${}", values.len()));
        }
    }
    if f.dead {
        sql.push_str(&format!(" AND {}", is::<D>(TaskState::Dead)));
    }
    if let Some(state) = f.state {
        sql.push_str(&format!(" AND {}", is::<D>(state)));
    }
    if let Some(text) = f.text.as_deref() {
        values.push(Arg::Text(Some(text)));
        sql.push_str(&format!(" AND {}(task_data, ${}) > 0", D::POSITION, values.len()));
    }
    if let Some(parent) = f.parent {
        values.push(Arg::Int(Some(parent)));
        sql.push_str(&format!(" AND parent_id = ${}", values.len()));
    }
    if let Some(after) = f.after {
        values.push(Arg::Int(Some(after)));
        sql.push_str(&format!(" AND id {} ${}", if f.newest_first { "<" } else { ">" }, values.len()));
    }
    let order = if f.newest_first { "DESC" } else { "ASC" };
    values.push(Arg::Int(Some(f.limit.map(i64::from).unwrap_or(i64::MAX))));
    values.push(Arg::from(f.offset));
    sql.push_str(&format!(" ORDER BY id {order} LIMIT ${} OFFSET ${}", values.len() - 1, values.len()));
    let found = db.rows(None, &sql, &values).await?;
    let read = |r: &D::Row| -> Result<Task> {
        let mut task = rows::task(r)?;
        if dead {
            task.last_error = match (r.text("last_error_code")?, r.text("last_error_message")?) {
                (Some(code), Some(message)) => Some(format!("{code}: {message}")),
                (code, message) => code.or(message),
            };
        }
        Ok(task)
    };
    found.iter().map(read).collect()
}

pub async fn counts<D: Dialect>(db: &D) -> Result<QueueCounts> {
    let mut c = QueueCounts::default();
    let by_status =
        db.rows(None, "SELECT last_status, count(*) AS n FROM task_queue GROUP BY last_status", &[]).await?;
    for r in &by_status {
        let word = r.text("last_status")?.unwrap_or_default();
        let status =
            word.parse::<RunStatus>().map_err(|e| Error::CorruptRow { table: "task_queue", reason: e.to_string() })?;
        c.set(status, rows::id(r, "n")?.max(0) as u64);
    }
    let dead = format!("SELECT count(*) AS n FROM task_queue WHERE {}", is::<D>(TaskState::Dead));
    let dead = db.rows(None, &dead, &[]).await?;
    c.dead = match dead.first() {
        Some(r) => rows::id(r, "n")?.max(0) as u64,
        None => 0,
    };
    // Successes whose tasks were deleted (`transitions::ends`) count as succeeded tasks kept.
    let ends = format!("SELECT CAST(coalesce(sum(n), 0) AS {}) AS n FROM task_ends", D::INT);
    if let Some(r) = db.rows(None, &ends, &[]).await?.first() {
        c.success += rows::id(r, "n")?.max(0) as u64;
    }
    Ok(c)
}

/// Replay a finished task (a dead letter, a cancelled task, or a succeeded one to run it again): reset its failure
/// count and schedule it now, with new data when `data` is given; the attempt its next run will be.
pub async fn replay<D: Dialect>(db: &D, id: TaskId, data: Option<&str>, now: DateTime<Utc>) -> Result<u32> {
    let edit = format!("UPDATE task_queue SET task_data = $2 WHERE id = $1 AND {}", from::<D>(Transition::Replay));
    let edit = &edit;
    transaction(db, |tx| {
        Box::pin(async move {
            if let Some(data) = data {
                db.exec(Some(&mut tx.tx), edit, args![id, data]).await?;
            }
            // Its key, if another task holds it past that one's period, is let go for it.
            let key = db.rows(Some(&mut tx.tx), "SELECT unique_key FROM task_queue WHERE id = $1", args![id]).await?;
            let keys: Vec<String> =
                key.first().map(|r| r.text("unique_key")).transpose()?.flatten().into_iter().collect();
            transitions::add::let_lapsed_go::<D>(D::conn(&mut tx.tx), &keys, &[id], now).await?;
            let replayed = match transitions::tasks::replay(db, &mut tx.tx, &[id], now).await {
                Err(e) if e.is_unique_violation() => {
                    let reason = "another task holds the same unique key".to_string();
                    return Err(Error::CannotRetry { id, reason });
                }
                other => other?,
            };
            let run = match replayed {
                0 => None,
                _ => transitions::tasks::next_attempt(db, &mut tx.tx, id).await?,
            };
            let Some(run) = run else {
                let task = get(db, Some(&mut tx.tx), id).await?;
                return Err(match task {
                    None => Error::TaskNotFound(id),
                    Some(t) => Error::CannotRetry {
                        id,
                        reason: format!(
                            "it is {} (only finished tasks can be retried: succeeded, dead or cancelled)",
                            t.state
                        ),
                    },
                });
            };
            Ok(run)
        })
    })
    .await
}
