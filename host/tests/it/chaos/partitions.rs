//! Chaos with real partitions: three `taskhost worker` processes, each on a host of its own (a
//! network namespace; see `common/netns.rs`), two of them with clocks set apart, run tasks while
//! the test cuts a worker's link (packets dropped both ways), slows one, makes one drop a tenth
//! of its packets, kills one with SIGKILL and restarts the database server. Tasks keep coming
//! throughout. Then everything heals and the queue drains, and the test checks what the issue
//! promised:
//!
//! - every task finished exactly once by its accounting: one successful run, or dead with its
//!   failures counted; nothing left running;
//! - no two runs of a task ever ran at the same time, by the guests' own word: the `witness`
//!   handler writes when each run starts and, every 20 ms, that it still runs, to a directory
//!   granted per worker (so its clock offset is known and taken out). One task in eight runs
//!   4 to 14 s, longer than the horizon: without the fence those overlap their retries (seen:
//!   with the fence disabled the test fails within 30 s);
//! - every child of a fan-out queued exactly once and each join run once, after all its parts
//!   (see [`fan_out`]: one `fan-out` task is added every second beside the witness tasks);
//! - a limited queue's caps and rates, in all and per key, never exceeded, and nothing leaked
//!   (see [`limited`]: one task a second under one of three keys);
//! - while the faults go on, a checker samples the database every 500 ms (no task with two runs
//!   running), and at the end reads the workers' logs (no panic; every partition fenced its
//!   worker; the overseer never had to sweep up a run left under a runner no longer running,
//!   which a claim landing after its runner's time-out once left).
//!
//! `TASKHOST_CHAOS_SECONDS` (default 45) sets how long the faults go on, per server; CI runs the
//! default, a longer run is `TASKHOST_CHAOS_SECONDS=600 cargo test --release --test it chaos::`.
//! Each run prints its figures.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{fan_out, limited, witness};
use crate::common::netns::{require_root, Forwarder, Host};
use crate::common::process::{signal, skewed};
use crate::common::{self, own_server, Db, Env};
use taskhost::model::{NewTask, RunStatus, TaskFilter, TaskState};

/// Each worker's clock offset (libfaketime's syntax) and the same in nanoseconds.
pub const SKEWS: [Option<(&str, i128)>; 3] = [None, Some(("+90s", 90_000_000_000)), Some(("-40s", -40_000_000_000))];
const HEARTBEAT: &str = "1s";
const HORIZON: &str = "6s";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    None,
    Partitioned,
    Slowed,
    Lossy,
    Killed,
}

/// A worker process on its host, restarted when it is down and not meant to be.
struct Worker {
    index: usize,
    host: Host,
    forwarder: Forwarder,
    child: Option<Child>,
    url: String,
    config: PathBuf,
    log: PathBuf,
    fault: Fault,
    until: Instant,
    starts: u32,
}

