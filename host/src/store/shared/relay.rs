//! Keys' turns laid anew (fair shares weighed by fuel, docs/queue.md). An add spaces a key's
//! tasks by the fuel its runs burnt on average until then (`transitions::fair`), so a key that
//! queues a backlog before any of its runs has ended is given a turn a task, and one whose runs
//! grow dearer keeps the turns its queued tasks were given. The overseer's `key-fuel` finds the
//! keys whose average has moved to more than twice, or under half, what their due tasks were
//! laid by ([`keys_to_relay`]) and lays those tasks' turns again by it ([`relay`]), a bounded
//! chunk a call, so the key takes the share its fuel gives it from then on, not from its next add.
//! So too for a key's weight, or a queue's fuel per turn, changed live: the change writes a row of
//! `task_key_relays` for each queue where the key has turns, or each key with turns in the queue
//! ([`ask`]), and those due tasks are laid by what is in force now.
//!
//! A re-lay keeps a key's first due task where it is and gives the others the turns that follow
//! it one stride apart, in the order they had. It never moves a task before its due time when
//! stretching, nor after it when drawing together, so each chunk leaves the key's order as it
//! was: stretching goes from the last due task back (each moves later, away from those not yet
//! read), drawing together from the first on. Only due tasks move (a task due later keeps its
//! time: it was asked for, or is a turn not yet reached). Tasks are written by id, guarded by
//! their state, in statements of their own; a claim between two chunks is no harm (the turns
//! written are fixed when the re-lay starts). A stretched key's last turn (`task_keys`) moves to
//! its new last task's first, so its next add queues after it.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg, SCHEDULED};
use super::super::transitions::{fair, fuel, is};
use super::super::types::{Asked, KeyToRelay, Relaid, RelayCursor};
use crate::error::Result;
use crate::model::{Limit, LimitScope, TaskState, DEFAULT_WEIGHT};

/// Tasks written in one statement at most.
const A_STATEMENT: usize = 500;

/// How far a key's average may move from what its turns were laid by before they are laid again.
const SLACK: i64 = 2;

