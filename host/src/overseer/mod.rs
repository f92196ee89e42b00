//! Maintenance services, each in its own file with a `Config` (named default constants), a
//! `run_once(now) -> Report` on an injected clock, and this module's thin loop around it:
//!
//! | service | what it does | default interval |
//! |---|---|---|
//! | [`liveness`] | runners with a stale heartbeat, or a vanished process on this host → `timeout`, with their running runs | 5 s |
//! | [`run_timeout`] | running runs past their task's run timeout → `timeout` | 5 s |
//! | [`retries`] | failed (error/timeout) tasks → scheduled again after the backoff, or given up once their attempts are spent | 1 s |
//! | [`rotation`] | successful tasks finished more than 30 days ago → deleted with their runs, in batches | 10 min |
//! | [`stats_compaction`] | rows of statistics (per minute and runner) older than 2 h → one row per handler, queue and hour | 10 min |
//! | [`schedules`] | periodic tasks: each schedule's due slot → one task, however many overseers race | 1 s |
//! | [`key_turns`] | rows of keys' last turns (fair shares) more than a day old, and the pace marks and fuel averages they leave → deleted, in batches | 10 min |
//! | [`key_fuel`] | due tasks of keys weighed by fuel whose runs' average has moved to more than twice, or under half, what their turns were laid by, and of keys whose weight was changed live → their turns laid again by their stride now, in batches | 1 s |
//! | [`versions`] | deployed versions neither active nor pinned, superseded more than 30 days ago → deleted, with components no version is of | 10 min |
//! | [`intake`] | tasks queued in SQL with a key or `after` → given their turn and their waits, as an add through the API gives them | 0.5 s |
//! | [`unserved`] | scheduled tasks whose handler no live runner has served for 10 min → given up (`handler-not-found`); a warning for each queue whose due tasks no live runner claims from | 30 s |
//!
//! Workers run the overseer too unless told not to. Only one node at a time runs the services:
//! the holder of the `overseer` lease in the database (`task_leases`), renewed every third of
//! its time to live (default 30 s); a renewal counts for two thirds of it from when it began
//! (`lease.rs`), so a holder whose database keeps it waiting stops starting passes before another
//! could take over. A holder that stops cleanly hands the lease back after its
//! last pass, and the others, trying every half second, take it over at once; one that dies is
//! taken over from when its lease expires. Every service is idempotent besides (each update is guarded by the state it expects).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::error::Result;
use crate::store::SharedStore;
pub use lease::Leadership;
use lease::Lease;

pub mod intake;
pub mod key_fuel;
pub mod key_turns;
mod lease;
pub mod liveness;
pub mod retries;
pub mod rotation;
pub mod run_timeout;
pub mod schedules;
pub mod stats_compaction;
pub mod unserved;
pub mod versions;

/// Settings of every service: the defaults, or the operator's file's `[overseer]` table, each
/// service's in its own table (`[overseer.rotation] retention = "90days"`) with its fields' names.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OverseerConfig {
    /// How long the maintenance lease lasts without renewal.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub lease_ttl: Duration,
    /// `[overseer.liveness]`: dead runners.
    pub liveness: liveness::Config,
    /// `[overseer.run_timeout]`: runs past their timeout.
    pub run_timeout: run_timeout::Config,
    /// `[overseer.retries]`: the next step of timed-out tasks.
    pub retries: retries::Config,
    /// `[overseer.rotation]`: old finished tasks.
    pub rotation: rotation::Config,
    /// `[overseer.unserved]`: tasks no worker serves.
    pub unserved: unserved::Config,
    /// `[overseer.schedules]`: periodic tasks.
    pub schedules: schedules::Config,
    /// `[overseer.stats_compaction]`: old statistics merged.
    pub stats_compaction: stats_compaction::Config,
    /// `[overseer.key_turns]`: idle keys' turns.
    pub key_turns: key_turns::Config,
    /// `[overseer.key_fuel]`: keys' turns laid again by their fuel.
    pub key_fuel: key_fuel::Config,
    /// `[overseer.versions]`: old deployed versions.
    pub versions: versions::Config,
    /// `[overseer.intake]`: tasks queued in SQL with a key or `after`.
    pub intake: intake::Config,
}

