//! Flow-control limits across workers, in the claim: at most N runs of a queue or a handler in
//! flight on all workers together (`max_running`), and at most N starts per period
//! (`rate_limit`, paced, with a burst); each limit a row of `task_run_limits` (see
//! [`super::limit_rows`]).
//!
//! A claim that touches a limited queue or handler is one transaction that
//! 1. locks the row of each limit it touches and reads its values (in name order, so two claims
//!    never deadlock on them): claims of the same limits take turns, others never wait on them;
//! 2. counts the runs in flight of each concurrency limit (by the index `task_queue_running`;
//!    MySQL's claim index), and takes the starts each rate allows now from its pace mark;
//! 3. reads due tasks in claim order, leaving out queues and handlers with no room left, and
//!    keeps those that fit the room of both their queue and their handler, and, in a queue with
//!    a cap per key (`max_running_per_key`), their key's room (its runs in flight counted);
//! 4. claims exactly those ([`Dialect::claim_these`]) and moves each rate's pace mark on by the
//!    starts it took. A rate out of starts says when it allows the next one: the worker claims
//!    again then, not at its poll.
//!
//! The transaction is READ COMMITTED ([`Dialect::begin_read_committed`]), and the count is read
//! after the lock is held, so it sees every claim committed before, whatever the server's
//! default isolation. SQLite's write transactions exclude each other already.
//!
//! A run counts from its claim until its outcome is written, so a worker whose run just ended
//! finds room for its successor only once the outcome is in (its own slot is free before; a
//! capped worker claims again when its writer says so). (A run
//! cancelled or timed out elsewhere stops counting at once, while its guest may run on until its
//! worker's next check, within a second.) A run held back costs nothing: it is simply not claimed.

use std::collections::HashMap;

use super::super::dialect::{transaction_read_committed, ClaimRequest, Claimed, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg, RUNNING};
use super::super::transitions;
use super::key_reads::{self, DeepPlaces, KeyRead};
use super::limit_rows::{LimitRow, LIMIT_COLUMNS};
use super::per_key::{self, PerKey};
use crate::error::Result;
use crate::model::*;

/// Claim as the request asks, within its limits.
pub async fn claim<D: Dialect>(db: &D, req: &ClaimRequest<'_>, places: &DeepPlaces) -> Result<Claimed> {
    let Some(limits) = req.limits.filter(|l| l.apply_to(req.queues, req.handlers)) else {
        return Ok(Claimed { runs: db.claim(req).await?, next_start_on: None });
    };
    let queues = req.queues.iter().filter(|q| limits.limits_claims_of(q)).map(|q| LimitScope::Queue.name(q));
    let limited = |h: &&String| limits.handlers.get(*h).is_some_and(Limit::limits_claims);
    let handlers: Vec<String> = match req.handlers {
        Some(hs) => hs.iter().filter(limited).map(|h| LimitScope::Handler.name(h)).collect(),
        None => limits.handlers.keys().filter(limited).map(|h| LimitScope::Handler.name(h)).collect(),
    };
    let mut names: Vec<String> = queues.chain(handlers).collect();
    names.sort();
    names.dedup();
    let names = &names;
    transaction_read_committed(db, |tx| {
        Box::pin(async move {
            let sql = format!(
                "SELECT {LIMIT_COLUMNS} FROM task_run_limits WHERE name IN ($1) ORDER BY name{}",
                D::FOR_UPDATE
            );
            let found = db.rows(Some(&mut tx.tx), &sql, args![names.as_slice()]).await?;
            let rows = found.iter().map(LimitRow::read).collect::<Result<Vec<_>>>()?;
            claim_within(db, &mut tx.tx, req, rows, places).await
        })
    })
    .await
}

/// One limited queue's or handler's room in this claim.
pub(super) struct Room {
    pub row: LimitRow,
    /// Runs it may take in this claim.
    left: u32,
    /// Runs taken.
    taken: u32,
}

impl Room {
    /// Whether it may take more in this claim.
    pub fn has_room(&self) -> bool {
        self.taken < self.left
    }
}

