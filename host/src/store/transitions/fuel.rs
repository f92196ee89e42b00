//! Keys weighed by the fuel their runs burn (a queue's `fuel_per_turn`, docs/queue.md): each
//! key's fuel a run on average in the queue is a row of `task_key_fuel`, moved at the end of each
//! of its runs ([`charge`]) and read by the key's next add, whose turns it spaces
//! ([`super::fair`]: a key whose runs burn ten times another's is given a tenth of the turns).
//!
//! The average is the mean of a key's first [`SPAN`] runs, then moves an eighth of the way to
//! each run's fuel: a key whose runs grow dearer is weighed by that within a few runs. Rows are
//! written by ends only (adds read them unlocked): an end never waits for an add, and rows are
//! locked in one order, so two ends never deadlock.

use std::collections::{BTreeMap, HashMap};

use super::super::dialect::Dialect;
use super::super::plumbing::{Cells, ConnOf, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg};
use crate::error::Result;
use crate::model::{FuelKey, Limit};

/// Runs over which a key's average is a plain mean, and the fraction of the way (1 / SPAN) each
/// later run moves it.
pub(crate) const SPAN: i64 = 8;

/// Keys written in one statement at most.
const KEYS_A_STATEMENT: usize = 500;

/// Charge the fuel of runs that ended (their key, the fuel they burnt) to their keys' averages.
pub(crate) async fn charge<D: Dialect>(db: &D, tx: &mut TxOf<D>, runs: &[(&FuelKey, i64)]) -> Result<()> {
    let mut by_key: BTreeMap<&FuelKey, Vec<i64>> = BTreeMap::new();
    for (key, fuel) in runs {
        by_key.entry(*key).or_default().push((*fuel).max(0));
    }
    let keys: Vec<(&FuelKey, Vec<i64>)> = by_key.into_iter().collect();
    for chunk in keys.chunks(KEYS_A_STATEMENT) {
        // Made if new and locked (a no-op update of an existing row), in key order.
        let held = write(db, tx, chunk.iter().map(|(k, _)| (*k, 0, 0)), D::RETURNING).await?;
        let held = if D::RETURNING { held } else { locked(db, tx, chunk.iter().map(|(k, _)| *k)).await? };
        let mut now: HashMap<(String, String), (i64, i64)> = HashMap::new();
        for r in &held {
            let at = (r.text("queue")?.unwrap_or_default(), r.text("name")?.unwrap_or_default());
            now.insert(at, (rows::id(r, "fuel")?, rows::id(r, "runs")?));
        }
        // Written as the change from what is held: the upsert adds it.
        let deltas = chunk.iter().map(|(k, fuels)| {
            let (fuel, runs) = now.get(&(k.queue.clone(), k.key.clone())).copied().unwrap_or((0, 0));
            let (new_fuel, new_runs) = fuels.iter().fold((fuel, runs), |(avg, n), f| (moved(avg, n, *f), n + 1));
            (*k, new_fuel - fuel, new_runs - runs)
        });
        write(db, tx, deltas, false).await?;
    }
    Ok(())
}

/// A key's average `avg` over `runs` runs, moved by one more run that burnt `fuel`.
fn moved(avg: i64, runs: i64, fuel: i64) -> i64 {
    let span = (runs + 1).clamp(1, SPAN);
    avg.saturating_add(fuel.saturating_sub(avg) / span)
}

