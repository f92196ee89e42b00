//! What each key holds (fair shares, docs/queue.md): its due, later and running tasks in each
//! queue and how long its longest-waiting due task has waited, and how many due tasks a
//! queue's limits per key hold back now.

use chrono::{DateTime, Utc};

use std::collections::BTreeMap;

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::args;
use super::super::transitions::{is, NOT_PAUSED};
use super::super::types::KeyInfo;
use crate::error::Result;
use crate::model::{Limit, LimitScope, TaskState};

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
         FROM {} GROUP BY queue, share_key
         ORDER BY CASE WHEN {waiting} IS NULL THEN 1 ELSE 0 END, {waiting}, queue, share_key LIMIT $2",
        unfinished_keyed::<D>(of_queue)
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
            fuel_per_run: None,
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
        fuel_per_run(db, &mut keys).await?;
    }
    Ok(keys)
}

/// Fill in each key's fuel a run, in the queues that weigh their keys by fuel.
async fn fuel_per_run<D: Dialect>(db: &D, keys: &mut [KeyInfo]) -> Result<()> {
    let mut queues: Vec<String> = keys.iter().map(|k| LimitScope::Queue.name(&k.queue)).collect();
    queues.sort();
    queues.dedup();
    let sql = "SELECT name FROM task_run_limits WHERE name IN ($1) AND fuel_per_turn IS NOT NULL";
    let mut weighed = Vec::new();
    for r in &db.rows(None, sql, args![queues.as_slice()]).await? {
        let name = r.text("name")?.unwrap_or_default();
        weighed.extend(name.strip_prefix("queue:").map(str::to_string));
    }
    if weighed.is_empty() {
        return Ok(());
    }
    let mut names: Vec<String> = keys.iter().filter(|k| weighed.contains(&k.queue)).map(|k| k.key.clone()).collect();
    names.sort();
    names.dedup();
    let sql = "SELECT queue, name, fuel FROM task_key_fuel WHERE queue IN ($1) AND name IN ($2)";
    for r in &db.rows(None, sql, args![weighed.as_slice(), names.as_slice()]).await? {
        let (queue, name) = (r.text("queue")?.unwrap_or_default(), r.text("name")?.unwrap_or_default());
        let fuel = u64::try_from(rows::id(r, "fuel")?).ok();
        for k in keys.iter_mut().filter(|k| k.key == name && k.queue == queue) {
            k.fuel_per_run = fuel;
        }
    }
    Ok(())
}

/// The due tasks of `queue` (not paused) that its limits per key hold back now: of each key,
/// those beyond its cap less its runs in flight, or beyond the starts its pace mark allows. Only
/// the keys that may hold some back are read: beyond their cap, with more due tasks than a
/// burst, or with a mark ahead.
pub async fn held_per_key<D: Dialect>(db: &D, queue: &str, limit: &Limit, now: DateTime<Utc>) -> Result<u64> {
    let sql = format!(
        "SELECT p.due, p.running, k.next_us
         FROM (SELECT share_key, count(CASE WHEN {} AND scheduled_on <= $2 AND {NOT_PAUSED} THEN 1 END) AS due,
                      count(CASE WHEN {} THEN 1 END) AS running
               FROM {} GROUP BY share_key) p
         LEFT JOIN task_key_paces k ON k.queue = $1 AND k.name = p.share_key
         WHERE p.due > 0 AND (p.due + p.running > $3 OR p.due > $4 OR k.next_us > $5)",
        is::<D>(TaskState::Scheduled),
        is::<D>(TaskState::Running),
        unfinished_keyed::<D>("AND queue = $1")
    );
    let cap = limit.max_running_per_key.map_or(i64::MAX, i64::from);
    let rate = limit.rate_per_key;
    let (burst, ahead) = rate.map_or((i64::MAX, i64::MAX), |r| (i64::from(r.burst) + 1, now.timestamp_micros()));
    let mut held = 0;
    for r in &db.rows(None, &sql, args![queue, now, cap, burst, ahead]).await? {
        let (due, running) = (count(r, "due")?, count(r, "running")?);
        let mut room = due;
        if let Some(cap) = limit.max_running_per_key {
            room = room.min(u64::from(cap).saturating_sub(running));
        }
        if let Some(rate) = rate {
            let mark = super::per_key::mark(r.int("next_us")?);
            room = room.min(u64::from(rate.grant(mark, now, u32::try_from(due).unwrap_or(u32::MAX)).granted));
        }
        held += due - room;
    }
    Ok(held)
}

