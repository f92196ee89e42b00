//! The read of a queue limited per key, bounded by the tasks it walks.
//!
//! A limited claim leaves out the due tasks of keys out of room (at their cap, or out of
//! starts) by a condition on each task read. Turns interleave keys, so such tasks are usually a
//! share of the head of the queue; but when every key near the head is out of room, a read
//! that must find `$3` tasks walks every due task of those keys: a backlog of 100,000 was read
//! whole by each claim (15 – 94 ms on PostgreSQL), at every poll of every idle worker.
//!
//! So a read walks at most [`WINDOW`] due tasks from the head of the queue. When it finds too
//! few there and the window was full, it goes on *deeper*: another window, from where the last
//! deep read of this queue stopped (a place kept by the store, [`DeepPlaces`]), or from the
//! head window's end. Each claim walks at most four windows (two reads, two probes of where a
//! window ends), whatever the backlog. On MariaDB a window's end is found first, from the claim
//! index alone, and its read bounded by it ([`Walk::Bounded`]): its windows hold the due tasks
//! of every handler. (They were bounded by `ROWS EXAMINED`, which counts a task once or three
//! times as the plan goes, and other handlers' tasks, while the next window started where one of
//! the worker's handlers' tasks would end: the tasks between were never read.)
//!
//! A task that fits behind a backlog of `n` due tasks that do not is found within `n / WINDOW`
//! claims of one worker (a task near the head, as a new key's turns are, at once); a deep read
//! that reaches the last due task starts the next lap at the head window's end again.
//!
//! Tasks are only read here; the claim locks and checks again those it takes
//! ([`Dialect::claim_these`]), so a place kept from an earlier claim is a hint, never a promise.
//!
//! A *lap* is the deep reads from the head window's end to the last due task (one claim when
//! the queue's due tasks fit in a window). Once a lap in which no read found a task that fits
//! ends, with the same keys left out, the same handlers and no task added meanwhile, the queue
//! is *dry*: its claims read nothing of it (one look at the newest task's id instead) for as
//! long as that lap took, between [`DRY_FOR`] and [`DRY_MOST`] (a lap held up between claims,
//! its worker busy elsewhere, does not leave the queue unread as long), or until a task is
//! added or the keys left out change (a full key's run ended, a cap changed), or the queue is
//! resumed. An idle worker under a cap per key polls at the short interval, so a backlog of full
//! keys was read two windows a poll (about 5 ms on PostgreSQL, 12 ms on MariaDB). What a dry
//! queue may miss is a task that became due by time or by a change of state, not by an add (a
//! retry, a snooze, a dependency met, a dead letter replayed), or an add whose id is below one
//! committed before it: it is found within two laps and the time left unread. A queue paced
//! per key is left unread no later than the first key paced out may start again (its pace mark
//! passing lets its tasks in without any of those changes), and not at all when a key paced
//! out opened while the lap went on (its tasks may lie behind where the lap has been); a rate
//! per key changed is a change of the sign.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, TimeDelta, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg, Walk, SCHEDULED};
use super::per_key;
use crate::error::{Error, Result};
use crate::model::Rate;

/// Due tasks a read walks at most from where it starts.
pub(super) const WINDOW: u32 = 2_000;

/// A task's place in claim order: its priority, due time and id.
type Place = (i64, DateTime<Utc>, i64);

/// A dry queue is not read for at least this long (unless a key paced out may start sooner).
pub(super) const DRY_FOR: TimeDelta = TimeDelta::seconds(1);

/// Nor for longer than this, however long its lap took.
pub(super) const DRY_MOST: TimeDelta = TimeDelta::seconds(10);

/// What decides which of a queue's due tasks fit (the keys left out, the handlers: the read's
/// `sign`) and the newest task's id when it was seen.
type Seen = (String, i64);

/// Where each queue's next deep read starts, and how its lap goes, kept across the claims of
/// one store.
#[derive(Debug, Default)]
pub struct DeepPlaces {
    places: Mutex<HashMap<String, Place>>,
    laps: Mutex<HashMap<String, Lap>>,
}

/// A queue's lap (see the module's documentation).
#[derive(Debug)]
struct Lap {
    seen: Seen,
    started: DateTime<Utc>,
    /// No read of the lap found a task that fits.
    clean: bool,
    /// A clean lap ended: not read again before this, the same seen.
    dry_until: Option<DateTime<Utc>>,
}

