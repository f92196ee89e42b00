//! Runner liveness: a runner whose heartbeat is older than the horizon, or whose process is gone
//! from this machine, becomes `timeout`, and so do its running runs (the retries service then
//! schedules their tasks again). Each pass also times out any run still running under a runner
//! that is no longer running: none should be, and nothing else would end one.
//!
//! A PID means something only in its own PID namespace on its own boot of its own machine, and
//! host names are shared (containers, clones). So a runner records where it runs as its host name
//! plus the boot id and the PID namespace ([`local_identity`]), and PIDs are checked only for
//! runners with exactly this process's identity; where the identity cannot be read, only
//! heartbeats decide.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::model::{Runner, RunnerId};
use crate::store::SharedStore;

/// The `[overseer.liveness]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// A heartbeat older than this means the runner is dead. Several heartbeat intervals.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub heartbeat_horizon: Duration,
    /// Also check PIDs of runners registered from this host.
    pub check_local_pids: bool,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
    /// Its default heartbeat horizon.
    pub const DEFAULT_HEARTBEAT_HORIZON: Duration = Duration::from_secs(30);
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Self::DEFAULT_INTERVAL,
            heartbeat_horizon: Self::DEFAULT_HEARTBEAT_HORIZON,
            check_local_pids: true,
        }
    }
}

/// What [`judge`] finds of a runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It heartbeats, and its process (when this host can see it) runs.
    Alive,
    /// Its latest heartbeat is older than the horizon.
    HeartbeatStale,
    /// Its process, on this host, is gone.
    ProcessGone,
}

/// Decide whether a runner is dead. `local`: this process's [`local_identity`] (None: it cannot
/// be verified); `pid_alive` answers for PIDs of that identity only (a PID means nothing in
/// another PID namespace, boot or machine).
pub fn judge(
    runner: &Runner,
    now: DateTime<Utc>,
    horizon: Duration,
    local: Option<&str>,
    pid_alive: &dyn Fn(u32) -> bool,
) -> Verdict {
    let horizon = chrono::Duration::from_std(horizon).unwrap_or(chrono::Duration::MAX);
    if now.signed_duration_since(runner.heartbeat_on) > horizon {
        return Verdict::HeartbeatStale;
    }
    if local == Some(runner.host_name.as_str()) && !pid_alive(runner.process_id) {
        return Verdict::ProcessGone;
    }
    Verdict::Alive
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// The runners found dead.
    pub runners_timed_out: Vec<RunnerId>,
    /// Their runs, timed out.
    pub runs_timed_out: u64,
    /// Runs found running under a runner no longer running, timed out.
    pub orphans_timed_out: u64,
}

/// At most this many orphaned runs are timed out a pass (there should be none).
const ORPHANS_A_PASS: u32 = 1_000;

/// Where this process runs, as runners record it (`task_runners.host_name`): the host name, the
/// boot id and the PID namespace, e.g. `web-1 boot:4b7c8a1e pidns:4026531836`. None part of it
/// can be read (not Linux, no /proc), the host name alone, marked unverified: PIDs are then never
/// checked against it.
pub fn local_identity() -> String {
    let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "unknown".into());
    match machine_and_namespace() {
        Some((boot, pidns)) => format!("{host} boot:{boot} pidns:{pidns}"),
        None => format!("{host} (unverified)"),
    }
}

fn machine_and_namespace() -> Option<(String, String)> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot: String = boot.trim().chars().filter(|c| c.is_ascii_hexdigit()).take(8).collect();
    // "pid:[4026531836]"
    let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let ns: String = ns.to_string_lossy().chars().filter(|c| c.is_ascii_digit()).collect();
    (boot.len() == 8 && !ns.is_empty()).then_some((boot, ns))
}

/// The service (see the module's documentation).
pub struct Liveness {
    store: SharedStore,
    config: Config,
    /// This process's identity when it can check PIDs there; None: heartbeats alone decide.
    host: Option<String>,
}

impl Liveness {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        let identity = local_identity();
        let host = (!identity.ends_with("(unverified)")).then_some(identity);
        Liveness { store, config, host }
    }
}

