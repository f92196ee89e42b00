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
//! finds room for its successor only once the outcome is in (its own slot is free before). (A run
//! cancelled or timed out elsewhere stops counting at once, while its guest may run on until its
//! worker's next check, within a second.) A run held back costs nothing: it is simply not claimed.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction_read_committed, ClaimRequest, Claimed, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg, RUNNING, SCHEDULED};
use super::super::transitions;
use super::limit_rows::{LimitRow, LIMIT_COLUMNS};
use crate::error::Result;
use crate::model::*;

/// Claim as the request asks, within its limits.
pub async fn claim<D: Dialect>(db: &D, req: &ClaimRequest<'_>) -> Result<Claimed> {
    let Some(limits) = req.limits.filter(|l| l.apply_to(req.queues, req.handlers)) else {
        return Ok(Claimed { runs: db.claim(req).await?, next_start_on: None });
    };
    let queues = req.queues.iter().filter(|q| limits.queues.contains_key(*q)).map(|q| LimitScope::Queue.name(q));
    let handlers: Vec<String> = match req.handlers {
        Some(hs) => {
            hs.iter().filter(|h| limits.handlers.contains_key(*h)).map(|h| LimitScope::Handler.name(h)).collect()
        }
        None => limits.handlers.keys().map(|h| LimitScope::Handler.name(h)).collect(),
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
            claim_within(db, &mut tx.tx, req, rows).await
        })
    })
    .await
}

/// One limited queue's or handler's room in this claim.
struct Room {
    row: LimitRow,
    /// Runs it may take in this claim.
    left: u32,
    /// Runs taken.
    taken: u32,
}

/// Steps 2 to 4, with the limits' rows locked.
async fn claim_within<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    req: &ClaimRequest<'_>,
    rows: Vec<LimitRow>,
) -> Result<Claimed> {
    // The time the rates count by: the server's, read under the limits' locks, for workers.
    let mut now = req.now;
    if let (true, true, Some(sql)) = (req.paced_by_server, rows.iter().any(|r| r.limit.rate.is_some()), D::SERVER_TIME)
    {
        now =
            db.rows(Some(&mut *tx), sql, &[]).await?.first().map(|r| r.time("t")).transpose()?.flatten().unwrap_or(now);
    }
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
        )
        .await?;
    }
    let mut next_start_on: Option<DateTime<Utc>> = None;
    for room in queue_room.values().chain(handler_room.values()) {
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
    if picked.is_empty() {
        return Ok(Claimed { runs: Vec::new(), next_start_on });
    }
    // Started at the time the rates counted by: a claim that waited on the limits' locks starts
    // its runs when it got them, as their starts are paced.
    let narrowed = ClaimRequest { queues: &open_queues, limit: picked.len() as u32, now, ..*req };
    Ok(Claimed { runs: db.claim_these(tx, &narrowed, &picked).await?, next_start_on })
}

/// Due tasks in claim order, of queues and handlers with room, kept while they fit (the first
/// always does); the room they take is counted. A limited queue's are read apart, no more than
/// its room: read with the others, those it cannot take would crowd out the others' in the
/// claim's `LIMIT`.
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
) -> Result<Vec<TaskId>> {
    let of_handlers = match open_handlers {
        Some(_) => "AND task_handler_class IN ($4)",
        None => "AND task_handler_class NOT IN ($5)",
    };
    let sql = |of_keys: &str| {
        format!(
            "SELECT id, queue, task_handler_class, priority, scheduled_on, share_key FROM task_queue
             WHERE last_status = {SCHEDULED} AND queue IN ($1) AND scheduled_on <= $2 AND {} {of_handlers}{of_keys}
             ORDER BY priority, scheduled_on, id LIMIT $3{}",
            transitions::NOT_PAUSED,
            D::SKIP_LOCKED
        )
    };
    let running = running_by_key(db, tx, queue_room).await?;
    let mut due = Vec::new();
    for (queues, most, full_keys) in &reads(req, open_queues, queue_room, &running) {
        let values = [
            Arg::Texts(queues),
            Arg::Time(req.now),
            Arg::from(*most),
            Arg::Texts(open_handlers.unwrap_or_default()),
            Arg::Texts(full_handlers),
            Arg::Texts(full_keys.as_deref().unwrap_or_default()),
        ];
        let sql = match full_keys {
            Some(keys) if !keys.is_empty() => sql(" AND (share_key IS NULL OR share_key NOT IN ($6))"),
            _ => sql(""),
        };
        for r in &db.rows(Some(&mut *tx), &sql, &values).await? {
            let order = (r.int("priority")?.unwrap_or(0), r.time("scheduled_on")?, rows::id(r, "id")?);
            let (queue, handler) =
                (r.text("queue")?.unwrap_or_default(), r.text("task_handler_class")?.unwrap_or_default());
            due.push((order, queue, handler, r.text("share_key")?));
        }
    }
    due.sort_by_key(|d| d.0);
    let mut keys = key_rooms(queue_room, &running, &due);
    let mut picked = Vec::new();
    for ((_, _, id), queue, handler, key) in due {
        if picked.len() >= req.limit as usize {
            break;
        }
        let fits = |rooms: &HashMap<String, Room>, name: &str| rooms.get(name).is_none_or(|r| r.taken < r.left);
        let slot = key.map(|k| (queue.clone(), k));
        let key_fits = slot.as_ref().and_then(|s| keys.get(s)).is_none_or(|left| *left > 0);
        if fits(queue_room, &queue) && fits(handler_room, &handler) && key_fits {
            for (rooms, name) in [(&mut *queue_room, &queue), (&mut *handler_room, &handler)] {
                if let Some(room) = rooms.get_mut(name.as_str()) {
                    room.taken += 1;
                }
            }
            if let Some(left) = slot.and_then(|s| keys.get_mut(&s)) {
                *left -= 1;
            }
            picked.push(id);
        }
    }
    Ok(picked)
}

