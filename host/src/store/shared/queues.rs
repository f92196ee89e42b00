//! Queues: pausing and resuming them, and what each holds.

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::Cells;
use super::super::rows;
use super::super::sql::args;
use super::super::transitions::{is, is_any};
use super::super::types::QueueInfo;
use crate::error::Result;
use crate::model::TaskState;

/// Pause `queue`; false when it was paused already.
pub async fn pause<D: Dialect>(db: &D, queue: &str, now: DateTime<Utc>) -> Result<bool> {
    let sql = "INSERT INTO task_queue_pauses (queue, paused_on) VALUES ($1, $2)";
    match db.exec(None, sql, args![queue, now]).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_unique_violation() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Resume `queue`; false when it was not paused.
pub async fn resume<D: Dialect>(db: &D, queue: &str) -> Result<bool> {
    transaction(db, |tx| {
        Box::pin(async move {
            let resumed =
                db.exec(Some(&mut tx.tx), "DELETE FROM task_queue_pauses WHERE queue = $1", args![queue]).await? > 0;
            if resumed {
                db.notify_tasks(&mut tx.tx).await?;
            }
            Ok(resumed)
        })
    })
    .await
}

pub async fn paused<D: Dialect>(db: &D) -> Result<Vec<String>> {
    let found = db.rows(None, "SELECT queue FROM task_queue_pauses ORDER BY queue", &[]).await?;
    found.iter().map(|r| Ok(r.text("queue")?.unwrap_or_default())).collect()
}

/// The queues that hold scheduled tasks (due or not, paused or not), by name, at most `limit`:
/// what a worker of every queue claims from. One index seek a queue (a loose scan of the claim
/// index), however many tasks each holds.
pub async fn scheduled_names<D: Dialect>(db: &D, limit: u32) -> Result<Vec<String>> {
    let scheduled = is::<D>(TaskState::Scheduled);
    let sql = if D::LOOSE_DISTINCT {
        format!("SELECT DISTINCT queue AS name FROM task_queue WHERE {scheduled} ORDER BY queue LIMIT $1")
    } else {
        format!(
            "WITH RECURSIVE q (name) AS (
             SELECT min(queue) FROM task_queue WHERE {scheduled}
             UNION ALL
             SELECT (SELECT min(queue) FROM task_queue WHERE {scheduled} AND queue > q.name)
             FROM q WHERE q.name IS NOT NULL)
         SELECT name FROM q WHERE name IS NOT NULL LIMIT $1"
        )
    };
    let found = db.rows(None, &sql, args![limit]).await?;
    found.iter().map(|r| Ok(r.text("name")?.unwrap_or_default())).collect()
}

/// Every queue that holds unfinished tasks or is paused, by name.
pub async fn list<D: Dialect>(db: &D, now: DateTime<Utc>) -> Result<Vec<QueueInfo>> {
    let scheduled = is::<D>(TaskState::Scheduled);
    let running = is::<D>(TaskState::Running);
    let sql = format!(
        "SELECT queue,
             count(CASE WHEN {scheduled} AND scheduled_on <= $1 THEN 1 END) AS due,
             count(CASE WHEN {scheduled} AND scheduled_on > $1 THEN 1 END) AS later,
             count(CASE WHEN {running} THEN 1 END) AS running,
             min(CASE WHEN {scheduled} AND scheduled_on <= $1 THEN scheduled_on END) AS oldest_due
         FROM task_queue WHERE {} GROUP BY queue",
        is_any::<D>(&[TaskState::Scheduled, TaskState::Running])
    );
    let mut queues = Vec::new();
    for r in &db.rows(None, &sql, args![now]).await? {
        queues.push(QueueInfo {
            name: r.text("queue")?.unwrap_or_default(),
            due: count(r, "due")?,
            later: count(r, "later")?,
            running: count(r, "running")?,
            oldest_due: r.time("oldest_due")?,
            paused_on: None,
            max_running: None,
            rate_limit: None,
            held_back: None,
            served_by: 0,
        });
    }
    let pauses = db.rows(None, "SELECT queue, paused_on FROM task_queue_pauses", &[]).await?;
    for r in &pauses {
        let name = r.text("queue")?.unwrap_or_default();
        let paused_on = r.time("paused_on")?;
        match queues.iter_mut().find(|q| q.name == name) {
            Some(q) => q.paused_on = paused_on,
            None => queues.push(QueueInfo { paused_on, ..QueueInfo::empty(name) }),
        }
    }
    let live = super::runners::live(db).await?;
    for q in &mut queues {
        q.served_by = live.iter().filter(|r| r.claims_from(&q.name)).count() as u32;
    }
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(queues)
}

fn count(r: &impl Cells, col: &str) -> Result<u64> {
    Ok(rows::id(r, col)?.max(0) as u64)
}