impl DeepPlaces {
    fn get(&self, queue: &str) -> Option<Place> {
        self.places.lock().ok().and_then(|m| m.get(queue).copied())
    }

    fn set(&self, queue: &str, place: Option<Place>) {
        let Ok(mut m) = self.places.lock() else { return };
        match place {
            Some(p) => m.insert(queue.to_string(), p),
            None => m.remove(queue),
        };
    }

    /// Whether `queue` is dry at `now`, as `seen`.
    fn dry(&self, queue: &str, seen: &Seen, now: DateTime<Utc>) -> bool {
        let Ok(laps) = self.laps.lock() else { return false };
        laps.get(queue).is_some_and(|l| l.seen == *seen && l.dry_until.is_some_and(|until| now < until))
    }

    /// When the lap of `queue` as `seen` that a read `begins` or goes on with started.
    fn lap_start(&self, queue: &str, seen: &Seen, begins: bool, now: DateTime<Utc>) -> DateTime<Utc> {
        let Ok(laps) = self.laps.lock() else { return now };
        match laps.get(queue) {
            Some(lap) if !begins && lap.seen == *seen => lap.started,
            _ => now,
        }
    }

    /// A read of `queue` as `seen` at `now`: whether it `begins` a lap, `ends` one, found
    /// nothing that fits, and when the first key paced out since the lap began opens (None: none).
    fn note(&self, queue: &str, seen: Seen, now: DateTime<Utc>, lap: (bool, bool), found_none: bool, opens: Opens) {
        let (begins, ends) = lap;
        let Ok(mut laps) = self.laps.lock() else { return };
        let lap = laps.entry(queue.to_string()).or_insert_with(|| Lap {
            seen: seen.clone(),
            started: now,
            clean: false,
            dry_until: None,
        });
        if begins {
            *lap = Lap { seen, started: now, clean: true, dry_until: None };
        } else if lap.seen != seen {
            // Changed in the middle of a lap: the lap vouches for nothing.
            *lap = Lap { seen, started: now, clean: false, dry_until: None };
        }
        lap.clean &= found_none;
        if ends && lap.clean {
            let until = now + (now - lap.started).clamp(DRY_FOR, DRY_MOST);
            lap.dry_until = match opens {
                // Opened while the lap went on: its tasks may lie behind where it has been.
                Some(open) if open <= now => None,
                Some(open) => Some(until.min(open)),
                None => Some(until),
            };
        }
    }
}

/// When the first key paced out since a lap began may start again.
type Opens = Option<DateTime<Utc>>;

/// One queue's read: its due tasks (`conds`, over `task_queue`, in claim order) that meet the
/// keys' `filter`, `$3` at most, with `extra` columns; `values` bind `$1` to `$7`.
pub(super) struct KeyRead<'a> {
    pub queue: &'a str,
    pub cols: &'a str,
    pub conds: String,
    pub filter: String,
    pub extra: &'a str,
    pub values: Vec<Arg<'a>>,
    pub most: u32,
    /// What decides which of its tasks fit, but for the keys' pace marks.
    pub sign: String,
    /// Its queue's rate per key: a key paced out lets its tasks in when its mark passes.
    pub pace: Option<Rate>,
    /// The claim's time.
    pub now: DateTime<Utc>,
}