/// The reads of a limited claim: each limited queue's apart, at most its room, and the other
/// queues' together; each with the queues it reads, how many tasks at most, and the keys left
/// out (a queue capped per key: a full key's tasks are left out, and as a key with room may
/// have more tasks read than it can take, it reads more).
fn reads(
    req: &ClaimRequest<'_>,
    open_queues: &[String],
    queue_room: &HashMap<String, Room>,
    running: &HashMap<(String, String), u64>,
) -> Vec<(Vec<String>, u32, Option<Vec<String>>)> {
    let (limited, free): (Vec<&String>, Vec<&String>) = open_queues.iter().partition(|q| queue_room.contains_key(*q));
    let mut reads = Vec::new();
    for q in limited {
        let Some(room) = queue_room.get(q) else { continue };
        let (most, full) = match room.row.limit.max_running_per_key {
            Some(cap) => {
                let full = running.iter().filter(|((rq, _), n)| rq == q && **n >= u64::from(cap));
                let full: Vec<String> = full.map(|((_, k), _)| k.clone()).collect();
                (room.left.min(req.limit).saturating_mul(PER_KEY_READ), Some(full))
            }
            None => (room.left.min(req.limit), None),
        };
        reads.push((vec![q.clone()], most, full));
    }
    if !free.is_empty() {
        reads.push((free.into_iter().cloned().collect(), req.limit, None));
    }
    reads
}

/// How many times its room a queue capped per key reads, at most.
const PER_KEY_READ: u32 = 4;

/// The runs in flight of each key in the queues capped per key, by (queue, key): runs in
/// flight are few (by the index `task_queue_running`).
async fn running_by_key<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    queue_room: &HashMap<String, Room>,
) -> Result<HashMap<(String, String), u64>> {
    let queues: Vec<String> =
        queue_room.iter().filter(|(_, r)| r.row.limit.max_running_per_key.is_some()).map(|(q, _)| q.clone()).collect();
    let mut running = HashMap::new();
    if queues.is_empty() {
        return Ok(running);
    }
    let sql = format!(
        "SELECT queue, share_key, count(*) AS n FROM task_queue
         WHERE last_status = {RUNNING} AND queue IN ($1) AND share_key IS NOT NULL GROUP BY queue, share_key"
    );
    for r in &db.rows(Some(tx), &sql, args![queues.as_slice()]).await? {
        let at = (r.text("queue")?.unwrap_or_default(), r.text("share_key")?.unwrap_or_default());
        running.insert(at, rows::id(r, "n")?.max(0) as u64);
    }
    Ok(running)
}

/// The room left of each key among `due` in a queue capped per key (its cap less its runs in
/// flight in that queue), by (queue, key).
fn key_rooms(
    queue_room: &HashMap<String, Room>,
    running: &HashMap<(String, String), u64>,
    due: &[DueTask],
) -> HashMap<(String, String), u64> {
    let capped = |q: &str| queue_room.get(q).and_then(|r| r.row.limit.max_running_per_key);
    let mut rooms = HashMap::new();
    for d in due {
        let (Some(cap), Some(key)) = (capped(&d.1), &d.3) else { continue };
        let at = (d.1.clone(), key.clone());
        let left = u64::from(cap).saturating_sub(running.get(&at).copied().unwrap_or(0));
        rooms.entry(at).or_insert(left);
    }
    rooms
}

/// A due task read: its claim order (priority, due time, id), queue, handler and key.
type DueTask = ((i64, Option<DateTime<Utc>>, TaskId), String, String, Option<String>);

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
