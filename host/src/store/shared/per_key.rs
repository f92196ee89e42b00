//! A queue's limits on each of its keys, in the limited claim (see [`super::limits`]): runs in
//! flight of each key at most (`max_running_per_key`) and starts of each key per period
//! (`rate_limit_per_key`, each key paced apart, with a burst).
//!
//! The claim holds the queue's row of `task_run_limits`, so the claims of one queue take turns
//! and a key's runs in flight and pace mark cannot change under them. A key's pace mark in a
//! queue is a row of `task_key_paces` (`next_us`, microseconds since the epoch; no row: never
//! started, as a mark in the past), written by those claims only: no add waits for it, nor it
//! for an add. A full key's tasks (at its cap) are left out of the claim's read by name (runs in
//! flight are few); a key out of starts, by its mark (`NOT EXISTS`: the keys paced lately may be
//! many), so neither crowds the others out of the claim's `LIMIT`. When every key near the head
//! is out of room, the read is bounded by the tasks it walks ([`super::key_reads`]).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, TimeDelta, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg, RUNNING, SCHEDULED};
use super::limits::Room;
use crate::error::Result;
use crate::model::Rate;

/// A key in a queue: (queue, key).
pub(super) type Slot = (String, String);

/// The condition leaving out the tasks of keys out of starts, its time as `$7`.
pub(super) const NOT_PACED_OUT: &str =
    " AND NOT EXISTS (SELECT 1 FROM task_key_paces k WHERE k.queue = task_queue.queue
     AND k.name = task_queue.share_key AND k.next_us > $7)";

/// The column of a paced read: each task's key's pace mark.
pub(super) const PACE_COLUMN: &str = ", (SELECT k.next_us FROM task_key_paces k WHERE k.queue = task_queue.queue
     AND k.name = task_queue.share_key) AS pace_us";

/// The per-key limits of the queues of one claim.
#[derive(Default)]
pub(super) struct PerKey {
    /// Runs in flight by key, in the queues capped per key.
    running: HashMap<Slot, u64>,
    /// Pace marks read, in the queues paced per key.
    marks: HashMap<Slot, Option<DateTime<Utc>>>,
    /// Room left of each key among the due tasks read.
    left: HashMap<Slot, u64>,
    /// Starts taken by key, in the queues paced per key.
    taken: BTreeMap<Slot, u32>,
}

impl PerKey {
    /// The runs in flight of each key in the queues capped per key (by `task_queue_running`).
    pub async fn read<D: Dialect>(db: &D, tx: &mut TxOf<D>, rooms: &HashMap<String, Room>) -> Result<PerKey> {
        let mut me = PerKey::default();
        let capped: Vec<String> =
            rooms.iter().filter(|(_, r)| r.row.limit.max_running_per_key.is_some()).map(|(q, _)| q.clone()).collect();
        if capped.is_empty() {
            return Ok(me);
        }
        let sql = format!(
            "SELECT queue, share_key, count(*) AS n FROM task_queue
             WHERE last_status = {RUNNING} AND queue IN ($1) AND share_key IS NOT NULL GROUP BY queue, share_key"
        );
        for r in &db.rows(Some(tx), &sql, args![capped.as_slice()]).await? {
            let at = (r.text("queue")?.unwrap_or_default(), r.text("share_key")?.unwrap_or_default());
            me.running.insert(at, rows::id(r, "n")?.max(0) as u64);
        }
        Ok(me)
    }

    /// The keys of `queue` at their cap, whose tasks its read leaves out.
    pub fn full(&self, queue: &str, cap: u32) -> Vec<String> {
        let full = self.running.iter().filter(|((q, _), n)| q == queue && **n >= u64::from(cap));
        full.map(|((_, k), _)| k.clone()).collect()
    }

    /// Each key's room among `due` (keyed tasks of the queues read: their key and, paced, its
    /// mark): its cap less its runs in flight, and the starts its pace mark allows now.
    pub fn rooms(
        &mut self,
        rooms: &HashMap<String, Room>,
        due: impl Iterator<Item = (Slot, Option<i64>)>,
        now: DateTime<Utc>,
        most: u32,
    ) {
        for (slot, pace) in due {
            let Some(limit) = rooms.get(&slot.0).map(|r| r.row.limit) else { continue };
            if self.left.contains_key(&slot) || !limit.is_per_key() {
                continue;
            }
            let mut left = u64::MAX;
            if let Some(cap) = limit.max_running_per_key {
                left = u64::from(cap).saturating_sub(self.running.get(&slot).copied().unwrap_or(0));
            }
            if let Some(rate) = limit.rate_per_key {
                let mark = mark(pace);
                left = left.min(u64::from(rate.grant(mark, now, most).granted));
                self.marks.insert(slot.clone(), mark);
            }
            self.left.insert(slot, left);
        }
    }