fn process_exists(pid: sysinfo::Pid) -> bool {
    let mut sys = sysinfo::System::new();
    sys.refresh_processes_specifics(
        sysinfo::ProcessesToUpdate::Some(&[pid]),
        true,
        sysinfo::ProcessRefreshKind::nothing(),
    );
    sys.process(pid)
        .is_some_and(|p| !matches!(p.status(), sysinfo::ProcessStatus::Zombie | sysinfo::ProcessStatus::Dead))
}

#[async_trait]
impl Service for Liveness {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let runners = self.store.live_runners().await?;
        let me = std::process::id();
        let pid_alive = |pid: u32| {
            if !self.config.check_local_pids || pid == me {
                return true;
            }
            process_exists(sysinfo::Pid::from_u32(pid))
        };
        let dead: Vec<RunnerId> = runners
            .iter()
            .filter(|r| {
                judge(r, now, self.config.heartbeat_horizon, self.host.as_deref(), &pid_alive) != Verdict::Alive
            })
            .map(|r| r.id)
            .collect();
        let runs = self.store.time_out_runners(&dead, now).await?;
        let orphans = self.store.time_out_orphaned_runs(now, ORPHANS_A_PASS).await?;
        if orphans > 0 {
            tracing::warn!(orphans, "timed out runs left running under runners no longer running");
        }
        Ok(Report { runners_timed_out: dead, runs_timed_out: runs, orphans_timed_out: orphans })
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        let runners = (!self.runners_timed_out.is_empty()).then(|| {
            format!("timed out runners {:?} and {} of their runs", self.runners_timed_out, self.runs_timed_out)
        });
        let orphans = (self.orphans_timed_out > 0)
            .then(|| format!("timed out {} runs of runners no longer running", self.orphans_timed_out));
        match (runners, orphans) {
            (Some(r), Some(o)) => Some(format!("{r}; {o}")),
            (r, o) => r.or(o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunnerStatus;

    fn runner(host: &str, pid: u32, heartbeat_on: DateTime<Utc>) -> Runner {
        Runner {
            id: 1,
            process_id: pid,
            host_name: host.into(),
            started_on: heartbeat_on,
            finished_on: None,
            status: RunnerStatus::Running,
            heartbeat_on,
            handlers: None,
            queues: None,
        }
    }

    #[test]
    fn a_fresh_heartbeat_on_another_host_is_alive_whatever_its_pid() {
        let now = Utc::now();
        let r = runner("other", 42, now);
        assert_eq!(judge(&r, now, Duration::from_secs(30), Some("me"), &|_| false), Verdict::Alive);
    }

    #[test]
    fn the_same_host_name_in_another_pid_namespace_is_judged_by_its_heartbeat_alone() {
        let now = Utc::now();
        let r = runner("web-1 boot:4b7c8a1e pidns:4026532001", 42, now);
        let me = Some("web-1 boot:4b7c8a1e pidns:4026531836");
        assert_eq!(judge(&r, now, Duration::from_secs(30), me, &|_| false), Verdict::Alive);
        let r = runner("web-1 boot:0000aaaa pidns:4026531836", 42, now);
        assert_eq!(judge(&r, now, Duration::from_secs(30), me, &|_| false), Verdict::Alive, "another boot");
    }

    #[test]
    fn pids_are_never_checked_when_the_identity_cannot_be_verified() {
        let now = Utc::now();
        let r = runner("web-1 (unverified)", 42, now);
        assert_eq!(judge(&r, now, Duration::from_secs(30), None, &|_| false), Verdict::Alive);
    }

    #[test]
    fn this_process_has_a_verified_identity_here() {
        let id = local_identity();
        assert!(id.contains(" boot:") && id.contains(" pidns:"), "{id}");
    }

    #[test]
    fn a_stale_heartbeat_is_dead() {
        let now = Utc::now();
        let r = runner("other", 42, now - chrono::Duration::seconds(31));
        assert_eq!(judge(&r, now, Duration::from_secs(30), Some("me"), &|_| true), Verdict::HeartbeatStale);
    }

    #[test]
    fn a_vanished_local_process_is_dead() {
        let now = Utc::now();
        let r = runner("me", 42, now);
        assert_eq!(judge(&r, now, Duration::from_secs(30), Some("me"), &|_| false), Verdict::ProcessGone);
        assert_eq!(judge(&r, now, Duration::from_secs(30), Some("me"), &|_| true), Verdict::Alive);
    }
}
