//! Concurrency limits across workers: at most N runs of a queue, or of a handler, in flight on
//! all workers together ([`RunLimits`], from the operator's configuration).
//!
//! A claim that touches a limited queue or handler is one transaction that
//! 1. locks one row per limit it touches (`task_run_limits`, in name order, so two claims never
//!    deadlock on them): claims of the same limits take turns, others never wait on them;
//! 2. counts the runs in flight of each limit (by the index `task_queue_running`; MySQL's claim index);
//! 3. reads due tasks in claim order, leaving out queues and handlers with no room left, and
//!    keeps those that fit the room of both their queue and their handler;
//! 4. claims exactly those ([`Dialect::claim_these`]).
//!
//! The transaction is READ COMMITTED ([`Dialect::begin_read_committed`]), and the count is read
//! after the lock is held, so it sees every claim committed before, whatever the server's
//! default isolation. SQLite's write transactions exclude each other already: no lock rows there.
//!
//! A run counts from its claim until its outcome is written, so a worker whose run just ended
//! finds room for its successor only once the outcome is in (its own slot is free before). (A run cancelled or timed out elsewhere
//! stops counting at once, while its guest may run on until its worker's next check, within a
//! second.)

use std::collections::{BTreeSet, HashMap};

use super::super::dialect::{transaction_read_committed, ClaimRequest, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg, RUNNING, SCHEDULED};
use super::super::transitions;
use crate::error::{Error, Result};
use crate::model::*;

/// Claim as the request asks, within its limits.
pub async fn claim<D: Dialect>(db: &D, req: &ClaimRequest<'_>) -> Result<Vec<ClaimedRun>> {
    let Some(limits) = req.limits.filter(|l| l.apply_to(req.queues, req.handlers)) else {
        return db.claim(req).await;
    };
    let queues: Vec<(&String, u32)> = req.queues.iter().filter_map(|q| Some((q, *limits.queues.get(q)?))).collect();
    let handlers: Vec<(&String, u32)> = match req.handlers {
        Some(hs) => hs.iter().filter_map(|h| Some((h, *limits.handlers.get(h)?))).collect(),
        None => limits.handlers.iter().map(|(h, n)| (h, *n)).collect(),
    };
    let keys: BTreeSet<String> = queues
        .iter()
        .map(|(q, _)| format!("queue:{q}"))
        .chain(handlers.iter().map(|(h, _)| format!("handler:{h}")))
        .collect();
    let keys: Vec<String> = if D::ONE_WRITER { Vec::new() } else { keys.into_iter().collect() };
    // A limit's row is made by the first claim that needs it (then kept for good).
    for _ in 0..2 {
        let (keys, queues, handlers) = (&keys, &queues, &handlers);
        let done = transaction_read_committed(db, |tx| {
            Box::pin(async move {
                if !keys.is_empty() && lock(db, &mut tx.tx, keys).await? < keys.len() {
                    return Ok(None);
                }
                Ok(Some(claim_within(db, &mut tx.tx, req, queues, handlers).await?))
            })
        })
        .await?;
        if let Some(out) = done {
            return Ok(out);
        }
        add_lock_rows(db, keys).await?;
    }
    Err(Error::invalid("claim", "the rows of the concurrency limits could not be made"))
}

/// Lock the rows of these limits; how many there are.
async fn lock<D: Dialect>(db: &D, tx: &mut TxOf<D>, keys: &[String]) -> Result<usize> {
    let sql = format!("SELECT name FROM task_run_limits WHERE name IN ($1) ORDER BY name{}", D::FOR_UPDATE);
    Ok(db.rows(Some(tx), &sql, args![keys]).await?.len())
}

async fn add_lock_rows<D: Dialect>(db: &D, keys: &[String]) -> Result<()> {
    for key in keys {
        match db.exec(None, "INSERT INTO task_run_limits (name) VALUES ($1)", args![key]).await {
            Ok(_) => {}
            // Made meanwhile by another claim.
            Err(e) if e.is_unique_violation() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Steps 2 to 4, with the limits' rows locked.
async fn claim_within<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    req: &ClaimRequest<'_>,
    queues: &[(&String, u32)],
    handlers: &[(&String, u32)],
) -> Result<Vec<ClaimedRun>> {
    let mut queue_room = room(db, tx, "queue", queues).await?;
    let mut handler_room = room(db, tx, "task_handler_class", handlers).await?;
    let open_queues: Vec<String> =
        req.queues.iter().filter(|q| queue_room.get(q.as_str()) != Some(&0)).cloned().collect();
    let full_handlers: Vec<String> =
        handler_room.iter().filter(|(_, n)| **n == 0).map(|(h, _)| h.to_string()).collect();
    let open_handlers: Option<Vec<String>> =
        req.handlers.map(|hs| hs.iter().filter(|h| !full_handlers.contains(h)).cloned().collect());
    if open_queues.is_empty() || open_handlers.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    // Due tasks in claim order, of queues and handlers with room: the first always fits.
    let of_handlers = match open_handlers {
        Some(_) => "AND task_handler_class IN ($4)",
        None => "AND task_handler_class NOT IN ($5)",
    };
    let sql = format!(
        "SELECT id, queue, task_handler_class FROM task_queue
         WHERE last_status = {SCHEDULED} AND queue IN ($1) AND scheduled_on <= $2 AND {} {of_handlers}
         ORDER BY priority, scheduled_on, id LIMIT $3{}",
        transitions::NOT_PAUSED,
        D::SKIP_LOCKED
    );
    let values = [
        Arg::Texts(&open_queues),
        Arg::Time(req.now),
        Arg::from(req.limit),
        Arg::Texts(open_handlers.as_deref().unwrap_or_default()),
        Arg::Texts(&full_handlers),
    ];
    let mut picked = Vec::new();
    for r in &db.rows(Some(&mut *tx), &sql, &values).await? {
        let (queue, handler) =
            (r.text("queue")?.unwrap_or_default(), r.text("task_handler_class")?.unwrap_or_default());
        let fits = |room: &HashMap<&str, u32>, name: &str| room.get(name).is_none_or(|n| *n > 0);
        if fits(&queue_room, &queue) && fits(&handler_room, &handler) {
            for (room, name) in [(&mut queue_room, &queue), (&mut handler_room, &handler)] {
                if let Some(n) = room.get_mut(name.as_str()) {
                    *n -= 1;
                }
            }
            picked.push(rows::id(r, "id")?);
        }
    }
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    let narrowed = ClaimRequest { queues: &open_queues, limit: picked.len() as u32, ..*req };
    db.claim_these(tx, &narrowed, &picked).await
}

/// Room left under each limit: its maximum less the runs in flight, by `column`.
async fn room<'a, D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    column: &str,
    limits: &[(&'a String, u32)],
) -> Result<HashMap<&'a str, u32>> {
    let mut room: HashMap<&str, u32> = limits.iter().map(|(name, n)| (name.as_str(), *n)).collect();
    if limits.is_empty() {
        return Ok(room);
    }
    let names: Vec<String> = limits.iter().map(|(name, _)| name.to_string()).collect();
    let sql = format!(
        "SELECT {column} AS name, count(*) AS n FROM task_queue
         WHERE last_status = {RUNNING} AND {column} IN ($1) GROUP BY {column}"
    );
    for r in &db.rows(Some(tx), &sql, args![names.as_slice()]).await? {
        let name = r.text("name")?.unwrap_or_default();
        let running = rows::id(r, "n")?.max(0) as u64;
        if let Some(n) = room.get_mut(name.as_str()) {
            *n = u64::from(*n).saturating_sub(running) as u32;
        }
    }
    Ok(room)
}