/// Steps 2 to 4, with the limits' rows locked.
async fn claim_within<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    req: &ClaimRequest<'_>,
    rows: Vec<LimitRow>,
    places: &DeepPlaces,
) -> Result<Claimed> {
    // The time the rates count by: the server's, read under the limits' locks, for workers.
    let mut now = req.now;
    let paced = rows.iter().any(|r| r.limit.rate.is_some() || r.limit.rate_per_key.is_some());
    if let (true, true, Some(sql)) = (req.paced_by_server, paced, D::SERVER_TIME) {
        now =
            db.rows(Some(&mut *tx), sql, &[]).await?.first().map(|r| r.time("t")).transpose()?.flatten().unwrap_or(now);
    }
    // Due tasks are read, and rates counted, by that time.
    let req = &ClaimRequest { now, ..*req };
    let (mut queue_room, mut handler_room) = (HashMap::new(), HashMap::new());
    for row in rows {
        let Ok((scope, target)) = LimitScope::parse_name(&row.name) else { continue };
        // Starts the rate allows now (asking for all this claim may take).
        let left = row.limit.rate.map_or(req.limit, |r| r.grant(row.next_on, now, req.limit).granted);
        let room = (target.to_string(), Room { left, taken: 0, row });
        match scope {
            LimitScope::Queue => queue_room.insert(room.0, room.1),
            LimitScope::Handler => handler_room.insert(room.0, room.1),
            LimitScope::Key => continue,
        };
    }
    in_flight(db, tx, "queue", &mut queue_room).await?;
    in_flight(db, tx, "task_handler_class", &mut handler_room).await?;
    let open_queues: Vec<String> =
        req.queues.iter().filter(|q| queue_room.get(q.as_str()).is_none_or(|r| r.left > 0)).cloned().collect();
    let full_handlers: Vec<String> = handler_room.iter().filter(|(_, r)| r.left == 0).map(|(h, _)| h.clone()).collect();
    let open_handlers: Option<Vec<String>> =
        req.handlers.map(|hs| hs.iter().filter(|h| !full_handlers.contains(h)).cloned().collect());
    let mut picked = Vec::new();
    let mut keys = PerKey::read(db, tx, &queue_room).await?;
    if !open_queues.is_empty() && open_handlers.as_ref().is_none_or(|h| !h.is_empty()) {
        picked = pick(
            db,
            tx,
            req,
            &open_queues,
            open_handlers.as_deref(),
            &full_handlers,
            &mut queue_room,
            &mut handler_room,
            &mut keys,
            places,
        )
        .await?;
    }
    let mut runs = Vec::new();
    if !picked.is_empty() {
        // Started at the time the rates counted by: a claim that waited on the limits' locks
        // starts its runs when it got them, as their starts are paced.
        let narrowed = ClaimRequest { queues: &open_queues, limit: picked.len() as u32, ..*req };
        let ids: Vec<TaskId> = picked.iter().map(|p| p.id).collect();
        runs = db.claim_these(tx, &narrowed, &ids).await?;
    }
    give_back(&picked, &runs, &mut queue_room, &mut handler_room, &mut keys);
    let mut next_start_on = move_rates(db, tx, queue_room.values().chain(handler_room.values()), now).await?;
    let room_left = runs.len() < req.limit as usize;
    // After the claim: a key whose due tasks it took has none due left.
    if let Some(at) = keys.write(db, tx, &queue_room, now, room_left).await? {
        next_start_on = Some(next_start_on.map_or(at, |t| t.min(at)));
    }
    Ok(Claimed { runs, next_start_on })
}

/// Only the runs claimed count: a task picked and not claimed (changed or locked meanwhile, or
/// its runner timed out) takes no room and no start.
fn give_back(
    picked: &[Picked],
    runs: &[ClaimedRun],
    queue_room: &mut HashMap<String, Room>,
    handler_room: &mut HashMap<String, Room>,
    keys: &mut PerKey,
) {
    if runs.len() >= picked.len() {
        return;
    }
    let claimed: std::collections::HashSet<TaskId> = runs.iter().map(|r| r.task_id).collect();
    for p in picked.iter().filter(|p| !claimed.contains(&p.id)) {
        for (rooms, name) in [(&mut *queue_room, &p.queue), (&mut *handler_room, &p.handler)] {
            if let Some(room) = rooms.get_mut(name.as_str()) {
                room.taken = room.taken.saturating_sub(1);
            }
        }
        if let Some(slot) = &p.slot {
            keys.give_back(slot);
        }
    }
}