impl OverseerConfig {
    /// The lease's default time.
    pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);
    /// The lease's name in `task_leases`.
    pub const LEASE: &'static str = "overseer";
    /// How soon an overseer that does not hold the lease tries it again (at most a third of the
    /// lease's time): a lease handed back by a stopping overseer is taken over within this.
    pub const LEASE_RETRY: Duration = Duration::from_millis(500);

    /// Every setting in range: intervals, horizons and batches above zero (a zero interval would
    /// spin, a zero retention delete what just finished), durations at most a year... except
    /// the retention, at most 100 years. The error names the table and the key.
    pub fn check(&self) -> std::result::Result<(), String> {
        const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
        let durations = [
            ("", "lease_ttl", self.lease_ttl, YEAR),
            (".liveness", "interval", self.liveness.interval, YEAR),
            (".liveness", "heartbeat_horizon", self.liveness.heartbeat_horizon, YEAR),
            (".run_timeout", "interval", self.run_timeout.interval, YEAR),
            (".run_timeout", "margin", self.run_timeout.margin, YEAR),
            (".retries", "interval", self.retries.interval, YEAR),
            (".rotation", "interval", self.rotation.interval, YEAR),
            (".rotation", "retention", self.rotation.retention, YEAR.saturating_mul(100)),
            (".unserved", "interval", self.unserved.interval, YEAR),
            (".unserved", "horizon", self.unserved.horizon, YEAR),
            (".unserved", "warn_after", self.unserved.warn_after, YEAR),
            (".schedules", "interval", self.schedules.interval, YEAR),
            (".stats_compaction", "interval", self.stats_compaction.interval, YEAR),
            (".stats_compaction", "keep_minutes_for", self.stats_compaction.keep_minutes_for, YEAR),
            (".key_turns", "interval", self.key_turns.interval, YEAR),
            (".key_turns", "idle_for", self.key_turns.idle_for, YEAR),
            (".key_fuel", "interval", self.key_fuel.interval, YEAR),
            (".key_fuel", "again_after", self.key_fuel.again_after, YEAR),
            (".versions", "interval", self.versions.interval, YEAR),
            (".versions", "retention", self.versions.retention, YEAR.saturating_mul(100)),
            (".intake", "interval", self.intake.interval, YEAR),
        ];
        for (table, key, d, max) in durations {
            if d < Duration::from_millis(10) || d > max {
                let (d, max) = (humantime::format_duration(d), humantime::format_duration(max));
                return Err(format!("[overseer{table}] {key} = \"{d}\" is out of range (10ms to {max})"));
            }
        }
        let counts = [
            (".run_timeout", "batch", self.run_timeout.batch),
            (".retries", "batch", self.retries.batch),
            (".rotation", "batch", self.rotation.batch),
            (".rotation", "max_batches", self.rotation.max_batches),
            (".unserved", "batch", self.unserved.batch),
            (".stats_compaction", "batch", self.stats_compaction.batch),
            (".stats_compaction", "max_batches", self.stats_compaction.max_batches),
            (".key_turns", "batch", self.key_turns.batch),
            (".key_turns", "max_batches", self.key_turns.max_batches),
            (".key_fuel", "batch", self.key_fuel.batch),
            (".key_fuel", "max_batches", self.key_fuel.max_batches),
            (".versions", "batch", self.versions.batch),
            (".versions", "max_batches", self.versions.max_batches),
            (".intake", "batch", self.intake.batch),
            (".intake", "max_batches", self.intake.max_batches),
        ];
        for (table, key, n) in counts {
            if !(1..=100_000).contains(&n) {
                return Err(format!("[overseer{table}] {key} = {n} is out of range (1 to 100000)"));
            }
        }
        Ok(())
    }
}

impl Default for OverseerConfig {
    fn default() -> Self {
        OverseerConfig {
            lease_ttl: Self::DEFAULT_LEASE_TTL,
            liveness: Default::default(),
            run_timeout: Default::default(),
            retries: Default::default(),
            rotation: Default::default(),
            unserved: Default::default(),
            schedules: Default::default(),
            stats_compaction: Default::default(),
            key_turns: Default::default(),
            key_fuel: Default::default(),
            versions: Default::default(),
            intake: Default::default(),
        }
    }
}

/// `now` less `d`, saturating at the earliest time: a duration past the calendar means that
/// nothing is that old (nothing rotated, timed out or given up), never "now".
pub(crate) fn ago(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(d).ok().and_then(|d| now.checked_sub_signed(d)).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Run `one_batch` (which does at most `batch` items) until it does fewer, or `max_batches`
/// times: one pass of a batched service stays short. The items done, and the batches run.
pub(crate) async fn in_batches<F, Fut>(batch: u32, max_batches: u32, mut one_batch: F) -> Result<(u64, u32)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let (mut done, mut batches) = (0, 0);
    while batches < max_batches {
        let n = one_batch().await?;
        batches += 1;
        done += n;
        if n < u64::from(batch) {
            break;
        }
    }
    Ok((done, batches))
}

/// Most full batches one pass of a service takes: the services run one at a time, so a pass that
/// went on while work kept coming (a flood of failures, say) would hold up the others, liveness
/// among them. The rest is the next pass's, an interval later.
pub const MAX_BATCHES_A_PASS: u32 = 100;

/// A maintenance service: one pass at a time, on the time it is given.
#[async_trait]
pub trait Service: Send + Sync {
    /// What a pass did.
    type Report: Summary + Send;
    /// One pass at `now`.
    async fn run_once(&self, now: DateTime<Utc>) -> Result<Self::Report>;
}

/// What a pass did, in one line for the log; None when it did nothing.
pub trait Summary {
    /// The line.
    fn summary(&self) -> Option<String>;
    /// Whether the line is a warning: something an operator must act on.
    fn warns(&self) -> bool {
        false
    }
}

/// A pass, summarised: what the loop runs, whatever the service.
#[async_trait]
trait Pass: Send + Sync {
    /// The pass's line, and whether it is a warning.
    async fn pass(&self, now: DateTime<Utc>) -> Result<Option<(String, bool)>>;
}