/// The tasks of `read`, in claim order: from the head window, then, if that had too few, from
/// a deeper one.
pub(super) async fn read<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    read: &KeyRead<'_>,
    places: &DeepPlaces,
) -> Result<Vec<D::Row>> {
    let seen = seen_now(db, tx, read).await?;
    if places.dry(read.queue, &seen, read.now) {
        return Ok(Vec::new());
    }
    let head = window(db, tx, read, None, read.most).await?;
    let mut found = head.rows;
    let short = read.most as usize - found.len().min(read.most as usize);
    if short == 0 {
        places.note(read.queue, seen, read.now, (false, false), false, None);
        return Ok(found);
    }
    let begins = places.get(read.queue).is_none();
    let from = match places.get(read.queue) {
        Some(p) => p,
        None => match known_end(head.end, db, tx, read, None).await? {
            Some(end) => end,
            // Every due task was in the window: a lap of its own.
            None => {
                let opens = if found.is_empty() { first_open(db, tx, read, read.now).await? } else { None };
                places.note(read.queue, seen, read.now, (true, true), found.is_empty(), opens);
                return Ok(found);
            }
        },
    };
    let Window { rows: deeper, end } = window(db, tx, read, Some(from), short as u32).await?;
    let next = if deeper.len() >= short {
        deeper.last().map(place).transpose()?
    } else {
        known_end(end, db, tx, read, Some(from)).await?
    };
    places.set(read.queue, next);
    let (ends, found_none) = (next.is_none(), found.is_empty() && deeper.is_empty());
    let opens = match ends && found_none {
        true => first_open(db, tx, read, places.lap_start(read.queue, &seen, begins, read.now)).await?,
        false => None,
    };
    places.note(read.queue, seen, read.now, (begins, ends), found_none, opens);
    // A place kept from before may lie in the head window: its tasks are not read twice.
    let mut seen = std::collections::HashSet::new();
    for r in &found {
        seen.insert(rows::id(r, "id")?);
    }
    for r in deeper {
        if !seen.contains(&rows::id(&r, "id")?) {
            found.push(r);
        }
    }
    Ok(found)
}

/// When the first key of `read`'s queue paced out after `since` may start again: None when its
/// queue is not paced per key, or no key was.
async fn first_open<D: Dialect>(db: &D, tx: &mut TxOf<D>, read: &KeyRead<'_>, since: DateTime<Utc>) -> Result<Opens> {
    let Some(rate) = read.pace else { return Ok(None) };
    let sql = "SELECT MIN(next_us) AS m FROM task_key_paces WHERE queue = $1 AND next_us > $2";
    let found = db.rows(Some(tx), sql, args![read.queue, per_key::paced_out_after(rate, since)]).await?;
    Ok(found.first().map(|r| r.int("m")).transpose()?.flatten().and_then(|m| per_key::opens_at(rate, m)))
}

/// What decides which of a queue's due tasks fit, but for the keys' pace marks, as a read's
/// `sign`: the keys left out, the handlers (each sorted: read from maps, their order is not
/// theirs to keep) and the rate per key.
pub(super) fn sign(
    full_keys: &[String],
    open_handlers: Option<&[String]>,
    full_handlers: &[String],
    pace: Option<Rate>,
) -> String {
    let sorted = |names: &[String]| {
        let mut names = names.to_vec();
        names.sort();
        names
    };
    format!("{:?} {:?} {:?} {pace:?}", sorted(full_keys), open_handlers.map(sorted), sorted(full_handlers))
}

/// `read`'s sign, with whether its queue is paused (a paused queue's read finds nothing: resumed,
/// it is read at once), and the newest task's id (an add moves it).
async fn seen_now<D: Dialect>(db: &D, tx: &mut TxOf<D>, read: &KeyRead<'_>) -> Result<Seen> {
    let sql = "SELECT COALESCE(MAX(id), 0) AS id,
                      (SELECT COUNT(*) FROM task_queue_pauses WHERE queue = $1) AS paused
               FROM task_queue";
    let found = db.rows(Some(tx), sql, args![read.queue]).await?;
    let (newest, paused) = match found.first() {
        Some(r) => (rows::id(r, "id")?, r.int("paused")?.unwrap_or(0) > 0),
        None => (0, false),
    };
    Ok((format!("{} paused={paused}", read.sign), newest))
}

/// A row's place in claim order.
fn place(r: &impl Cells) -> Result<Place> {
    let Some(at) = r.time("scheduled_on")? else {
        return Err(Error::CorruptRow { table: "task_queue", reason: "scheduled_on is NULL".into() });
    };
    Ok((r.int("priority")?.unwrap_or(0), at, rows::id(r, "id")?))
}

/// A window's tasks, and where it ends when its read found that out first.
struct Window<R> {
    rows: Vec<R>,
    end: Option<Option<Place>>,
}