/// Delete at most `batch` rows of `task_key_paces` whose mark is older than `before` (a mark in
/// the past allows what none does), then at most `batch` of `task_keys` whose turn is older and
/// whose key has no unfinished task in that queue (see `overseer::key_turns`), then at most
/// `batch` of `task_key_fuel` whose key has neither a turn nor an unfinished task there; how
/// many. A turn is not a clock:
/// in a queue with a backlog, turns read as far back as its head, however busy the key. Rows an
/// add holds are skipped (on SQLite, writers take turns); one held here is waited for by an add,
/// which must lock it before it queues a task that takes a turn, so no such task appears meanwhile.
pub async fn prune_turns<D: Dialect>(db: &D, before: DateTime<Utc>, batch: u32) -> Result<u64> {
    let before_us = before.timestamp_micros();
    let before_ns = before_us.saturating_mul(1_000);
    transaction(db, |tx| {
        Box::pin(async move {
            let paces = format!("SELECT queue, name FROM task_key_paces WHERE next_us < $1 LIMIT $2{}", D::SKIP_LOCKED);
            let found = db.rows(Some(&mut tx.tx), &paces, args![before_us, batch]).await?;
            let mut deleted =
                delete_found(db, &mut tx.tx, &found, "task_key_paces", "next_us < $3", Some(before_us)).await?;
            // (No order: a scan stops at its batch.)
            let turns = format!(
                "SELECT queue, name FROM task_keys k WHERE turn_ns < $1 AND {} LIMIT $2{}",
                none_unfinished::<D>("k.name", "k.queue"),
                D::SKIP_LOCKED
            );
            let found = db.rows(Some(&mut tx.tx), &turns, args![before_ns, batch]).await?;
            deleted += delete_found(db, &mut tx.tx, &found, "task_keys", "turn_ns < $3", Some(before_ns)).await?;
            // A key's fuel average goes once it has neither a turn nor an unfinished task in the
            // queue (it starts afresh then, as a new key does).
            let orphan = format!(
                "NOT EXISTS (SELECT 1 FROM task_keys k WHERE k.queue = task_key_fuel.queue AND k.name = task_key_fuel.name)
                 AND {}",
                none_unfinished::<D>("task_key_fuel.name", "task_key_fuel.queue")
            );
            let fuel = format!("SELECT queue, name FROM task_key_fuel WHERE {orphan} LIMIT $1{}", D::SKIP_LOCKED);
            let found = db.rows(Some(&mut tx.tx), &fuel, args![batch]).await?;
            deleted += delete_found(db, &mut tx.tx, &found, "task_key_fuel", &orphan, None).await?;
            Ok(deleted)
        })
    })
    .await
}

/// Delete the rows `found` (by queue and name) of `table` that still hold: `still`, of `$3` = `arg`
/// where given.
async fn delete_found<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    found: &[D::Row],
    table: &str,
    still: &str,
    arg: Option<i64>,
) -> Result<u64> {
    let mut by_queue: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in found {
        by_queue.entry(r.text("queue")?.unwrap_or_default()).or_default().push(r.text("name")?.unwrap_or_default());
    }
    let mut deleted = 0;
    for (queue, names) in &by_queue {
        let sql = format!("DELETE FROM {table} WHERE queue = $1 AND name IN ($2) AND {still}");
        deleted += match arg {
            Some(arg) => db.exec(Some(&mut *tx), &sql, args![queue.as_str(), names.as_slice(), arg]).await?,
            None => db.exec(Some(&mut *tx), &sql, args![queue.as_str(), names.as_slice()]).await?,
        };
    }
    Ok(deleted)
}

fn count(r: &impl Cells, col: &str) -> Result<u64> {
    Ok(rows::id(r, col)?.max(0) as u64)
}

/// Keyed tasks scheduled or running (with `cond` too), as a derived table `t` of their queue,
/// key, status, due time and queueing: each state read by its own index (`task_queue_key` holds
/// scheduled tasks only, so a claim and an end write none of its entries; runs in flight are
/// few, read by `task_queue_running`).
fn unfinished_keyed<D: Dialect>(cond: &str) -> String {
    let cols = "queue, share_key, last_status, scheduled_on, queued_on";
    format!(
        "(SELECT {cols} FROM task_queue WHERE share_key IS NOT NULL AND {} {cond}
          UNION ALL SELECT {cols} FROM task_queue WHERE {} AND share_key IS NOT NULL {cond}) t",
        is::<D>(TaskState::Scheduled),
        is::<D>(TaskState::Running)
    )
}

/// No task of the key `name` in `queue` (SQL expressions) is scheduled or running, each state
/// asked of its own index (see [`unfinished_keyed`]).
fn none_unfinished<D: Dialect>(name: &str, queue: &str) -> String {
    let none = |state| {
        format!(
            "NOT EXISTS (SELECT 1 FROM task_queue t WHERE t.share_key = {name} AND t.queue = {queue} AND {})",
            is::<D>(state)
        )
    };
    format!("{} AND {}", none(TaskState::Scheduled), none(TaskState::Running))
}