    /// Whether the key of a task (None: keyless) has room left.
    pub fn fits(&self, slot: Option<&Slot>) -> bool {
        slot.and_then(|s| self.left.get(s)).is_none_or(|left| *left > 0)
    }

    /// One run of the key taken.
    pub fn take(&mut self, slot: Slot) {
        if let Some(left) = self.left.get_mut(&slot) {
            *left = left.saturating_sub(1);
        }
        if self.marks.contains_key(&slot) {
            *self.taken.entry(slot).or_default() += 1;
        }
    }

    /// A run of the key picked but not claimed (its task changed or locked meanwhile, or the
    /// runner timed out): it started nothing, so it moves no pace mark.
    pub fn give_back(&mut self, slot: &Slot) {
        if let Some(n) = self.taken.get_mut(slot) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.taken.remove(slot);
            }
        }
    }

    /// Move the pace marks of the keys that started runs on by their starts (rows in one order),
    /// and, when the claim had room left (`room_left`) and a paced queue too, say when the first
    /// key out of starts with a due task there may start again (the earliest mark, by
    /// `task_key_paces_next`, whose key has one).
    pub async fn write<D: Dialect>(
        &self,
        db: &D,
        tx: &mut TxOf<D>,
        rooms: &HashMap<String, Room>,
        now: DateTime<Utc>,
        room_left: bool,
    ) -> Result<Option<DateTime<Utc>>> {
        for (slot, taken) in &self.taken {
            let Some(rate) = rooms.get(&slot.0).and_then(|r| r.row.limit.rate_per_key) else { continue };
            let next = rate.grant(self.marks.get(slot).copied().flatten(), now, *taken).next_on;
            let upsert = D::upsert("task_key_paces", &["queue", "name"], &[], &["next_us"], &[]);
            let sql = format!("INSERT INTO task_key_paces (queue, name, next_us) VALUES ($1, $2, $3) {upsert}");
            db.exec(Some(&mut *tx), &sql, args![slot.0.as_str(), slot.1.as_str(), next.timestamp_micros()]).await?;
        }
        if !room_left {
            return Ok(None);
        }
        let mut next_start: Option<DateTime<Utc>> = None;
        for (queue, room) in rooms.iter().filter(|(_, r)| r.has_room()) {
            let Some(rate) = room.row.limit.rate_per_key else { continue };
            let sql = format!(
                "SELECT k.next_us AS m FROM task_key_paces k WHERE k.queue = $1 AND k.next_us > $2
                     AND EXISTS (SELECT 1 FROM task_queue t WHERE t.share_key = k.name AND t.queue = k.queue
                                 AND t.last_status = {SCHEDULED} AND t.scheduled_on <= $3)
                 ORDER BY k.next_us LIMIT 1"
            );
            let found = db.rows(Some(&mut *tx), &sql, args![queue.as_str(), paced_out_after(rate, now), now]).await?;
            let Some(m) = found.first().map(|r| r.int("m")).transpose()?.flatten() else { continue };
            let Some(at) = opens_at(rate, m) else { continue };
            next_start = Some(next_start.map_or(at, |t| t.min(at)));
        }
        Ok(next_start)
    }
}

/// The mark past which a key of `rate` has no start left at `now`, in microseconds: one more
/// than its burst's paces ahead.
pub(super) fn paced_out_after(rate: Rate, now: DateTime<Utc>) -> i64 {
    now.timestamp_micros().saturating_add(slack_us(rate))
}

/// When a key of `rate` whose mark is `mark_us` may start: once the mark is no more than its
/// burst ahead.
pub(super) fn opens_at(rate: Rate, mark_us: i64) -> Option<DateTime<Utc>> {
    mark(Some(mark_us)).map(|at| at - TimeDelta::microseconds(slack_us(rate)))
}

/// The paces a rate's burst allows ahead, in microseconds.
fn slack_us(rate: Rate) -> i64 {
    rate.interval_us().saturating_mul(i64::from(rate.burst))
}

/// A pace mark kept in microseconds (none, or one out of range: never started).
pub(super) fn mark(us: Option<i64>) -> Option<DateTime<Utc>> {
    us.filter(|us| *us > 0).and_then(DateTime::from_timestamp_micros)
}

/// The arguments of a claim's read beyond the first six: the time a paced key's mark must pass
/// to leave its tasks out.
pub(super) fn paced_arg<'a>(rate: Option<Rate>, now: DateTime<Utc>) -> Arg<'a> {
    Arg::from(rate.map_or(i64::MAX, |r| paced_out_after(r, now)))
}
