//! The statistics read back: summed per handler and queue, and per minute.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::Cells;
use super::super::rows;
use super::super::sql::{args, Arg, ERROR, RUNNING, SCHEDULED, TIMEOUT, WAITING};
use super::{histogram_columns, minute, ENDINGS, SUMMED};
use crate::error::{Error, Result};
use crate::model::{RunStatus, TaskState};
use crate::stats::{quantile, FuelUse, HandlerStats, Minute, RunCounts, Spread, BUCKETS};

/// The statistics of every handler and queue (or of one handler, one queue), at `now`.
pub async fn read<D: Dialect>(
    db: &D,
    handler: Option<&str>,
    queue: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<HandlerStats>> {
    let int = D::INT;
    let sums: Vec<String> = SUMMED
        .iter()
        .map(|c| c.to_string())
        .chain(histogram_columns())
        .map(|c| format!("CAST(sum({c}) AS {int}) AS {c}"))
        .collect();
    let ended = "succeeded + failed + timed_out + cancelled + snoozed";
    let (minute_ago, hour_ago) =
        (minute(now) - chrono::Duration::minutes(1), minute(now) - chrono::Duration::minutes(59));
    let mut values: Vec<Arg<'_>> = args![minute_ago, hour_ago].to_vec();
    let filter = filtered(("handler", handler), ("queue", queue), &mut values);
    let runs = format!(
        "SELECT handler, queue, {}, max(duration_max) AS duration_max, max(fuel_max) AS fuel_max,
             min(first_on) AS first_on, max(last_on) AS last_on,
             CAST(sum(CASE WHEN bucket >= $1 THEN {ended} ELSE 0 END) AS {int}) AS last_minute,
             CAST(sum(CASE WHEN bucket >= $2 THEN {ended} ELSE 0 END) AS {int}) AS last_hour
         FROM task_stats WHERE 1 = 1{filter} GROUP BY handler, queue",
        sums.join(", ")
    );
    let mut out: BTreeMap<(String, String), HandlerStats> = BTreeMap::new();
    for r in db.rows(None, &runs, &values).await? {
        let s = runs_of(&r)?;
        out.insert((s.handler.clone(), s.queue.clone()), s);
    }
    // Unfinished tasks and dead letters, by the statuses the indexes lead with: finished tasks,
    // however many are kept, are not read (their runs were counted above).
    let mut values = Vec::new();
    let task_filter = filtered(("task_handler_class", handler), ("queue", queue), &mut values);
    let dead = format!("CAST(CASE WHEN gave_up_on IS NULL THEN 0 ELSE 1 END AS {int})");
    let tasks = format!(
        "SELECT task_handler_class AS handler, queue, last_status, {dead} AS dead, count(*) AS n
         FROM task_queue WHERE last_status IN ({WAITING}, {SCHEDULED}, {RUNNING}, {ERROR}, {TIMEOUT}){task_filter}
         GROUP BY task_handler_class, queue, last_status, {dead}"
    );
    for r in db.rows(None, &tasks, &values).await? {
        let key = (r.text("handler")?.unwrap_or_default(), r.text("queue")?.unwrap_or_default());
        let word = r.text("last_status")?.unwrap_or_default();
        let status =
            word.parse::<RunStatus>().map_err(|e| Error::CorruptRow { table: "task_queue", reason: e.to_string() })?;
        let n = rows::id(&r, "n")?.max(0) as u64;
        let entry = out.entry(key.clone()).or_insert_with(|| HandlerStats {
            handler: key.0.clone(),
            queue: key.1.clone(),
            ..Default::default()
        });
        let t = &mut entry.tasks;
        match TaskState::of(status, rows::id(&r, "dead")? != 0) {
            TaskState::Waiting => t.waiting += n,
            TaskState::Scheduled => t.scheduled += n,
            TaskState::Running => t.running += n,
            TaskState::AwaitingRetry => t.awaiting_retry += n,
            TaskState::Dead => t.dead += n,
            // Not read: the finished are counted from their runs.
            TaskState::Succeeded | TaskState::Cancelled => {}
        }
    }
    Ok(out.into_values().collect())
}

/// The runs ended in each of the `minutes` minutes up to `now`'s, oldest first, empty ones
/// included. Rows compacted into hours stand at their hour's first minute.
pub async fn per_minute<D: Dialect>(
    db: &D,
    handler: Option<&str>,
    queue: Option<&str>,
    now: DateTime<Utc>,
    minutes: u32,
) -> Result<Vec<Minute>> {
    let int = D::INT;
    let first = minute(now) - chrono::Duration::minutes(i64::from(minutes.max(1)) - 1);
    let mut values: Vec<Arg<'_>> = args![first].to_vec();
    let filter = filtered(("handler", handler), ("queue", queue), &mut values);
    let sums: Vec<String> = SUMMED[..ENDINGS].iter().map(|c| format!("CAST(sum({c}) AS {int}) AS {c}")).collect();
    let sql = format!("SELECT bucket, {} FROM task_stats WHERE bucket >= $1{filter} GROUP BY bucket", sums.join(", "));
    let mut by_minute: BTreeMap<DateTime<Utc>, RunCounts> = BTreeMap::new();
    for r in db.rows(None, &sql, &values).await? {
        let at =
            r.time("bucket")?.ok_or_else(|| Error::CorruptRow { table: "task_stats", reason: "no bucket".into() })?;
        let runs = run_counts(&r)?;
        let slot = by_minute.entry(minute(at)).or_default();
        slot.succeeded += runs.succeeded;
        slot.failed += runs.failed;
        slot.timed_out += runs.timed_out;
        slot.cancelled += runs.cancelled;
        slot.snoozed += runs.snoozed;
    }
    Ok((0..i64::from(minutes.max(1)))
        .map(|i| first + chrono::Duration::minutes(i))
        .map(|at| Minute { at, runs: by_minute.get(&at).copied().unwrap_or_default() })
        .collect())
}

/// ` AND column = $n` for each value given, appended to `values`.
fn filtered<'a>(a: (&str, Option<&'a str>), b: (&str, Option<&'a str>), values: &mut Vec<Arg<'a>>) -> String {
    let mut sql = String::new();
    for (column, value) in [a, b] {
        if let Some(v) = value {
            values.push(Arg::Text(Some(v)));
            sql.push_str(&format!(" AND {column} = ${}", values.len()));
        }
    }
    sql
}