/// The tasks of the window of `read` after `from` (from the head: None) that meet its filter,
/// `most` at most.
async fn window<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    read: &KeyRead<'_>,
    from: Option<Place>,
    most: u32,
) -> Result<Window<D::Row>> {
    let (cols, filter, extra) = (read.cols, &read.filter, read.extra);
    const ORDER: &str = "ORDER BY priority, scheduled_on, id";
    match D::WALK {
        Walk::Nested { ordered } => {
            let conds = format!("{}{}", read.conds, past::<D>(">", 8, from.is_some()));
            let sql = format!(
                "SELECT *{extra} FROM (SELECT {cols} FROM task_queue WHERE {conds} {ORDER} LIMIT {WINDOW}) AS task_queue
                 WHERE {filter} {} LIMIT $3",
                if ordered { ORDER } else { "" }
            );
            Ok(Window { rows: db.rows(Some(tx), &sql, &values(read, most, from, None)).await?, end: None })
        }
        Walk::Bounded => {
            let end = end_of(db, tx, read, from).await?;
            let conds =
                format!("{}{}{}", read.conds, past::<D>(">", 8, from.is_some()), past::<D>("<=", 11, end.is_some()));
            let sql = format!("SELECT {cols}{extra} FROM task_queue WHERE {conds} AND {filter} {ORDER} LIMIT $3");
            Ok(Window { rows: db.rows(Some(tx), &sql, &values(read, most, from, end)).await?, end: Some(end) })
        }
    }
}

/// `end` when a window's read found it, else [`end_of`].
async fn known_end<D: Dialect>(
    end: Option<Option<Place>>,
    db: &D,
    tx: &mut TxOf<D>,
    read: &KeyRead<'_>,
    from: Option<Place>,
) -> Result<Option<Place>> {
    match end {
        Some(end) => Ok(end),
        None => end_of(db, tx, read, from).await,
    }
}

/// Where the window of `read` after `from` ends: the place of its last task, None when it holds
/// fewer than a window's tasks (the last due task is in it). A bounded walk's window is of the
/// due tasks of every handler, read from the claim index alone.
async fn end_of<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    read: &KeyRead<'_>,
    from: Option<Place>,
) -> Result<Option<Place>> {
    let conds = match D::WALK {
        Walk::Nested { .. } => read.conds.clone(),
        Walk::Bounded => due(),
    };
    let sql = format!(
        "SELECT priority, scheduled_on, id FROM task_queue WHERE {conds}{}
         ORDER BY priority, scheduled_on, id LIMIT 1 OFFSET {}",
        past::<D>(">", 8, from.is_some()),
        WINDOW - 1
    );
    db.rows(Some(tx), &sql, &values(read, read.most, from, None)).await?.first().map(place).transpose()
}

/// The conditions of a queue's due tasks that the claim index holds alone, `$1` the queue and
/// `$2` the claim's time: a read's `conds` begin with them.
pub(super) fn due() -> String {
    format!("last_status = {SCHEDULED} AND queue = $1 AND scheduled_on <= $2")
}

/// The condition, when `on`, of the tasks whose place in claim order is `op` (`>` or `<=`) the
/// place bound from `$n`: after a place as `$8` to `$10`, up to one as `$11` to `$13`.
fn past<D: Dialect>(op: &str, n: usize, on: bool) -> String {
    let (p, t, i) = (n, n + 1, n + 2);
    if !on {
        return String::new();
    }
    if D::ROW_VALUES {
        return format!(" AND (priority, scheduled_on, id) {op} (${p}, ${t}, ${i})");
    }
    // Spelled out, so that MariaDB reads it as ranges of the claim index.
    let strict = if op.starts_with('>') { ">" } else { "<" };
    format!(
        " AND (priority {strict} ${p} OR (priority = ${p} AND (scheduled_on {strict} ${t} OR (scheduled_on = ${t} AND id {op} ${i}))))"
    )
}

/// The read's values, `$3` set to `most`, a place after which to read as `$8` to `$10` and one
/// up to which as `$11` to `$13`.
fn values<'a>(read: &KeyRead<'a>, most: u32, from: Option<Place>, to: Option<Place>) -> Vec<Arg<'a>> {
    let mut values = read.values.clone();
    if let Some(most_arg) = values.get_mut(2) {
        *most_arg = Arg::from(most);
    }
    let places = match (from, to) {
        (None, None) => vec![],
        (from, None) => vec![from],
        // Unread when there is no `from`, but bound: `$11` is the eleventh.
        (from, Some(to)) => vec![Some(from.unwrap_or(to)), Some(to)],
    };
    for (priority, at, id) in places.into_iter().flatten() {
        values.extend([Arg::from(priority), Arg::Time(at), Arg::from(id)]);
    }
    values
}