/// Add `(key, fuel, runs)` to the rows of `task_key_fuel` (made if new); with `returning`, the
/// rows as they are now.
async fn write<'a, D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    rows: impl Iterator<Item = (&'a FuelKey, i64, i64)>,
    returning: bool,
) -> Result<Vec<D::Row>> {
    let mut values: Vec<Arg<'a>> = Vec::new();
    let mut tuples = Vec::new();
    for (k, fuel, runs) in rows {
        values.extend([Arg::Text(Some(&k.queue)), Arg::Text(Some(&k.key)), Arg::Int(Some(fuel)), Arg::Int(Some(runs))]);
        let n = values.len();
        tuples.push(format!("(${}, ${}, ${}, ${})", n - 3, n - 2, n - 1, n));
    }
    let upsert = D::upsert("task_key_fuel", &["queue", "name"], &["fuel", "runs"], &[], &[]);
    let sql = format!("INSERT INTO task_key_fuel (queue, name, fuel, runs) VALUES {} {upsert}", tuples.join(", "));
    if returning {
        return db.rows(Some(tx), &format!("{sql} RETURNING queue, name, fuel, runs"), &values).await;
    }
    db.exec(Some(tx), &sql, &values).await?;
    Ok(Vec::new())
}

/// The rows of these keys, locked (where an upsert returns nothing).
async fn locked<'a, D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    keys: impl Iterator<Item = &'a FuelKey>,
) -> Result<Vec<D::Row>> {
    let mut by_queue: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for k in keys {
        by_queue.entry(k.queue.as_str()).or_default().push(k.key.clone());
    }
    let mut out = Vec::new();
    for (queue, names) in &by_queue {
        let sql = format!(
            "SELECT queue, name, fuel, runs FROM task_key_fuel WHERE queue = $1 AND name IN ($2){}",
            D::FOR_UPDATE
        );
        out.extend(db.rows(Some(&mut *tx), &sql, args![*queue, names.as_slice()]).await?);
    }
    Ok(out)
}

/// What a turn of each key costs, in thousandths of a task's turn, in the queues of `fuel_per_turn`
/// (queue → its fuel per turn): its average fuel a run over the queue's fuel per turn, kept
/// within a thousandth and a thousand. Keys with no run ended yet are left out (a turn a task).
pub(crate) async fn costs<D: Dialect + ?Sized>(
    conn: &mut ConnOf<D>,
    slots: &[(String, String)],
    fuel_per_turn: &HashMap<String, u64>,
) -> Result<HashMap<(String, String), i64>> {
    let mut by_queue: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (q, k) in slots.iter().filter(|(q, _)| fuel_per_turn.contains_key(q)) {
        by_queue.entry(q.as_str()).or_default().push(k.clone());
    }
    let mut out = HashMap::new();
    for (queue, names) in &by_queue {
        let per_turn = i128::from(fuel_per_turn.get(*queue).copied().unwrap_or(Limit::MIN_FUEL_PER_TURN).max(1));
        for chunk in names.chunks(KEYS_A_STATEMENT) {
            let sql = "SELECT name, fuel FROM task_key_fuel WHERE queue = $1 AND name IN ($2)";
            for r in D::rows_on(conn, sql, &[Arg::Text(Some(queue)), Arg::Texts(chunk)]).await? {
                let cost = cost(rows::id(&r, "fuel")?, per_turn);
                out.insert((queue.to_string(), r.text("name")?.unwrap_or_default()), cost);
            }
        }
    }
    Ok(out)
}

/// What a turn of a key whose runs burn `fuel` on average costs in a queue of `per_turn`, in
/// thousandths of a task's turn (1 to 1,000,000).
pub(crate) fn cost(fuel: i64, per_turn: i128) -> i64 {
    let cost = (i128::from(fuel.max(0)) * 1_000 / per_turn.max(1)).clamp(1, 1_000_000);
    i64::try_from(cost).unwrap_or(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_average_is_the_mean_of_its_first_runs_then_moves_an_eighth_of_the_way() {
        let (mut avg, mut runs) = (0, 0);
        for fuel in [10, 20, 30] {
            (avg, runs) = (moved(avg, runs, fuel), runs + 1);
        }
        assert_eq!(avg, 20, "the mean of the first three");
        let (mut avg, runs) = (800, 100);
        avg = moved(avg, runs, 1_600);
        assert_eq!(avg, 900, "an eighth of the way");
        assert_eq!(moved(i64::MAX, 9, 0), i64::MAX - i64::MAX / 8, "no overflow");
    }
}
