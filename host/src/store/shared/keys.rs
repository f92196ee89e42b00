//! What each key holds (fair shares, docs/queue.md): its due, later and running tasks in each
//! queue and how long its longest-waiting due task has waited, and how many due tasks a
//! queue's cap per key holds back now.

use chrono::{DateTime, Utc};

use std::collections::BTreeMap;

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::Cells;
use super::super::rows;
use super::super::sql::args;
use super::super::transitions::{is, is_any, NOT_PAUSED};
use super::super::types::KeyInfo;
use crate::error::Result;
use crate::model::{LimitScope, TaskState};

/// The keys with unfinished tasks (of `queue`, or of every queue), the longest-waiting first,
/// at most `limit`. A keyed task's due time is its turn, which may read earlier than its
/// queueing: it has waited since the later of the two.
pub async fn list<D: Dialect>(db: &D, queue: Option<&str>, now: DateTime<Utc>, limit: u32) -> Result<Vec<KeyInfo>> {
    let scheduled = is::<D>(TaskState::Scheduled);
    let running = is::<D>(TaskState::Running);
    let waiting =
        format!("min(CASE WHEN {scheduled} AND scheduled_on <= $1 THEN {}(queued_on, scheduled_on) END)", D::GREATEST);
    let of_queue = if queue.is_some() { "AND queue = $3" } else { "" };
    let sql = format!(
        "SELECT queue, share_key,
             count(CASE WHEN {scheduled} AND scheduled_on <= $1 THEN 1 END) AS due,
             count(CASE WHEN {scheduled} AND scheduled_on > $1 THEN 1 END) AS later,
             count(CASE WHEN {running} THEN 1 END) AS running,
             {waiting} AS waiting_since
         FROM task_queue WHERE share_key IS NOT NULL AND {} {of_queue}
         GROUP BY queue, share_key
         ORDER BY CASE WHEN {waiting} IS NULL THEN 1 ELSE 0 END, {waiting}, queue, share_key LIMIT $2",
        is_any::<D>(&[TaskState::Scheduled, TaskState::Running])
    );
    let found = match queue {
        Some(q) => db.rows(None, &sql, args![now, limit, q]).await?,
        None => db.rows(None, &sql, args![now, limit]).await?,
    };
    let mut keys = Vec::with_capacity(found.len());
    for r in &found {
        keys.push(KeyInfo {
            queue: r.text("queue")?.unwrap_or_default(),
            key: r.text("share_key")?.unwrap_or_default(),
            due: count(r, "due")?,
            later: count(r, "later")?,
            running: count(r, "running")?,
            waiting_since: r.time("waiting_since")?,
            weight: None,
        });
    }
    let mut names: Vec<String> = keys.iter().map(|k| LimitScope::Key.name(&k.key)).collect();
    names.sort();
    names.dedup();
    if !names.is_empty() {
        let sql = "SELECT name, weight FROM task_run_limits WHERE name IN ($1) AND weight IS NOT NULL";
        for r in &db.rows(None, sql, args![names.as_slice()]).await? {
            let name = r.text("name")?.unwrap_or_default();
            let Ok((_, key)) = LimitScope::parse_name(&name) else { continue };
            let weight = r.int("weight")?.and_then(|w| u32::try_from(w).ok());
            for k in keys.iter_mut().filter(|k| k.key == key) {
                k.weight = weight;
            }
        }
    }
    Ok(keys)
}

/// The due tasks of `queue` (not paused) that its cap per key holds back now: of each key, those
/// beyond its cap less its runs in flight. One row a key of the queue, summed by the server.
pub async fn held_by_cap<D: Dialect>(db: &D, queue: &str, cap: u32, now: DateTime<Utc>) -> Result<u64> {
    let sql = format!(
        "SELECT CAST(sum(CASE WHEN running >= $3 THEN due WHEN due > $3 - running THEN due - ($3 - running)
                 ELSE 0 END) AS {}) AS held
         FROM (SELECT count(CASE WHEN {} AND scheduled_on <= $2 AND {NOT_PAUSED} THEN 1 END) AS due,
                      count(CASE WHEN {} THEN 1 END) AS running
               FROM task_queue WHERE queue = $1 AND share_key IS NOT NULL AND {} GROUP BY share_key) per_key",
        D::INT,
        is::<D>(TaskState::Scheduled),
        is::<D>(TaskState::Running),
        is_any::<D>(&[TaskState::Scheduled, TaskState::Running])
    );
    let found = db.rows(None, &sql, args![queue, now, i64::from(cap)]).await?;
    Ok(found.first().map(|r| r.int("held")).transpose()?.flatten().unwrap_or(0).max(0) as u64)
}

/// Delete at most `batch` rows of `task_keys` whose turn is older than `before` and whose key has
/// no unfinished task in that queue (see `overseer::key_turns`); how many. A turn is not a clock:
/// in a queue with a backlog, turns read as far back as its head, however busy the key. Rows an
/// add holds are skipped (on SQLite, writers take turns); one held here is waited for by an add,
/// which must lock it before it queues a task that takes a turn, so no such task appears meanwhile.
pub async fn prune_turns<D: Dialect>(db: &D, before: DateTime<Utc>, batch: u32) -> Result<u64> {
    let before_ns = before.timestamp_micros().saturating_mul(1_000);
    transaction(db, |tx| {
        Box::pin(async move {
            let sql = format!(
                "SELECT queue, name FROM task_keys k WHERE turn_ns < $1
                     AND NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.share_key = k.name AND t.queue = k.queue AND {})
                 ORDER BY turn_ns LIMIT $2{}",
                is_any::<D>(&[TaskState::Scheduled, TaskState::Running]),
                D::SKIP_LOCKED
            );
            let mut by_queue: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for r in &db.rows(Some(&mut tx.tx), &sql, args![before_ns, batch]).await? {
                by_queue
                    .entry(r.text("queue")?.unwrap_or_default())
                    .or_default()
                    .push(r.text("name")?.unwrap_or_default());
            }
            let mut deleted = 0;
            for (queue, names) in &by_queue {
                let sql = "DELETE FROM task_keys WHERE queue = $1 AND name IN ($2) AND turn_ns < $3";
                deleted += db.exec(Some(&mut tx.tx), sql, args![queue.as_str(), names.as_slice(), before_ns]).await?;
            }
            Ok(deleted)
        })
    })
    .await
}

fn count(r: &impl Cells, col: &str) -> Result<u64> {
    Ok(rows::id(r, col)?.max(0) as u64)
}
