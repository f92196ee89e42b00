//! Statistics per handler and queue (see [`crate::stats`]): counted into `task_stats` in the
//! transaction that ends the runs, compacted, and read back summed ([`read`]).

mod read;

pub use read::{per_minute, read};

use std::collections::BTreeMap;

use chrono::{DateTime, DurationRound, Utc};

use super::dialect::{transaction_read_committed, Dialect, Ended};
use super::plumbing::{Cells, TxOf};
use super::rows;
use super::sql::{args, Arg, CANCELLED, ERROR, KEPT, SNOOZED, SUCCESS, TIMEOUT};
use crate::error::Result;
use crate::model::{RunId, RunOutcome, TaskId};
use crate::stats::{BUCKETS, DURATION_BOUNDS_MS};

/// Counters summed when rows meet (the histogram's `d0`… come after these).
const SUMMED: [&str; 9] =
    ["succeeded", "failed", "timed_out", "cancelled", "snoozed", "timed", "duration_sum", "fueled", "fuel_sum"];
/// How many of [`SUMMED`] count runs by how they ended ([`crate::stats::RunCounts`]).
pub(super) const ENDINGS: usize = 5;

fn histogram_columns() -> Vec<String> {
    (0..BUCKETS).map(|i| format!("d{i}")).collect()
}

/// The start of `t`'s minute: the statistics' time bucket.
fn minute(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(chrono::Duration::minutes(1)).unwrap_or(t)
}

/// Count the runs `runs`, which this transaction just ended, into the statistics of their
/// handler, queue and runner, in the minute of `now`.
pub async fn record<D: Dialect>(db: &D, tx: &mut TxOf<D>, runs: &[RunId], now: DateTime<Utc>) -> Result<()> {
    let rows = "task_runs r JOIN task_queue q ON q.id = r.task_queue_id WHERE r.id IN ($1)";
    record_from(db, tx, rows, runs, now).await
}

/// Count the runs that succeeded on the tasks `tasks`, kept on their rows (see
/// `store::transitions`), which this transaction just ended: as [`record`] does.
async fn record_kept<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], now: DateTime<Utc>) -> Result<()> {
    let rows = format!(
        "(SELECT id AS task_queue_id, {SUCCESS} AS status, run_duration_ms AS duration_ms, run_fuel_used AS fuel_used,
              run_runner_id AS task_runner_id, run_started_on AS started_on, finished_on
          FROM task_queue WHERE id IN ($1) AND {KEPT}) r
         JOIN task_queue q ON q.id = r.task_queue_id WHERE 1 = 1"
    );
    record_from(db, tx, &rows, tasks, now).await
}