#[async_trait]
impl<S: Service> Pass for S {
    async fn pass(&self, now: DateTime<Utc>) -> Result<Option<(String, bool)>> {
        let report = self.run_once(now).await?;
        Ok(report.summary().map(|line| (line, report.warns())))
    }
}

/// A service as the loop sees it: its name in logs, how often it runs, and its pass.
#[derive(Clone)]
struct Every {
    name: &'static str,
    interval: Duration,
    service: Arc<dyn Pass>,
}

fn every(name: &'static str, interval: Duration, service: impl Service + 'static) -> Every {
    Every { name, interval, service: Arc::new(service) }
}

/// The maintenance services, run by whichever overseer holds the lease.
pub struct Overseer {
    services: Vec<Every>,
    clock: SharedClock,
    lease: Arc<Lease>,
}

impl Overseer {
    /// Every service over `store`, set by `config`.
    pub fn new(store: SharedStore, clock: SharedClock, config: OverseerConfig) -> Self {
        let c = &config;
        let services = vec![
            every("liveness", c.liveness.interval, liveness::Liveness::new(store.clone(), c.liveness)),
            every("run-timeout", c.run_timeout.interval, run_timeout::RunTimeout::new(store.clone(), c.run_timeout)),
            every("retries", c.retries.interval, retries::Retries::new(store.clone(), c.retries)),
            every("rotation", c.rotation.interval, rotation::Rotation::new(store.clone(), c.rotation)),
            every("unserved", c.unserved.interval, unserved::Unserved::new(store.clone(), c.unserved)),
            every("schedules", c.schedules.interval, schedules::Schedules::new(store.clone(), c.schedules.clone())),
            every(
                "stats-compaction",
                c.stats_compaction.interval,
                stats_compaction::StatsCompaction::new(store.clone(), c.stats_compaction),
            ),
            every("key-turns", c.key_turns.interval, key_turns::KeyTurns::new(store.clone(), c.key_turns)),
            every("key-fuel", c.key_fuel.interval, key_fuel::KeyFuel::new(store.clone(), c.key_fuel)),
            every("versions", c.versions.interval, versions::Versions::new(store.clone(), c.versions)),
            every("intake", c.intake.interval, intake::Intake::new(store.clone(), c.intake)),
        ];
        let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
        let holder = format!("{host}:{}:{:08x}", std::process::id(), rand::random::<u32>());
        let lease = Arc::new(Lease::new(store, clock.clone(), holder, config.lease_ttl));
        Overseer { services, clock, lease }
    }

    /// Its lease, as it changes.
    pub fn leadership(&self) -> Leadership {
        self.lease.leadership()
    }

    /// Run every service once, in order; for `taskhost overseer --once` and tests.
    pub async fn run_all_once(&self) -> Result<Vec<(String, Option<String>)>> {
        let mut out = Vec::new();
        for s in &self.services {
            out.push((s.name.to_string(), s.service.pass(self.clock.now()).await?.map(|(line, _)| line)));
        }
        Ok(out)
    }

    /// Run each service on its interval, while this node holds the lease, until `stop` turns
    /// true.
    pub async fn run_until(self, stop: watch::Receiver<bool>) {
        self.lease.renew().await;
        let this = Arc::new(self);
        let lease = tokio::spawn(this.lease.clone().keep(stop.clone()));
        // One pass at a time: a pass waiting on a lock (a migration's, an operator's) holds one
        // of the pool's connections, not one a service, which left none for the worker's own
        // heartbeats, outcomes and handler reports.
        let one_at_a_time = Arc::new(tokio::sync::Semaphore::new(1));
        let loops = this.services.iter().cloned().map(|s| {
            let clock = this.clock.clone();
            let leader = this.lease.leadership();
            let one_at_a_time = one_at_a_time.clone();
            let mut stop = stop.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(s.interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = tick.tick() => {}
                        _ = stop.changed() => return,
                    }
                    if *stop.borrow() {
                        return;
                    }
                    if !leader.is_leader() {
                        continue;
                    }
                    let _turn = tokio::select! {
                        turn = one_at_a_time.clone().acquire_owned() => match turn {
                            Ok(turn) => turn,
                            Err(_) => return,
                        },
                        _ = stop.changed() => return,
                    };
                    // Asked again: leadership may have lapsed while another pass ran.
                    if !leader.is_leader() {
                        continue;
                    }
                    match s.service.pass(clock.now()).await {
                        Ok(Some((summary, true))) => tracing::warn!(service = s.name, "{summary}"),
                        Ok(Some((summary, false))) => tracing::info!(service = s.name, "{summary}"),
                        Ok(None) => {}
                        Err(e) => tracing::warn!(service = s.name, "failed: {e}"),
                    }
                }
            })
        });
        for l in loops.collect::<Vec<_>>() {
            let _ = l.await;
        }
        let _ = lease.await;
        // No pass runs any more, nor will: hand the lease back, so that another overseer takes
        // over at its next try rather than when the lease would have expired.
        this.lease.release().await;
    }
}

#[cfg(test)]
mod tests;