impl Worker {
    fn start(&mut self, env: &Env) {
        let mut cmd = self.host.command(Path::new(env!("CARGO_BIN_EXE_taskhost")));
        cmd.args(["--database-url", &self.url, "--plugins"])
            .arg(&env.plugins)
            .arg("--cache-dir")
            .arg(common::cache_dir())
            .arg("--config")
            .arg(&self.config)
            .args(["worker", "--concurrency", "8", "--poll-interval", "50ms", "--shutdown-grace", "5s"])
            .args(["--heartbeat-interval", HEARTBEAT, "--heartbeat-horizon", HORIZON, "--log", "info"])
            .env_remove("TASKHOST_DATABASE_URL")
            .env_remove("TASKHOST_PLUGINS")
            .env_remove("TASKHOST_CONFIG");
        if let Some((offset, _)) = SKEWS[self.index] {
            cmd = skewed(offset, cmd);
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("worker log");
        let err = log.try_clone().expect("log");
        let child = cmd.stdout(Stdio::from(log)).stderr(Stdio::from(err)).spawn().expect("spawn worker");
        self.child = Some(child);
        self.starts += 1;
    }

    /// Whether its process has ended (then it is reaped).
    fn exited(&mut self) -> bool {
        match &mut self.child {
            None => true,
            Some(c) => match c.try_wait().expect("try_wait") {
                Some(_) => {
                    self.child = None;
                    true
                }
                None => false,
            },
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `host:port` of the server a URL names.
fn server_of(url: &str) -> SocketAddr {
    let rest = url.split_once('@').map(|(_, r)| r).expect("a server URL has a host");
    let hostport = rest.split(['/', '?']).next().expect("host");
    hostport.parse().unwrap_or_else(|e| panic!("{hostport}: {e}"))
}

async fn add_tasks(env: &Env, n: usize) {
    let tasks = (0..n).map(|_| NewTask::new("witness", witness::data().to_string()).with_max_attempts(20)).collect();
    env.app.client.add_many(tasks).await.expect("add");
}

/// The checker's sample of the database while the faults go on: no task has two runs running.
/// Returns how many tasks are running.
async fn one_active_run_each(env: &Env) -> usize {
    let running = TaskFilter { status: Some(RunStatus::Running), ..TaskFilter::default() };
    let tasks = env.app.client.list(&running).await.expect("list running");
    for t in &tasks {
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        let active = runs.iter().filter(|r| r.status == RunStatus::Running).count();
        assert!(active <= 1, "task {} has {active} runs running: {runs:?}", t.id);
    }
    tasks.len()
}

pub async fn chaos(db: Db) {
    require_root();
    let seconds: u64 = std::env::var("TASKHOST_CHAOS_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(45);
    let env = Env::on_own_server(db, &["witness", "fan-out", "join"]).await;
    let server = server_of(&env.db_url);
    let mut workers = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..SKEWS.len() {
        let host = Host::new(i as u8);
        let listen = SocketAddr::new(host.gateway.into(), server.port());
        let forwarder = Forwarder::start(listen, server).await;
        let dir = env.dir.path().join(format!("w{i}"));
        std::fs::create_dir(&dir).expect("witness dir");
        let config = env.dir.path().join(format!("w{i}.toml"));
        std::fs::write(
            &config,
            format!(
                "[overseer]\nlease_ttl = \"5s\"\n[overseer.liveness]\ninterval = \"1s\"\nheartbeat_horizon = \"{HORIZON}\"\n\
                 [handlers.witness.grants]\ndirs = [{{ host = \"{}\", guest = \"/out\", mode = \"rw\" }}]\n{}",
                dir.display(),
                limited::CONFIG
            ),
        )
        .expect("config");
        let url = env.db_url.replacen(&server.to_string(), &listen.to_string(), 1);
        let log = env.dir.path().join(format!("w{i}.log"));
        let mut w = Worker {
            index: i,
            host,
            forwarder,
            child: None,
            url,
            config,
            log,
            fault: Fault::None,
            until: Instant::now(),
            starts: 0,
        };
        w.start(&env);
        workers.push(w);
        dirs.push(dir);
    }

    // The faults, one new every 3 s on a worker that has none, at most two at once; the server
    // restarted once, halfway. Tasks added all along.
    let (mut partitions, mut slowed, mut lossy, mut kills, mut exits) = (0, 0, 0, 0, 0);
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut next_fault = Instant::now() + Duration::from_secs(3);
    let mut restarted = false;
    let mut added = 0;
    let (mut parents, mut keyed) = (Vec::new(), Vec::new());
    let mut faults = 0;
    let (mut max_running, mut samples) = (0, 0);
    while started.elapsed() < Duration::from_secs(seconds) {
        tick.tick().await;
        add_tasks(&env, 5).await;
        added += 5;
        if samples % 2 == 0 {
            parents.push(fan_out::add(&env).await);
        } else {
            keyed.push(limited::add(&env).await);
        }
        max_running = max_running.max(one_active_run_each(&env).await);
        samples += 1;
        let now = Instant::now();
        for w in &mut workers {
            if w.fault != Fault::None && now >= w.until {
                match w.fault {
                    Fault::Partitioned => w.host.heal(),
                    Fault::Slowed => w.forwarder.set_delay(Duration::ZERO),
                    Fault::Lossy => w.host.heal(),
                    _ => {}
                }
                w.fault = Fault::None;
            }
            if w.fault != Fault::Killed && w.exited() {
                exits += 1;
                w.start(&env);
            }
        }
        if now >= next_fault && workers.iter().filter(|w| w.fault != Fault::None).count() < 2 {
            next_fault = now + Duration::from_secs(3);
            let healthy: Vec<usize> = (0..workers.len()).filter(|&i| workers[i].fault == Fault::None).collect();
            // Taken in turn, so that every run sees each kind of fault.
            let w = &mut workers[healthy[faults % healthy.len()]];
            faults += 1;
            match faults % 4 {
                1 => {
                    // Longer than the fence (4 s) and the horizon (6 s): declared dead meanwhile.
                    w.host.partition();
                    (w.fault, w.until, partitions) =
                        (Fault::Partitioned, now + Duration::from_secs(10), partitions + 1);
                }
                2 => {
                    w.forwarder.set_delay(Duration::from_millis(250));
                    (w.fault, w.until, slowed) = (Fault::Slowed, now + Duration::from_secs(6), slowed + 1);
                }
                3 => {
                    w.host.lossy(0.1);
                    (w.fault, w.until, lossy) = (Fault::Lossy, now + Duration::from_secs(6), lossy + 1);
                }
                _ => {
                    if let Some(c) = &mut w.child {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                    w.child = None;
                    (w.fault, w.until, kills) = (Fault::Killed, now + Duration::from_secs(2), kills + 1);
                }
            }
        }
        if !restarted && started.elapsed() >= Duration::from_secs(seconds / 2) {
            restarted = true;
            tokio::task::spawn_blocking(move || own_server(db, "restart")).await.expect("restart");
        }
    }

    // Everything mends; the queue drains.
    for w in &mut workers {
        w.host.heal();
        w.forwarder.set_delay(Duration::ZERO);
        w.fault = Fault::None;
        if w.exited() {
            w.start(&env);
        }
    }
    let client = env.app.client.clone();
    let all = TaskFilter::default();
    let drained = Instant::now();
    let mut poll = tokio::time::interval(Duration::from_millis(100));
    loop {
        poll.tick().await;
        let tasks = client.list(&all).await.expect("list");
        let open: Vec<_> = tasks.iter().filter(|t| !t.state.is_final()).collect();
        if open.is_empty() {
            break;
        }
        // A worker the overseer timed out while it was cut off exits when it is back; its
        // supervisor starts it again.
        for w in &mut workers {
            if w.exited() {
                exits += 1;
                w.start(&env);
            }
        }
        if drained.elapsed() > Duration::from_secs(180) {
            // What the operator would look at: the unfinished tasks, their runs, the workers' logs.
            let mut runners = std::collections::BTreeSet::new();
            for t in open.iter().take(5) {
                let runs = env.app.store.runs_of(t.id).await.expect("runs");
                runners.extend(runs.iter().filter_map(|r| r.runner_id));
                eprintln!("unfinished: {t:?}\n  runs: {runs:?}");
            }
            let ever = env.app.store.runners_seen_since(chrono::DateTime::UNIX_EPOCH).await.expect("runners");
            for r in ever.iter().filter(|r| runners.contains(&r.id)) {
                eprintln!("their runner: {r:?}");
            }
            for w in &workers {
                let text = std::fs::read_to_string(&w.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("--- worker {} (log tail, newest first)\n{}", w.index, tail.join("\n"));
            }
            panic!("{} of {added} tasks unfinished 180 s after the faults ended", open.len());
        }
    }
    for w in &mut workers {
        if let Some(c) = &w.child {
            signal(c, "TERM");
        }
    }
    let asked = Instant::now();
    let (mut fences, mut orphans, mut swept) = (0, 0, 0);
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    for w in &mut workers {
        while !w.exited() {
            assert!(
                asked.elapsed() < Duration::from_secs(7),
                "worker {} stops within its grace (and two seconds)",
                w.index
            );
            poll.tick().await;
        }
        let text = std::fs::read_to_string(&w.log).expect("log");
        assert!(!text.contains("panicked"), "worker {} panicked: {text}", w.index);
        fences += text.matches("stopping every run and claiming nothing").count();
        orphans += text.matches("its claim's answer never came").count();
        swept += text.matches("timed out runs left running under runners no longer running").count();
    }
    // A claim never lands for a runner already timed out, so the overseer's sweep finds nothing.
    assert_eq!(swept, 0, "runs were left running under runners no longer running");

    // A partition (10 s) outlasts the fence (4 s): each one fenced its worker, by its own log.
    assert!(fences >= partitions, "{partitions} partitions but {fences} fences in the workers' logs");

    // Exactly once, by the database's accounting.
    let tasks = client.list(&all).await.expect("list");
    assert_eq!(tasks.iter().filter(|t| t.parent_id.is_none()).count(), added + parents.len() + keyed.len());
    let fan = fan_out::check(&env, &parents, &tasks).await;
    let seen = witness::witnessed(&dirs);
    let (mut succeeded, mut dead, mut runs_total, mut lost) = (0, 0, 0, 0);
    for t in &tasks {
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        runs_total += runs.len();
        lost += runs.iter().filter(|r| r.error_code.as_deref() == Some("runner-lost")).count();
        assert!(runs.iter().all(|r| r.finished_on.is_some() && r.status != RunStatus::Running), "{runs:?}");
        if t.handler != "witness" {
            continue; // parents and joins: `fan_out::check`
        }
        let successes: Vec<_> = runs.iter().filter(|r| r.status == RunStatus::Success).collect();
        match t.state {
            TaskState::Succeeded => {
                succeeded += 1;
                assert_eq!(successes.len(), 1, "task {} succeeded once: {runs:?}", t.id);
                // A run the fence stopped and put back keeps its id: one of its tries ended.
                let run = successes[0].id;
                let ended = seen.get(&t.id).is_some_and(|s| s.iter().any(|s| s.run == run && s.ended));
                assert!(ended, "task {}: no guest saw its successful run {run} end: {:?}", t.id, seen.get(&t.id));
            }
            _ => {
                dead += 1;
                assert!(successes.is_empty() && t.task_runs_failed >= 1 && t.gave_up_on.is_some(), "{t:?} {runs:?}");
            }
        }
    }
    let lim = limited::check(&env, &keyed, &tasks, &seen).await;
    // Never two runs of one task at once, by the guests' own times.
    let mut closest = i128::MAX;
    for (task, mut runs) in seen {
        runs.sort_by_key(|s| s.start);
        for pair in runs.windows(2) {
            let gap = pair[1].start - pair[0].last;
            assert!(gap > 0, "task {task}: run {} started while run {} ran: {pair:?}", pair[1].run, pair[0].run);
            closest = closest.min(gap);
        }
    }
    eprintln!(
        "chaos on {db:?} for {seconds} s: {} tasks ({succeeded} witnesses succeeded, {dead} dead), {runs_total} runs \
         ({lost} runner-lost); {} fan-outs in {} runs, {} joins in {} runs; {} limited tasks in {} starts (at most {} \
         alive, {} starts in a second); {partitions} partitions, {slowed} slowed links, {lossy} lossy links, {kills} kills, {exits} worker exits, \
         1 server restart; {fences} fences; {orphans} lost claims put back; {samples} samples of the database, \
         at most {max_running} tasks running; closest start of a task's run after another's last sign of life: \
         {} ms",
        tasks.len(),
        fan.parents,
        fan.parent_runs,
        fan.joins,
        fan.join_runs,
        lim.tasks,
        lim.starts,
        lim.most_alive,
        lim.most_starts,
        if closest == i128::MAX { -1 } else { closest / 1_000_000 }
    );
}