/// Count the runs of `rows` (a `FROM` clause of runs `r` and their tasks `q`, selected by the
/// ids `$1`) into the statistics, in the minute of `now`.
async fn record_from<D: Dialect>(db: &D, tx: &mut TxOf<D>, rows: &str, ids: &[i64], now: DateTime<Utc>) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let hist = histogram_columns();
    // A cancelled run's time is the operator's choice, not the handler's: it is counted, not timed.
    let d = format!("(CASE WHEN r.status = {CANCELLED} THEN NULL ELSE r.duration_ms END)");
    let buckets: Vec<String> = (0..BUCKETS)
        .map(|i| {
            let cond = match (i.checked_sub(1).map(|p| DURATION_BOUNDS_MS[p]), DURATION_BOUNDS_MS.get(i)) {
                (None, Some(b)) => format!("{d} <= {b}"),
                (Some(p), Some(b)) => format!("{d} > {p} AND {d} <= {b}"),
                (Some(p), None) => format!("{d} > {p}"),
                (None, None) => "1 = 0".to_string(),
            };
            format!("sum(CASE WHEN {cond} THEN 1 ELSE 0 END) AS d{i}")
        })
        .collect();
    let count = |status| format!("sum(CASE WHEN r.status = {status} THEN 1 ELSE 0 END)");
    let select = format!(
        "SELECT q.task_handler_class AS handler, q.queue AS queue, $2 AS bucket,
             coalesce(r.task_runner_id, 0) AS runner,
             {} AS succeeded, {} AS failed, {} AS timed_out, {} AS cancelled, {} AS snoozed,
             sum(CASE WHEN {d} IS NULL THEN 0 ELSE 1 END) AS timed,
             coalesce(sum({d}), 0) AS duration_sum, coalesce(max({d}), 0) AS duration_max,
             sum(CASE WHEN r.fuel_used IS NULL THEN 0 ELSE 1 END) AS fueled,
             coalesce(sum(r.fuel_used), 0) AS fuel_sum, coalesce(max(r.fuel_used), 0) AS fuel_max,
             coalesce(min(coalesce(r.started_on, r.finished_on)), $2) AS first_on,
             coalesce(max(r.finished_on), $2) AS last_on, {}
         FROM {rows}
         GROUP BY q.task_handler_class, q.queue, coalesce(r.task_runner_id, 0)",
        count(SUCCESS),
        count(ERROR),
        count(TIMEOUT),
        count(CANCELLED),
        count(SNOOZED),
        buckets.join(", ")
    );
    let mut summed: Vec<&str> = SUMMED.to_vec();
    summed.extend(hist.iter().map(String::as_str));
    let upsert = D::upsert(
        "task_stats",
        &["handler", "queue", "bucket", "runner"],
        &summed,
        &["duration_max", "fuel_max", "last_on"],
        &["first_on"],
    );
    // The derived table lets MySQL's upsert read the grouped row, and SQLite needs the WHERE to
    // tell its upsert from a join.
    let sql = format!(
        "INSERT INTO task_stats (handler, queue, bucket, runner, succeeded, failed, timed_out, cancelled, snoozed, timed,
             duration_sum, duration_max, fueled, fuel_sum, fuel_max, first_on, last_on, {})
         SELECT * FROM ({select}) AS s WHERE 1 = 1 {upsert}",
        hist.join(", ")
    );
    db.exec(Some(tx), &sql, args![ids, minute(now)]).await?;
    Ok(())
}

/// Count the successful runs `ended` (their outcomes among `ok`), which this transaction just
/// ended, into the statistics, in the minute of `now`: the same counts as [`record`]. Runs the
/// finish read along what they are counted under are summed here, one row a handler, queue and
/// runner, instead of read back from the rows just written (on MariaDB that read was a tenth of
/// a task's time); the others are read back by [`record`].
pub async fn record_successes<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    ended: &[Ended],
    ok: &[&RunOutcome],
    now: DateTime<Utc>,
) -> Result<()> {
    let outcomes: std::collections::HashMap<RunId, &RunOutcome> = ok.iter().map(|o| (o.run_id, *o)).collect();
    let mut rows: BTreeMap<(&str, &str, i64), Summed> = BTreeMap::new();
    // Those the finish did not read along, by their tasks' rows, where they are kept.
    let mut unread = Vec::new();
    for e in ended {
        match (&e.of, outcomes.get(&e.run_id)) {
            (Some(of), Some(o)) => rows.entry((&of.handler, &of.queue, of.runner)).or_default().add(o, of.started_on),
            (None, Some(o)) => unread.push(o.task_id),
            (_, None) => {}
        }
    }
    record_kept(db, tx, &unread, now).await?;
    if rows.is_empty() {
        return Ok(());
    }
    // Queues come from task data, so a batch may hold as many rows as runs: a statement binds 28
    // values a row, within the 65,535 PostgreSQL and MySQL bind at most.
    let rows: Vec<_> = rows.into_iter().collect();
    for chunk in rows.chunks(STATS_CHUNK) {
        let mut values: Vec<Arg<'_>> = Vec::new();
        for ((handler, queue, runner), m) in chunk {
            let sums = [m.runs, 0, 0, 0, 0, m.runs, m.duration_sum, m.fueled, m.fuel_sum].into_iter().chain(m.hist);
            let greatest = [m.duration_max, m.fuel_max];
            values.extend(by_value(handler, queue, minute(now), *runner, sums, greatest, m.last_on, m.first_on));
        }
        db.exec(Some(&mut *tx), &insert_by_value::<D>(chunk.len()), &values).await?;
    }
    Ok(())
}