/// Move each rate's pace mark on by the starts taken; when the first rate out of starts allows
/// the next one (the worker claims again then).
async fn move_rates<'r, D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    rooms: impl Iterator<Item = &'r Room>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
    let mut next_start_on: Option<chrono::DateTime<chrono::Utc>> = None;
    for room in rooms {
        let Some(rate) = room.row.limit.rate else { continue };
        let grant = rate.grant(room.row.next_on, now, room.taken);
        if room.taken > 0 {
            let sql = "UPDATE task_run_limits SET next_on = $2 WHERE name = $1";
            db.exec(Some(&mut *tx), sql, args![room.row.name.as_str(), grant.next_on]).await?;
        }
        // Out of starts: claim again when the next is allowed.
        if room.taken == room.left && grant.due_on > now {
            next_start_on = Some(next_start_on.map_or(grant.due_on, |t| t.min(grant.due_on)));
        }
    }
    Ok(next_start_on)
}

/// Due tasks in claim order, of queues and handlers with room, kept while they fit (the first
/// always does); the room they take is counted. A limited queue's are read apart, no more than
/// its room: read with the others, those it cannot take would crowd out the others' in the
/// claim's `LIMIT`. The keys' limits of the queues limited per key are kept in `keys`.
#[allow(clippy::too_many_arguments)]
async fn pick<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    req: &ClaimRequest<'_>,
    open_queues: &[String],
    open_handlers: Option<&[String]>,
    full_handlers: &[String],
    queue_room: &mut HashMap<String, Room>,
    handler_room: &mut HashMap<String, Room>,
    keys: &mut PerKey,
    places: &DeepPlaces,
) -> Result<Vec<Picked>> {
    let of_handlers = match open_handlers {
        Some(_) => "AND task_handler_class IN ($4)",
        None => "AND task_handler_class NOT IN ($5)",
    };
    let conds = format!("{} AND {} {of_handlers}", key_reads::due(), transitions::NOT_PAUSED);
    let mut due = Vec::new();
    for read in &reads(req, open_queues, queue_room, keys) {
        let found = read_due(db, tx, req, read, &conds, open_handlers, full_handlers, places).await?;
        for r in &found {
            let order = (r.int("priority")?.unwrap_or(0), r.time("scheduled_on")?, rows::id(r, "id")?);
            let (queue, handler) =
                (r.text("queue")?.unwrap_or_default(), r.text("task_handler_class")?.unwrap_or_default());
            let pace = if read.paced.is_some() { r.int("pace_us")? } else { None };
            due.push((order, queue, handler, r.text("share_key")?, pace));
        }
    }
    due.sort_by_key(|d| d.0);
    let slots = due.iter().filter_map(|(_, q, _, k, pace)| k.clone().map(|k| ((q.clone(), k), *pace)));
    keys.rooms(queue_room, slots, req.now, req.limit);
    let mut picked = Vec::new();
    for ((_, _, id), queue, handler, key, _) in due {
        if picked.len() >= req.limit as usize {
            break;
        }
        let fits = |rooms: &HashMap<String, Room>, name: &str| rooms.get(name).is_none_or(|r| r.taken < r.left);
        let slot = key.map(|k| (queue.clone(), k));
        if fits(queue_room, &queue) && fits(handler_room, &handler) && keys.fits(slot.as_ref()) {
            for (rooms, name) in [(&mut *queue_room, &queue), (&mut *handler_room, &handler)] {
                if let Some(room) = rooms.get_mut(name.as_str()) {
                    room.taken += 1;
                }
            }
            if let Some(slot) = &slot {
                keys.take(slot.clone());
            }
            picked.push(Picked { id, queue, handler, slot });
        }
    }
    Ok(picked)
}

