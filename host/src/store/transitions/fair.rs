//! Fair shares between keys: a keyed task's due time is its turn.
//!
//! Claims take due tasks in order of priority, then due time. A key's tasks added now are given
//! due times one *stride* apart (1 µs / the key's weight; in a queue with a `fuel_per_turn`, times
//! the key's fuel a run over it, see [`super::fuel`]), starting from the later of the key's
//! last turn and the queue's *head* at that priority (the latest turn of the handler's runs in
//! flight there, or the due time of the first waiting task, or now): a start-time fair queue. So
//! a key that has queued 10,000 tasks holds turns spread over 10 ms, and a key that comes later
//! starts at the head, its tasks interleaved with
//! the first's one for one (by weight). Claims stay one index range, whatever the number of keys:
//! the order is the due time they already read.
//!
//! The turns are counted in picoseconds (so weights up to 1,000 keep their ratios), kept in
//! nanoseconds in `task_keys`, a row a key in a queue, and written as due times in microseconds;
//! ties go by id. A key's row is locked by the transaction that adds its tasks, so two adds of
//! one key never take the same turns (rows are locked in one order: no deadlock between adds). A
//! key whose turns ran ahead (a backlog) holds its later tasks back from claims by its stride a
//! task: 1,000,000 tasks by a second at 1 µs, far faster than tasks drain; weighed by fuel, by up
//! to a millisecond a task whose runs burn a thousand turns' worth, which take longer still.
//!
//! Tasks due later (`--at`, `--in`) keep their time and take no turn; a retry or a snooze is
//! due when it says.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::{Cells, ConnOf};
use super::super::sql::{Arg, RUNNING, SCHEDULED};
use crate::error::Result;
use crate::model::{Limit, LimitScope, NewTask, DEFAULT_WEIGHT};

/// Keys written in one statement at most.
const KEYS_A_STATEMENT: usize = 500;

/// A key in a queue: the turns of each are counted apart, so a key's backlog in one queue does
/// not push its tasks in another back.
pub(crate) type Slot = (String, String);

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
    let slot = |t: &NewTask| t.key.clone().map(|k| (t.queue.clone(), k));
    let slots: Vec<Slot> =
        tasks.iter().filter(|t| due_now(t)).filter_map(slot).collect::<BTreeSet<_>>().into_iter().collect();
    let mut last = lock::<D>(conn, &slots).await?;
    let keys: Vec<String> = slots.iter().map(|(_, k)| k.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let queues: Vec<String> = slots.iter().map(|(q, _)| q.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let (weights, fuel_per_turn) = weights::<D>(conn, &keys, &queues).await?;
    let costs = super::fuel::costs::<D>(conn, &slots, &fuel_per_turn).await?;
    let mut heads: HashMap<(String, i32, String), i64> = HashMap::new();
    let now_ns = nanos(now);
    let mut out = tasks.to_vec();
    for t in out.iter_mut().filter(|t| due_now(t)) {
        let Some((queue, key)) = slot(t) else { continue };
        let at = (t.queue.clone(), t.priority, t.handler.clone());
        let head = match heads.get(&at) {
            Some(h) => *h,
            None => {
                let h = head::<D>(conn, t).await?.map_or(now_ns, |h| h.min(now_ns));
                heads.insert(at, h);
                h
            }
        };
        // In picoseconds, so that weights up to 1,000 keep their ratios; weighed by fuel, as
        // many thousandths of that as the key's runs cost (1 to 1,000,000).
        let weight = weights.get(&key).copied().unwrap_or(DEFAULT_WEIGHT);
        let stride = stride(costs.get(&(queue.clone(), key.clone())).copied().unwrap_or(1_000), weight);
        let head = i128::from(head) * 1_000;
        let turn = last.get(&(queue.clone(), key.clone())).map_or(head, |l| head.max(l + stride));
        last.insert((queue, key), turn);
        let micros = i64::try_from(turn.div_euclid(1_000_000)).unwrap_or(i64::MAX);
        t.scheduled_on = Some(DateTime::from_timestamp_micros(micros).unwrap_or(now));
    }
    let ns = |ps: i128| i64::try_from(ps.div_euclid(1_000)).unwrap_or(i64::MAX);
    let written: Vec<(&str, &str, i64)> =
        slots.iter().map(|s| (s.0.as_str(), s.1.as_str(), last.get(s).copied().map_or(0, ns))).collect();
    for chunk in written.chunks(KEYS_A_STATEMENT) {
        write::<D>(conn, chunk.iter().copied(), false).await?;
    }
    Ok(Some(out))
}

/// A key's stride in picoseconds: 1 µs over its weight, times `cost` thousandths (weighed by
/// fuel, [`super::fuel::cost`]; 1,000 otherwise).
pub(crate) fn stride(cost: i64, weight: u32) -> i128 {
    (1_000 * i128::from(cost) / i128::from(weight.max(1))).max(1)
}

/// Lock the rows of these slots (sorted: every add locks in one order), made if new, and read
/// their last turns, in picoseconds. The upsert holds the rows and, where the database can,
/// returns them: a `SELECT … IN (500 names)` of a table just grown is planned as a scan of it
/// on PostgreSQL (tens of ms a statement at 10,000 keys).
pub(crate) async fn lock<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, slots: &[Slot]) -> Result<HashMap<Slot, i128>> {
    let mut last = HashMap::with_capacity(slots.len());
    let mut keep = |r: &D::Row| -> Result<()> {
        let turn = i128::from(r.int("turn_ns")?.unwrap_or(0)) * 1_000;
        last.insert((r.text("queue")?.unwrap_or_default(), r.text("name")?.unwrap_or_default()), turn);
        Ok(())
    };
    for chunk in slots.chunks(KEYS_A_STATEMENT) {
        let held = write::<D>(conn, chunk.iter().map(|(q, k)| (q.as_str(), k.as_str(), 0)), D::RETURNING).await?;
        if D::RETURNING {
            held.iter().try_for_each(&mut keep)?;
            continue;
        }
        let mut by_queue: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (q, k) in chunk {
            by_queue.entry(q.as_str()).or_default().push(k.clone());
        }
        for (queue, names) in &by_queue {
            let sql = format!(
                "SELECT queue, name, turn_ns FROM task_keys WHERE queue = $1 AND name IN ($2){}",
                D::FOR_UPDATE
            );
            D::rows_on(conn, &sql, &[Arg::Text(Some(queue)), Arg::Texts(names)])
                .await?
                .iter()
                .try_for_each(&mut keep)?;
        }
    }
    Ok(last)
}