/// The runs of a row, by how they ended.
fn run_counts(r: &impl Cells) -> Result<RunCounts> {
    let n = |c: &str| -> Result<u64> { Ok(r.int(c)?.unwrap_or(0).max(0) as u64) };
    Ok(RunCounts {
        succeeded: n("succeeded")?,
        failed: n("failed")?,
        timed_out: n("timed_out")?,
        cancelled: n("cancelled")?,
        snoozed: n("snoozed")?,
    })
}

/// One row of summed statistics.
fn runs_of(r: &impl Cells) -> Result<HandlerStats> {
    let n = |c: &str| -> Result<u64> { Ok(r.int(c)?.unwrap_or(0).max(0) as u64) };
    let runs = run_counts(r)?;
    let ran = runs.succeeded + runs.failed + runs.timed_out;
    let mut histogram = [0u64; BUCKETS];
    for (i, slot) in histogram.iter_mut().enumerate() {
        *slot = n(&format!("d{i}"))?;
    }
    let (timed, fueled) = (n("timed")?, n("fueled")?);
    let duration_max = r.int("duration_max")?.unwrap_or(0);
    let duration_ms = (timed > 0).then(|| Spread {
        avg: n("duration_sum").unwrap_or(0) as f64 / timed as f64,
        p50: quantile(&histogram, 0.5, duration_max),
        p95: quantile(&histogram, 0.95, duration_max),
        max: duration_max,
    });
    let fuel = (fueled > 0).then(|| FuelUse {
        avg: n("fuel_sum").unwrap_or(0) as f64 / fueled as f64,
        max: r.int("fuel_max").ok().flatten().unwrap_or(0),
    });
    Ok(HandlerStats {
        handler: r.text("handler")?.unwrap_or_default(),
        queue: r.text("queue")?.unwrap_or_default(),
        tasks: Default::default(),
        failure_rate: if ran == 0 { 0.0 } else { (runs.failed + runs.timed_out) as f64 / ran as f64 },
        runs,
        duration_ms,
        fuel,
        first_run: r.time("first_on")?,
        last_run: r.time("last_on")?,
        last_minute: n("last_minute")?,
        last_hour: n("last_hour")?,
    })
}