/// Rows of statistics a statement writes by value at most.
const STATS_CHUNK: usize = 1_000;

/// An `INSERT` of `rows` rows of statistics by value, each as [`by_value`] lists it, adding to
/// (or keeping the extreme of) a row already there.
fn insert_by_value<D: Dialect>(rows: usize) -> String {
    let key = ["handler", "queue", "bucket", "runner"];
    let hist = histogram_columns();
    let summed: Vec<&str> = SUMMED.into_iter().chain(hist.iter().map(String::as_str)).collect();
    let upsert = D::upsert("task_stats", &key, &summed, &GREATEST, &["first_on"]);
    let columns: Vec<&str> =
        key.into_iter().chain(summed.iter().copied()).chain(GREATEST).chain(["first_on"]).collect();
    let n = columns.len();
    let tuples: Vec<String> = (0..rows)
        .map(|r| format!("({})", (1..=n).map(|i| format!("${}", r * n + i)).collect::<Vec<_>>().join(", ")))
        .collect();
    format!("INSERT INTO task_stats ({}) VALUES {} {upsert}", columns.join(", "), tuples.join(", "))
}

/// One row's values for [`insert_by_value`]: its key, the summed columns ([`SUMMED`], then the
/// histogram's), `duration_max` and `fuel_max`, `last_on`, `first_on`.
#[allow(clippy::too_many_arguments)]
fn by_value<'a>(
    handler: &'a str,
    queue: &'a str,
    bucket: DateTime<Utc>,
    runner: i64,
    sums: impl IntoIterator<Item = i64>,
    greatest: [i64; 2],
    last_on: DateTime<Utc>,
    first_on: DateTime<Utc>,
) -> Vec<Arg<'a>> {
    let mut values = vec![Arg::from(handler), Arg::from(queue), Arg::Time(bucket), Arg::from(runner)];
    values.extend(sums.into_iter().chain(greatest).map(Arg::from));
    values.extend([Arg::Time(last_on), Arg::Time(first_on)]);
    values
}

/// The statistics of successful runs of one handler, queue and runner, as [`record`] sums them.
struct Summed {
    runs: i64,
    duration_sum: i64,
    duration_max: i64,
    fueled: i64,
    fuel_sum: i64,
    fuel_max: i64,
    first_on: DateTime<Utc>,
    last_on: DateTime<Utc>,
    hist: [i64; BUCKETS],
}

impl Default for Summed {
    fn default() -> Self {
        Summed {
            runs: 0,
            duration_sum: 0,
            duration_max: 0,
            fueled: 0,
            fuel_sum: 0,
            fuel_max: 0,
            first_on: DateTime::<Utc>::MAX_UTC,
            last_on: DateTime::<Utc>::MIN_UTC,
            hist: [0; BUCKETS],
        }
    }
}

impl Summed {
    fn add(&mut self, o: &RunOutcome, started_on: Option<DateTime<Utc>>) {
        self.runs += 1;
        self.duration_sum = self.duration_sum.saturating_add(o.duration_ms);
        self.duration_max = self.duration_max.max(o.duration_ms);
        if let Some(fuel) = o.fuel_used {
            self.fueled += 1;
            self.fuel_sum = self.fuel_sum.saturating_add(fuel);
            self.fuel_max = self.fuel_max.max(fuel);
        }
        self.first_on = self.first_on.min(started_on.unwrap_or(o.finished_on));
        self.last_on = self.last_on.max(o.finished_on);
        self.hist[crate::stats::bucket_of(o.duration_ms)] += 1;
    }
}

/// The runner of a row that merges older rows (all runners of an hour).
const MERGED: i64 = -1;
/// Columns kept at their largest, and at their smallest, when rows meet.
const GREATEST: [&str; 3] = ["duration_max", "fuel_max", "last_on"];

/// Delete the statistics of `queue` (every handler's, every minute's); the rows deleted.
pub async fn forget<D: Dialect>(db: &D, queue: &str) -> Result<u64> {
    db.exec(None, "DELETE FROM task_stats WHERE queue = $1", args![queue]).await
}

