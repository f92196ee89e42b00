//! Many final tasks as a plain read of each has it (the task, its runs, the tasks it runs after,
//! its newest signals), in four statements for them all (and a look in the ends for a task run
//! after that its success deleted) rather than five for each: what the
//! waits' watcher hands the requests waiting for tasks that ended together (`api/wait.rs`).

use std::collections::HashMap;

use super::super::dialect::Dialect;
use super::super::rows;
use super::super::sql::args;
use super::super::transitions::is_any;
use super::super::transitions::signals::LISTED;
use crate::error::Result;
use crate::model::{Run, Signal, TaskDetail, TaskId, TaskState};

/// Of `ids`, the tasks that are final, each as [`Store::get_task`](crate::store::Store::get_task),
/// [`Store::runs_of`](crate::store::Store::runs_of), [`Store::dependencies`](crate::store::Store::dependencies)
/// and [`Store::signals_of`](crate::store::Store::signals_of) give it.
pub async fn final_details<D: Dialect>(db: &D, ids: &[TaskId]) -> Result<Vec<TaskDetail>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // The final ones in the statement that reads their rows: one read where a watcher first
    // asked which had ended and then read those (twice the time, under a burst of ends).
    let ended = is_any::<D>(&TaskState::FINAL);
    let sql = format!("SELECT * FROM task_queue WHERE id IN ($1) AND ({ended}) ORDER BY id");
    let found = db.rows(None, &sql, args![ids]).await?;
    let tasks = found.iter().map(rows::task).collect::<Result<Vec<_>>>()?;
    // A run that succeeded is kept on its task's row (see `store::transitions`), after those in `task_runs`.
    let mut kept: HashMap<TaskId, Run> = HashMap::new();
    for r in &found {
        if let Some(run) = rows::kept_run(r)? {
            kept.insert(run.task_id, run);
        }
    }
    // The rest only for those (a final task has no running run).
    let found: Vec<TaskId> = tasks.iter().map(|t| t.id).collect();
    let ids = &found[..];
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut runs: HashMap<TaskId, Vec<Run>> = HashMap::new();
    let sql = "SELECT * FROM task_runs WHERE task_queue_id IN ($1) ORDER BY id";
    for r in &db.rows(None, sql, args![ids]).await? {
        let run = rows::run(r)?;
        runs.entry(run.task_id).or_default().push(run);
    }
    for (task, run) in kept {
        let list = runs.entry(task).or_default();
        if !list.iter().any(|e| e.id == run.id) {
            list.push(run);
        }
    }
    let mut after = super::super::transitions::deps::of_each(db, ids).await?;
    let mut signals: HashMap<TaskId, Vec<Signal>> = HashMap::new();
    let sql = format!(
        "SELECT * FROM (SELECT s.*, ROW_NUMBER() OVER (PARTITION BY task_id ORDER BY id DESC) AS newest
         FROM task_signals s WHERE task_id IN ($1)) x WHERE newest <= {LISTED} ORDER BY id"
    );
    for r in &db.rows(None, &sql, args![ids]).await? {
        let signal = rows::signal(r)?;
        signals.entry(signal.task_id).or_default().push(signal);
    }
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        let id = task.id;
        let detail = TaskDetail::new(task, runs.remove(&id).unwrap_or_default())
            .with_after(after.remove(&id).unwrap_or_default())
            .with_signals(signals.remove(&id).unwrap_or_default());
        out.push(detail);
    }
    Ok(out)
}
