//! Fair shares between keys: a keyed task's due time is its turn.
//!
//! Claims take due tasks in order of priority, then due time. A key's tasks added now are given
//! due times one *stride* apart (1 µs / the key's weight), starting from the later of the key's
//! last turn and the queue's *head* (the due time of the first task waiting in the queue at that
//! priority, or now): a start-time fair queue. So a key that has queued 10,000 tasks holds turns
//! spread over 10 ms, and a key that comes later starts at the head, its tasks interleaved with
//! the first's one for one (by weight). Claims stay one index range, whatever the number of keys:
//! the order is the due time they already read.
//!
//! The turns are counted in picoseconds (so weights up to 1,000 keep their ratios), kept in
//! nanoseconds in `task_keys` and written as due times in microseconds; ties go by id. A key's
//! row is locked by the transaction that adds its tasks, so two adds of one key never take the
//! same turns. A key whose turns ran ahead (a backlog) holds its later tasks back from claims by
//! at most a microsecond a task: 1,000,000 tasks by a second, far faster than tasks drain.
//!
//! Tasks due later (`--at`, `--in`) keep their time and take no turn; a retry or a snooze is
//! due when it says.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::{Cells, ConnOf};
use super::super::sql::{Arg, SCHEDULED};
use crate::error::Result;
use crate::model::{LimitScope, NewTask, DEFAULT_WEIGHT};

/// Keys written in one statement at most.
const KEYS_A_STATEMENT: usize = 500;

/// `tasks` with the keyed ones due now given their turns as due times, or None when none is
/// keyed and due now. Run inside the adding transaction (it locks the keys' rows).
pub(crate) async fn turns<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    tasks: &[NewTask],
    now: DateTime<Utc>,
) -> Result<Option<Vec<NewTask>>> {
    let due_now = |t: &NewTask| t.key.is_some() && t.scheduled_on.is_none_or(|at| at <= now);
    if !tasks.iter().any(due_now) {
        return Ok(None);
    }
    let names: Vec<String> = tasks
        .iter()
        .filter(|t| due_now(t))
        .filter_map(|t| t.key.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut last = HashMap::with_capacity(names.len());
    for chunk in names.chunks(KEYS_A_STATEMENT) {
        // Made if new and locked (the upsert of a row holds it), then read.
        write::<D>(conn, chunk.iter().map(|n| (n.as_str(), 0))).await?;
        let sql = format!("SELECT name, turn_ns FROM task_keys WHERE name IN ($1){}", D::FOR_UPDATE);
        for r in D::rows_on(conn, &sql, &[Arg::Texts(chunk)]).await? {
            last.insert(r.text("name")?.unwrap_or_default(), i128::from(r.int("turn_ns")?.unwrap_or(0)) * 1_000);
        }
    }
    let weights = weights::<D>(conn, &names).await?;
    let mut heads: HashMap<(String, i32), i64> = HashMap::new();
    let now_ns = nanos(now);
    let mut out = tasks.to_vec();
    for t in out.iter_mut().filter(|t| due_now(t)) {
        let Some(key) = t.key.clone() else { continue };
        let at = (t.queue.clone(), t.priority);
        let head = match heads.get(&at) {
            Some(h) => *h,
            None => {
                let h = head::<D>(conn, &t.queue, t.priority).await?.map_or(now_ns, |h| h.min(now_ns));
                heads.insert(at, h);
                h
            }
        };
        // In picoseconds, so that weights up to 1,000 keep their ratios.
        let stride = 1_000_000 / i128::from(weights.get(&key).copied().unwrap_or(DEFAULT_WEIGHT).max(1));
        let turn = last.get(&key).map_or(i128::from(head) * 1_000, |l| (i128::from(head) * 1_000).max(l + stride));
        last.insert(key, turn);
        let micros = i64::try_from(turn.div_euclid(1_000_000)).unwrap_or(i64::MAX);
        t.scheduled_on = Some(DateTime::from_timestamp_micros(micros).unwrap_or(now));
    }
    let ns = |ps: i128| i64::try_from(ps.div_euclid(1_000)).unwrap_or(i64::MAX);
    let written: Vec<(&str, i64)> = names.iter().map(|n| (n.as_str(), last.get(n).copied().map_or(0, ns))).collect();
    for chunk in written.chunks(KEYS_A_STATEMENT) {
        write::<D>(conn, chunk.iter().copied()).await?;
    }
    Ok(Some(out))
}

/// Write keys' turns, each kept at the later of the one written and the one held.
async fn write<'a, D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    rows: impl Iterator<Item = (&'a str, i64)>,
) -> Result<()> {
    let mut values: Vec<Arg<'a>> = Vec::new();
    let mut tuples = Vec::new();
    for (name, turn) in rows {
        values.push(Arg::Text(Some(name)));
        values.push(Arg::Int(Some(turn)));
        tuples.push(format!("(${}, ${})", values.len() - 1, values.len()));
    }
    let upsert = D::upsert("task_keys", &["name"], &[], &["turn_ns"], &[]);
    let sql = format!("INSERT INTO task_keys (name, turn_ns) VALUES {} {upsert}", tuples.join(", "));
    D::exec_on(conn, &sql, &values).await?;
    Ok(())
}

/// The weights set of these keys (`key:NAME` limits).
async fn weights<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, keys: &[String]) -> Result<HashMap<String, u32>> {
    let mut out = HashMap::new();
    for chunk in keys.chunks(KEYS_A_STATEMENT) {
        let names: Vec<String> = chunk.iter().map(|k| LimitScope::Key.name(k)).collect();
        let sql = "SELECT name, weight FROM task_run_limits WHERE name IN ($1) AND weight IS NOT NULL";
        for r in D::rows_on(conn, sql, &[Arg::Texts(&names)]).await? {
            let name = r.text("name")?.unwrap_or_default();
            let (Some(key), Some(w)) = (name.strip_prefix("key:"), r.int("weight")?) else { continue };
            // A weight out of range (written by hand) counts as the nearest in range.
            out.insert(key.to_string(), u32::try_from(w.clamp(1, 1_000)).unwrap_or(DEFAULT_WEIGHT));
        }
    }
    Ok(out)
}

/// The due time of the first task waiting in `queue` at `priority`, in nanoseconds.
async fn head<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, queue: &str, priority: i32) -> Result<Option<i64>> {
    let sql = format!(
        "SELECT scheduled_on FROM task_queue WHERE last_status = {SCHEDULED} AND queue = $1 AND priority = $2
         ORDER BY scheduled_on LIMIT 1"
    );
    let found = D::rows_on(conn, &sql, &[Arg::Text(Some(queue)), Arg::Int(Some(i64::from(priority)))]).await?;
    Ok(found.first().map(|r| r.time("scheduled_on")).transpose()?.flatten().map(nanos))
}

/// A time in nanoseconds since the epoch (microseconds apart, as the databases keep it).
fn nanos(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros().saturating_mul(1_000)
}