/// Merge up to `batch` rows of minutes before `before` into one row per handler, queue and hour
/// (runner [`MERGED`]); the rows merged. The rows merged are read under lock and deleted by
/// their keys, so a count written meanwhile is never lost; summing is exact (every column is a
/// sum, a maximum or a minimum), so the statistics read the same after.
pub async fn compact<D: Dialect>(db: &D, before: DateTime<Utc>, batch: u32) -> Result<u64> {
    let mut summed: Vec<String> = SUMMED.iter().map(|c| c.to_string()).collect();
    summed.extend(histogram_columns());
    let summed = &summed;
    // READ COMMITTED: on MySQL, the scan (no index leads with the bucket) then locks only the old
    // rows it takes, not every row and gap, which would hold up outcome writes.
    transaction_read_committed(db, |tx| {
        Box::pin(async move {
            let sql = format!(
                "SELECT handler, queue, bucket, runner, {}, {}, first_on FROM task_stats
             WHERE bucket < $1 AND runner <> {MERGED} ORDER BY bucket LIMIT $2{}",
                summed.join(", "),
                GREATEST.join(", "),
                D::FOR_UPDATE
            );
            let found = db.rows(Some(&mut tx.tx), &sql, args![before, batch]).await?;
            if found.is_empty() {
                return Ok(0);
            }
            // (handler, queue, hour) → the merged row; (handler, queue, minute) → its runners.
            let mut merged: BTreeMap<(String, String, DateTime<Utc>), Merged> = BTreeMap::new();
            let mut keys: BTreeMap<(String, String, DateTime<Utc>), Vec<i64>> = BTreeMap::new();
            for r in &found {
                let (handler, queue) = (r.text("handler")?.unwrap_or_default(), r.text("queue")?.unwrap_or_default());
                let bucket = r.time("bucket")?.unwrap_or(before);
                let hour = bucket.duration_trunc(chrono::Duration::hours(1)).unwrap_or(bucket);
                merged.entry((handler.clone(), queue.clone(), hour)).or_default().add(r, summed)?;
                keys.entry((handler, queue, bucket)).or_default().push(rows::id(r, "runner")?);
            }
            let insert = insert_by_value::<D>(1);
            for ((handler, queue, hour), m) in &merged {
                let (last_on, first_on) = (m.last_on.unwrap_or(*hour), m.first_on.unwrap_or(*hour));
                let values =
                    by_value(handler, queue, *hour, MERGED, m.sums.iter().copied(), m.greatest, last_on, first_on);
                db.exec(Some(&mut tx.tx), &insert, &values).await?;
            }
            let delete = "DELETE FROM task_stats WHERE handler = $1 AND queue = $2 AND bucket = $3 AND runner IN ($4)";
            for ((handler, queue, bucket), runners) in &keys {
                db.exec(Some(&mut tx.tx), delete, args![handler, queue, *bucket, runners]).await?;
            }
            Ok(found.len() as u64)
        })
    })
    .await
}

/// Rows summed into one: the summed columns, then `duration_max`, `fuel_max` (as integers) and
/// `last_on`, `first_on` (as times).
#[derive(Default)]
struct Merged {
    sums: Vec<i64>,
    greatest: [i64; 2],
    last_on: Option<DateTime<Utc>>,
    first_on: Option<DateTime<Utc>>,
}

impl Merged {
    fn add(&mut self, r: &impl Cells, summed: &[String]) -> Result<()> {
        self.sums.resize(summed.len(), 0);
        for (sum, c) in self.sums.iter_mut().zip(summed) {
            *sum += r.int(c)?.unwrap_or(0);
        }
        for (max, c) in self.greatest.iter_mut().zip(["duration_max", "fuel_max"]) {
            *max = (*max).max(r.int(c)?.unwrap_or(0));
        }
        self.last_on = self.last_on.max(r.time("last_on")?);
        self.first_on = match (self.first_on, r.time("first_on")?) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(())
    }
}