/// Write slots' turns, each kept at the later of the one written and the one held; with
/// `returning`, the rows as they are now.
async fn write<'a, D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    rows: impl Iterator<Item = (&'a str, &'a str, i64)>,
    returning: bool,
) -> Result<Vec<D::Row>> {
    let mut values: Vec<Arg<'a>> = Vec::new();
    let mut tuples = Vec::new();
    for (queue, name, turn) in rows {
        values.push(Arg::Text(Some(queue)));
        values.push(Arg::Text(Some(name)));
        values.push(Arg::Int(Some(turn)));
        tuples.push(format!("(${}, ${}, ${})", values.len() - 2, values.len() - 1, values.len()));
    }
    let upsert = D::upsert("task_keys", &["queue", "name"], &[], &["turn_ns"], &[]);
    let sql = format!("INSERT INTO task_keys (queue, name, turn_ns) VALUES {} {upsert}", tuples.join(", "));
    if returning {
        return D::rows_on(conn, &format!("{sql} RETURNING queue, name, turn_ns"), &values).await;
    }
    D::exec_on(conn, &sql, &values).await?;
    Ok(Vec::new())
}

/// The weights set of these keys (`key:NAME` limits), and the fuel per turn of these queues
/// that weigh their keys by fuel (`queue:NAME` limits).
pub(crate) async fn weights<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    keys: &[String],
    queues: &[String],
) -> Result<(HashMap<String, u32>, HashMap<String, u64>)> {
    let (mut weights, mut fuel) = (HashMap::new(), HashMap::new());
    let names = keys.iter().map(|k| LimitScope::Key.name(k)).chain(queues.iter().map(|q| LimitScope::Queue.name(q)));
    let names: Vec<String> = names.collect();
    for chunk in names.chunks(KEYS_A_STATEMENT) {
        let sql = "SELECT name, weight, fuel_per_turn FROM task_run_limits WHERE name IN ($1)
                   AND (weight IS NOT NULL OR fuel_per_turn IS NOT NULL)";
        for r in D::rows_on(conn, sql, &[Arg::Texts(chunk)]).await? {
            let name = r.text("name")?.unwrap_or_default();
            // Out of range (written by hand): the nearest in range.
            if let (Some(key), Some(w)) = (name.strip_prefix("key:"), r.int("weight")?) {
                weights.insert(key.to_string(), u32::try_from(w.clamp(1, 1_000)).unwrap_or(DEFAULT_WEIGHT));
            }
            if let (Some(queue), Some(f)) = (name.strip_prefix("queue:"), r.int("fuel_per_turn")?) {
                fuel.insert(queue.to_string(), u64::try_from(f).unwrap_or(0).max(Limit::MIN_FUEL_PER_TURN));
            }
        }
    }
    Ok((weights, fuel))
}

/// Where the claims of `t`'s handler in its queue at its priority are, in nanoseconds: the latest
/// turn among its runs in flight there (runs in flight are few), or, with none, the due time of
/// the first task waiting in the queue at that priority. (Not the first waiting task first: one
/// no worker serves would hold a new key's turns back there; and not another handler's runs,
/// whose workers may be ahead.)
async fn head<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, t: &NewTask) -> Result<Option<i64>> {
    let at = [Arg::Text(Some(&t.queue)), Arg::Int(Some(i64::from(t.priority))), Arg::Text(Some(&t.handler))];
    let running = format!(
        "SELECT max(scheduled_on) AS t FROM task_queue
         WHERE last_status = {RUNNING} AND queue = $1 AND priority = $2 AND task_handler_class = $3"
    );
    let found = D::rows_on(conn, &running, &at).await?;
    if let Some(t) = found.first().map(|r| r.time("t")).transpose()?.flatten() {
        return Ok(Some(nanos(t)));
    }
    let waiting = format!(
        "SELECT scheduled_on FROM task_queue WHERE last_status = {SCHEDULED} AND queue = $1 AND priority = $2
         ORDER BY scheduled_on LIMIT 1"
    );
    let found = D::rows_on(conn, &waiting, &at[..2]).await?;
    Ok(found.first().map(|r| r.time("scheduled_on")).transpose()?.flatten().map(nanos))
}

/// A time in nanoseconds since the epoch (microseconds apart, as the databases keep it).
fn nanos(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros().saturating_mul(1_000)
}