/// One read's due tasks, in claim order: a queue limited per key that leaves keys out is
/// bounded by the tasks it walks, not the tasks it keeps (see [`key_reads`]).
#[allow(clippy::too_many_arguments)]
async fn read_due<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    req: &ClaimRequest<'_>,
    read: &Read,
    conds: &str,
    open_handlers: Option<&[String]>,
    full_handlers: &[String],
    places: &DeepPlaces,
) -> Result<Vec<D::Row>> {
    let values = [
        Arg::Text(Some(&read.queue)),
        Arg::Time(req.now),
        Arg::from(read.most),
        Arg::Texts(open_handlers.unwrap_or_default()),
        Arg::Texts(full_handlers),
        Arg::Texts(&read.full_keys),
        per_key::paced_arg(read.paced, req.now),
    ];
    let (mut of_keys, mut pace) = (String::from("1 = 1"), "");
    if !read.full_keys.is_empty() {
        of_keys.push_str(" AND (share_key IS NULL OR share_key NOT IN ($6))");
    }
    if read.paced.is_some() {
        of_keys.push_str(per_key::NOT_PACED_OUT);
        pace = per_key::PACE_COLUMN;
    }
    if read.full_keys.is_empty() && read.paced.is_none() {
        let sql = format!("SELECT {COLUMNS} FROM task_queue WHERE {conds} {ORDER} LIMIT $3{}", D::SKIP_LOCKED);
        return db.rows(Some(&mut *tx), &sql, &values).await;
    }
    let (cols, extra, most) = (COLUMNS, pace, read.most);
    let (queue, conds, filter, values) = (read.queue.as_str(), conds.to_string(), of_keys, values.to_vec());
    let (pace, now) = (read.paced, req.now);
    let sign = key_reads::sign(&read.full_keys, open_handlers, full_handlers, pace);
    let read = KeyRead { queue, cols, conds, filter, extra, values, most, sign, pace, now };
    key_reads::read(db, tx, &read, places).await
}

/// A task a limited claim picked, and the room it takes.
struct Picked {
    id: TaskId,
    queue: String,
    handler: String,
    slot: Option<per_key::Slot>,
}

/// The columns a limited claim reads of each due task, and their order.
const COLUMNS: &str = "id, queue, task_handler_class, priority, scheduled_on, share_key";
const ORDER: &str = "ORDER BY priority, scheduled_on, id";

/// One read of a limited claim: one queue's, so that its condition is an equality and the claim
/// index yields its tasks in claim order (with `queue IN (…)`, PostgreSQL sorted every due task of
/// the queue: 87 ms at each claim of a backlog of 100,000, against 0.2 ms).
struct Read {
    /// The queue it reads.
    queue: String,
    /// How many tasks at most.
    most: u32,
    /// Keys at their cap, whose tasks it leaves out.
    full_keys: Vec<String>,
    /// The queue's rate per key: the tasks of keys out of starts are left out.
    paced: Option<Rate>,
}

/// The reads of a limited claim, a queue each: a limited queue's at most its room. A queue limited per key leaves out the keys with no room, and as a key
/// with room may have more tasks read than it can take, it reads more.
fn reads(
    req: &ClaimRequest<'_>,
    open_queues: &[String],
    queue_room: &HashMap<String, Room>,
    keys: &PerKey,
) -> Vec<Read> {
    let (limited, free): (Vec<&String>, Vec<&String>) = open_queues.iter().partition(|q| queue_room.contains_key(*q));
    let mut reads = Vec::new();
    for q in limited {
        let Some(room) = queue_room.get(q) else { continue };
        let limit = room.row.limit;
        let most = room.left.min(req.limit);
        reads.push(Read {
            queue: q.clone(),
            most: if limit.is_per_key() { most.saturating_mul(PER_KEY_READ) } else { most },
            full_keys: limit.max_running_per_key.map(|cap| keys.full(q, cap)).unwrap_or_default(),
            paced: limit.rate_per_key,
        });
    }
    for q in free {
        reads.push(Read { queue: q.clone(), most: req.limit, full_keys: Vec::new(), paced: None });
    }
    reads
}

/// How many times its room a queue limited per key reads, at most.
const PER_KEY_READ: u32 = 4;

/// Lower each concurrency limit's room by its runs in flight, by `column`.
async fn in_flight<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    column: &str,
    rooms: &mut HashMap<String, Room>,
) -> Result<()> {
    let names: Vec<String> =
        rooms.iter().filter(|(_, r)| r.row.limit.max_running.is_some()).map(|(n, _)| n.clone()).collect();
    if names.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT {column} AS name, count(*) AS n FROM task_queue
         WHERE last_status = {RUNNING} AND {column} IN ($1) GROUP BY {column}"
    );
    let mut running: HashMap<String, u64> = HashMap::new();
    for r in &db.rows(Some(tx), &sql, args![names.as_slice()]).await? {
        running.insert(r.text("name")?.unwrap_or_default(), rows::id(r, "n")?.max(0) as u64);
    }
    for (name, room) in rooms.iter_mut() {
        if let Some(max) = room.row.limit.max_running {
            let free = u64::from(max).saturating_sub(running.get(name).copied().unwrap_or(0));
            room.left = room.left.min(u32::try_from(free).unwrap_or(u32::MAX));
        }
    }
    Ok(())
}
