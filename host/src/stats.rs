//! Statistics per handler and queue: tasks by status, runs by how they ended, failure rate,
//! processing time (average, p50, p95, max), fuel (average, max), first and latest run, and
//! throughput over the last minute and hour.
//!
//! Runs are counted as they end, in the same transaction that ends them (outcomes, time-outs,
//! cancellations, give-ups), into `task_stats`: one row per handler, queue, minute and runner, so
//! workers never wait on each other's rows and the statistics never read `task_runs`. Rotation
//! deletes tasks and runs, never these rows, so the statistics outlive the runs they count.
//! Percentiles come from a histogram of durations ([`DURATION_BOUNDS_MS`]), interpolated within
//! a bucket: an estimate, exact at the buckets' bounds.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Upper bounds, in milliseconds, of the duration histogram's buckets; one more bucket takes
/// longer runs.
pub const DURATION_BOUNDS_MS: [i64; 15] =
    [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000];
/// Buckets of the histogram: one a bound, and the rest.
pub const BUCKETS: usize = DURATION_BOUNDS_MS.len() + 1;

/// The statistics of one handler on one queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct HandlerStats {
    /// The handler.
    pub handler: String,
    /// The queue.
    pub queue: String,
    /// Unfinished tasks and dead letters now in the database (finished tasks are counted by
    /// their runs, below).
    pub tasks: TaskCounts,
    /// Runs ended, by how, since the statistics began (rotation keeps these).
    pub runs: RunCounts,
    /// Failed and timed-out runs over those that ran to an end (cancelled ones aside); 0 when none.
    pub failure_rate: f64,
    /// How long runs took, in milliseconds (None: no run timed yet).
    pub duration_ms: Option<Spread>,
    /// The fuel runs burnt (None: none counted yet).
    pub fuel: Option<FuelUse>,
    /// When the first counted run started, and when the latest ended.
    pub first_run: Option<DateTime<Utc>>,
    /// When the latest counted run ended.
    pub last_run: Option<DateTime<Utc>>,
    /// Runs ended in the current and previous minute, and in the last hour (by minute).
    pub last_minute: u64,
    /// Runs ended in the last hour.
    pub last_hour: u64,
}

/// Tasks now in the database, by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct TaskCounts {
    /// Waiting until the tasks they run after have succeeded.
    pub waiting: u64,
    /// Due now or later: their first run, a retry, or the next run after a snooze or a wait for a
    /// signal.
    pub scheduled: u64,
    /// Held by a worker.
    pub running: u64,
    /// Failed, their next run not decided yet (an overseer's time-out, a moment ago).
    pub awaiting_retry: u64,
    /// Given up on.
    pub dead: u64,
}

/// Runs ended, by how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct RunCounts {
    /// Succeeded.
    pub succeeded: u64,
    /// Failed (`error`).
    pub failed: u64,
    /// Timed out.
    pub timed_out: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Snoozed, or ended waiting for a signal: neither a success nor a failure, the task due
    /// again later.
    pub snoozed: u64,
}

/// The runs that ended in one minute, by how: a point of a throughput chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Minute {
    /// The minute's start.
    pub at: DateTime<Utc>,
    /// Runs that ended in it.
    pub runs: RunCounts,
}

/// Average, estimated median and 95th percentile, and maximum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Spread {
    /// The mean.
    pub avg: f64,
    /// The median, estimated from the histogram.
    pub p50: f64,
    /// The 95th percentile, estimated from the histogram.
    pub p95: f64,
    /// The largest.
    pub max: i64,
}

/// Fuel burnt by runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct FuelUse {
    /// The mean per run.
    pub avg: f64,
    /// The most one run burnt.
    pub max: i64,
}

/// The histogram bucket of a duration.
pub fn bucket_of(ms: i64) -> usize {
    DURATION_BOUNDS_MS.iter().position(|b| ms <= *b).unwrap_or(DURATION_BOUNDS_MS.len())
}

/// The `q` quantile (0..1) of a histogram, interpolated linearly within its bucket; the last
/// bucket reaches to `max`.
pub fn quantile(histogram: &[u64; BUCKETS], q: f64, max: i64) -> f64 {
    let total: u64 = histogram.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut seen = 0.0;
    for (i, n) in histogram.iter().enumerate() {
        let n = *n as f64;
        if n > 0.0 && seen + n >= rank {
            let low = if i == 0 { 0.0 } else { DURATION_BOUNDS_MS[i - 1] as f64 };
            let high = DURATION_BOUNDS_MS.get(i).map_or(max as f64, |b| *b as f64).min(max as f64).max(low);
            return low + (high - low) * ((rank - seen) / n).clamp(0.0, 1.0);
        }
        seen += n;
    }
    max as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fall_in_the_bucket_of_their_bound() {
        assert_eq!((bucket_of(0), bucket_of(1), bucket_of(2), bucket_of(3)), (0, 0, 1, 2));
        assert_eq!((bucket_of(60_000), bucket_of(60_001)), (14, 15));
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket_and_stop_at_the_maximum() {
        let mut h = [0u64; BUCKETS];
        h[bucket_of(150)] = 10; // 100 < d <= 200
        assert_eq!(quantile(&h, 0.5, 180), 140.0, "half way from 100 to the maximum, 180");
        h[bucket_of(900)] = 10; // 500 < d <= 1000
        assert_eq!(quantile(&h, 0.5, 900), 200.0, "the tenth of twenty is the first bucket's top");
        assert_eq!(quantile(&h, 0.95, 900), 500.0 + 400.0 * 0.9);
        assert_eq!(quantile(&[0; BUCKETS], 0.5, 0), 0.0);
        let mut long = [0u64; BUCKETS];
        long[BUCKETS - 1] = 2;
        assert_eq!(quantile(&long, 1.0, 90_000), 90_000.0);
    }
}