/// Keys whose due tasks' turns are out: in queues weighed by fuel, those whose average fuel a
/// run has moved to more than twice, or under half, what their turns were laid by, or is not yet
/// known against it; and those whose weight or queue's fuel per turn was changed since
/// ([`ask`]); at most `limit`.
pub async fn keys_to_relay<D: Dialect>(db: &D, limit: u32) -> Result<Vec<KeyToRelay>> {
    let sql = "SELECT name FROM task_run_limits WHERE fuel_per_turn IS NOT NULL";
    let mut queues = BTreeSet::new();
    for r in &db.rows(None, sql, &[]).await? {
        queues.extend(r.text("name")?.as_deref().and_then(|n| n.strip_prefix("queue:")).map(str::to_string));
    }
    // Each key found: its fuel and the fuel its turns were laid by, and its weight's change.
    let mut found: BTreeMap<Slot, Found> = BTreeMap::new();
    if !queues.is_empty() {
        // Halves, not doubles: an average near the top of BIGINT does not overflow.
        let sql = format!(
            "SELECT queue, name, fuel, laid_fuel FROM task_key_fuel WHERE queue IN ($1)
                 AND (laid_fuel IS NULL OR fuel / {SLACK} > laid_fuel OR laid_fuel / {SLACK} > fuel)
             ORDER BY queue, name LIMIT $2"
        );
        let fuel_queues: Vec<String> = queues.iter().cloned().collect();
        read_fuel(&db.rows(None, &sql, args![fuel_queues.as_slice(), limit]).await?, &mut found)?;
    }
    let sql = "SELECT queue, name, laid_weight, laid_per_turn, asked FROM task_key_relays
               ORDER BY queue, name LIMIT $1";
    let mut unread: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &db.rows(None, sql, args![limit]).await? {
        let slot = (r.text("queue")?.unwrap_or_default(), r.text("name")?.unwrap_or_default());
        // Out of range (written by hand): the nearest in range.
        let weight = r.int("laid_weight")?.map(|w| u32::try_from(w.clamp(1, 1_000)).unwrap_or(DEFAULT_WEIGHT));
        let per_turn = r.int("laid_per_turn")?.map(|p| if p > 0 { p.max(MIN_PER_TURN) } else { 0 });
        let count = r.int("asked")?.unwrap_or(0);
        let weighed = queues.contains(&slot.0) || per_turn.is_some_and(|p| p > 0);
        if weighed && !found.contains_key(&slot) {
            unread.entry(slot.0.clone()).or_default().push(slot.1.clone());
        }
        found.entry(slot).or_default().asked = Some((weight, per_turn, count));
    }
    // The fuel of the keys asked for in queues weighed by fuel (now or when laid), not read above.
    for (queue, names) in &unread {
        let sql = "SELECT queue, name, fuel, laid_fuel FROM task_key_fuel WHERE queue = $1 AND name IN ($2)";
        read_fuel(&db.rows(None, sql, args![queue.as_str(), names.as_slice()]).await?, &mut found)?;
    }
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = found.keys().map(|(_, k)| k.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let in_queues: Vec<String> = found.keys().map(|(q, _)| q.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let (weights, per_turn) = transaction(db, |tx| {
        let (names, queues) = (&names, &in_queues);
        Box::pin(async move { fair::weights::<D>(D::conn(&mut tx.tx), names, queues).await })
    })
    .await?;
    let mut keys = Vec::with_capacity(found.len());
    for ((queue, key), f) in found.into_iter().take(usize::try_from(limit).unwrap_or(usize::MAX)) {
        // A queue not weighed by fuel: a turn a task.
        let per_turn = per_turn.get(&queue).copied().map_or(0, |p| i64::try_from(p).unwrap_or(i64::MAX));
        let fuel = f.fuel.unwrap_or(per_turn);
        let weight = weights.get(&key).copied().unwrap_or(DEFAULT_WEIGHT);
        let asked = f.asked.map(|(laid_weight, laid_per_turn, count)| Asked {
            weight: laid_weight.unwrap_or(weight),
            per_turn: laid_per_turn.unwrap_or(per_turn),
            count,
        });
        let stride_ps = stride(fuel, weight, per_turn);
        let laid_per_turn = asked.map_or(per_turn, |a| a.per_turn);
        let laid_weight = asked.map_or(weight, |a| a.weight);
        let laid_stride_ps = stride(f.laid_fuel.unwrap_or(laid_per_turn), laid_weight, laid_per_turn);
        let laid_fuel = f.laid_fuel;
        keys.push(KeyToRelay { queue, key, fuel, laid_fuel, per_turn, weight, asked, stride_ps, laid_stride_ps });
    }
    Ok(keys)
}

/// The fuel per turn read from a limit's row is at least this (`fair::weights`).
const MIN_PER_TURN: i64 = Limit::MIN_FUEL_PER_TURN as i64;

/// A key's stride in picoseconds, by its fuel a run, its weight and its queue's fuel per turn
/// (0: a turn a task).
fn stride(fuel: i64, weight: u32, per_turn: i64) -> i64 {
    let cost = if per_turn > 0 { fuel::cost(fuel, i128::from(per_turn)) } else { 1_000 };
    i64::try_from(fair::stride(cost, weight)).unwrap_or(i64::MAX)
}

/// A key in a queue.
type Slot = (String, String);

/// What [`keys_to_relay`] read of a key.
#[derive(Default)]
struct Found {
    fuel: Option<i64>,
    laid_fuel: Option<i64>,
    /// The weight and fuel per turn its turns were laid by (None: the one now), and the changes
    /// asked.
    asked: Option<(Option<u32>, Option<i64>, i64)>,
}

/// Keep each key's fuel read in `rows`.
fn read_fuel<R: Cells>(rows: &[R], found: &mut BTreeMap<Slot, Found>) -> Result<()> {
    for r in rows {
        let slot = (r.text("queue")?.unwrap_or_default(), r.text("name")?.unwrap_or_default());
        let one = found.entry(slot).or_default();
        (one.fuel, one.laid_fuel) = (Some(rows::id(r, "fuel")?), r.int("laid_fuel")?);
    }
    Ok(())
}

/// What an operator changed, and what was in force before it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change<'a> {
    /// A key's weight, from this one.
    Weight { key: &'a str, laid: u32 },
    /// A queue's fuel per turn, from this one (0: none).
    PerTurn { queue: &'a str, laid: i64 },
}

impl<'a> Change<'a> {
    /// The change of `target`'s limit in `scope` from `before` to `after` that lays queued tasks
    /// again, if it is one.
    pub(crate) fn of(scope: LimitScope, target: &'a str, before: &Limit, after: &Limit) -> Option<Self> {
        let weight = |l: &Limit| l.weight.unwrap_or(DEFAULT_WEIGHT);
        let per_turn = |l: &Limit| l.fuel_per_turn.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX));
        match scope {
            LimitScope::Key if weight(after) != weight(before) => {
                Some(Change::Weight { key: target, laid: weight(before) })
            }
            LimitScope::Queue if per_turn(after) != per_turn(before) => {
                Some(Change::PerTurn { queue: target, laid: per_turn(before) })
            }
            _ => None,
        }
    }
}

/// `change` was made (within the transaction that makes it): the due tasks of the keys it
/// touches, in each queue where they have turns, are to be laid again by what is in force now. A
/// change asked while one is pending keeps what the tasks were laid by and counts the ask.
pub(crate) async fn ask<D: Dialect>(db: &D, tx: &mut TxOf<D>, change: Change<'_>) -> Result<()> {
    let (by, of, column, laid) = match change {
        Change::Weight { key, laid } => ("name", key, "laid_weight", i64::from(laid)),
        Change::PerTurn { queue, laid } => ("queue", queue, "laid_per_turn", laid),
    };
    let upsert = D::upsert("task_key_relays", &["queue", "name"], &["asked"], &[], &[]);
    // Only keys with tasks queued there: a key's turn outlives its last task by a day, and a
    // queue's change would write a row for each such key in the transaction that holds its limit.
    let sql = format!(
        "INSERT INTO task_key_relays (queue, name, {column}, asked)
         SELECT queue, name, $2, 1 FROM task_keys k WHERE {by} = $1
             AND EXISTS (SELECT 1 FROM task_queue t WHERE t.share_key = k.name AND t.queue = k.queue
                         AND t.last_status = {SCHEDULED})
         {upsert}"
    );
    db.exec(Some(&mut *tx), &sql, args![of, laid]).await?;
    // A row asked by the other change alone: its tasks were laid by what this one changed from.
    // (After the insert, which holds every such row of this change's.)
    let sql = format!("UPDATE task_key_relays SET {column} = $2 WHERE {by} = $1 AND {column} IS NULL");
    db.exec(Some(tx), &sql, args![of, laid]).await?;
    Ok(())
}

/// Lay at most `limit` of `key`'s due tasks' turns again by its stride now, going on from `at`
/// (None: from the start), read in one statement and written `batch` a transaction: how many
/// were read and moved, and where to go on (None: done, and the key marked laid by its average
/// now).
pub async fn relay<D: Dialect>(
    db: &D,
    key: &KeyToRelay,
    at: Option<RelayCursor>,
    now: DateTime<Utc>,
    (limit, batch): (u32, u32),
) -> Result<Relaid> {
    let at = match at {
        Some(at) => at,
        // Within the slack once strides are clamped (or not known, and as a turn a task would
        // lay them): written down as laid, nothing moved.
        None if !needs_relay(key) => return mark(db, key, key.laid_fuel.map_or(key.per_turn, |_| key.fuel)).await,
        None => match start(db, key, now).await? {
            Some(at) => at,
            None => return mark(db, key, key.fuel).await,
        },
    };
    let (read, moves, next) = chunk(db, key, at, now, limit).await?;
    for one in moves.chunks(usize::try_from(batch.max(1)).unwrap_or(usize::MAX)) {
        transaction(db, |tx| {
            Box::pin(async move {
                for part in one.chunks(A_STATEMENT) {
                    write::<D>(db, &mut tx.tx, part).await?;
                }
                Ok(())
            })
        })
        .await?;
    }
    let moved = moves.len() as u64;
    if read < u64::from(limit) {
        mark(db, key, key.fuel).await?;
        return Ok(Relaid { read, moved, next: None });
    }
    Ok(Relaid { read, moved, next: Some(next) })
}

/// Whether `key`'s turns are out: by any stride for a weight or fuel per turn changed (the
/// operator asked), by more than the slack for fuel.
fn needs_relay(key: &KeyToRelay) -> bool {
    let (now, laid) = (key.stride_ps.max(1), key.laid_stride_ps.max(1));
    let changed = key.asked.is_some_and(|a| a.weight != key.weight || a.per_turn != key.per_turn);
    (changed && now != laid) || now / SLACK > laid || laid / SLACK > now
}

/// Where a re-lay of `key` starts: its due tasks' first turn and how many there are; None when it
/// has none. A stretched key's last turn moves now, so that adds meanwhile queue after the end.
async fn start<D: Dialect>(db: &D, key: &KeyToRelay, now: DateTime<Utc>) -> Result<Option<RelayCursor>> {
    let sql = format!(
        "SELECT count(*) AS n, min(scheduled_on) AS first FROM task_queue
         WHERE queue = $1 AND share_key = $2 AND {} AND scheduled_on <= $3",
        is::<D>(TaskState::Scheduled)
    );
    let found = db.rows(None, &sql, args![key.queue.as_str(), key.key.as_str(), now]).await?;
    let Some(r) = found.first() else { return Ok(None) };
    let (n, first) = (rows::id(r, "n")?, r.time("first")?);
    let Some(first) = first.filter(|_| n > 0) else { return Ok(None) };
    let stride = i128::from(key.stride_ps.max(1));
    let first_ps = i128::from(first.timestamp_micros()) * 1_000_000;
    let stretch = key.stride_ps > key.laid_stride_ps;
    let next_ps = if stretch { first_ps + i128::from(n - 1) * stride } else { first_ps };
    if key.asked.is_some() {
        // Laid by what is in force now from here on: a change asked before this re-lay ends is
        // laid from it (one back to what was before undoes the tasks this one moved).
        let sql = "UPDATE task_key_relays SET laid_weight = $3, laid_per_turn = $4 WHERE queue = $1 AND name = $2";
        let (queue, name, weight) = (key.queue.as_str(), key.key.as_str(), i64::from(key.weight));
        db.exec(None, sql, args![queue, name, weight, key.per_turn]).await?;
    }
    if stretch {
        let last_ns = i64::try_from(next_ps.div_euclid(1_000)).unwrap_or(i64::MAX);
        let sql = "UPDATE task_keys SET turn_ns = $3 WHERE queue = $1 AND name = $2 AND turn_ns < $3";
        db.exec(None, sql, args![key.queue.as_str(), key.key.as_str(), last_ns]).await?;
    }
    Ok(Some(RelayCursor { stretch, after: None, next_ps, stride_ps: key.stride_ps.max(1) }))
}

/// Read the next `limit` due tasks of `key` from `at`, and the turns they move to: how many were
/// read, the moves (id, new due time) and where the next chunk starts.
async fn chunk<D: Dialect>(
    db: &D,
    key: &KeyToRelay,
    mut at: RelayCursor,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<(u64, Vec<(i64, DateTime<Utc>)>, RelayCursor)> {
    let (side, order) = if at.stretch { ("<", "DESC") } else { (">", "ASC") };
    let past = match at.after {
        Some(_) => format!("AND (scheduled_on {side} $5 OR (scheduled_on = $5 AND id {side} $6))"),
        None => String::new(),
    };
    let sql = format!(
        "SELECT id, scheduled_on FROM task_queue
         WHERE queue = $1 AND share_key = $2 AND {} AND scheduled_on <= $3 {past}
         ORDER BY scheduled_on {order}, id {order} LIMIT $4",
        is::<D>(TaskState::Scheduled)
    );
    let mut values = vec![Arg::Text(Some(&key.queue)), Arg::Text(Some(&key.key)), Arg::Time(now), Arg::from(limit)];
    if let Some((t, id)) = at.after {
        values.extend([Arg::Time(t), Arg::Int(Some(id))]);
    }
    let found = db.rows(None, &sql, &values).await?;
    let stride = i128::from(at.stride_ps);
    let mut moves = Vec::new();
    for r in &found {
        let (id, Some(old)) = (rows::id(r, "id")?, r.time("scheduled_on")?) else { continue };
        let old_ps = i128::from(old.timestamp_micros()) * 1_000_000;
        // Never earlier than it was when stretching, nor later when drawing together: the key's
        // order holds between chunks.
        let (want, next) = if at.stretch {
            (at.next_ps.max(old_ps), at.next_ps - stride)
        } else {
            (at.next_ps.min(old_ps), at.next_ps + stride)
        };
        at.next_ps = next;
        let micros = i64::try_from(want.div_euclid(1_000_000)).unwrap_or(i64::MAX);
        if micros != old.timestamp_micros() {
            moves.push((id, DateTime::from_timestamp_micros(micros).unwrap_or(old)));
        }
        at.after = Some((old, id));
    }
    Ok((found.len() as u64, moves, at))
}

/// Move these tasks to their new due times, those still due.
async fn write<D: Dialect>(db: &D, tx: &mut TxOf<D>, moves: &[(i64, DateTime<Utc>)]) -> Result<()> {
    let mut values: Vec<Arg<'_>> = Vec::with_capacity(moves.len() * 2 + 1);
    let mut arms = String::new();
    for (id, at) in moves {
        values.extend([Arg::Int(Some(*id)), Arg::Time(*at)]);
        arms.push_str(&format!(" WHEN ${} THEN ${}", values.len() - 1, values.len()));
    }
    let ids: Vec<i64> = moves.iter().map(|(id, _)| *id).collect();
    values.push(Arg::Ints(&ids));
    let sql = format!(
        "UPDATE task_queue SET scheduled_on = CASE id{arms} END WHERE id IN (${}) AND {}",
        values.len(),
        is::<D>(TaskState::Scheduled)
    );
    db.exec(Some(tx), &sql, &values).await?;
    Ok(())
}

/// Write down the fuel `key`'s turns are laid by; done. A weight or fuel per turn changed again
/// meanwhile (its asks counted on) stays to be laid.
async fn mark<D: Dialect>(db: &D, key: &KeyToRelay, laid: i64) -> Result<Relaid> {
    let (queue, name) = (key.queue.as_str(), key.key.as_str());
    if key.per_turn > 0 {
        let sql = "UPDATE task_key_fuel SET laid_fuel = $3 WHERE queue = $1 AND name = $2";
        db.exec(None, sql, args![queue, name, laid]).await?;
    }
    if let Some(asked) = key.asked {
        let sql = "DELETE FROM task_key_relays WHERE queue = $1 AND name = $2 AND asked = $3";
        db.exec(None, sql, args![queue, name, asked.count]).await?;
    }
    Ok(Relaid::default())
}
