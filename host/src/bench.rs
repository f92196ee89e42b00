//! Benchmarks of the queue on the database a user points at: what `taskhost bench` runs (and the
//! project's own `cargo bench`).
//!
//! A benchmark works in a queue of its own ([`queue_name`]), so workers already serving the
//! database never see its tasks, and it removes what it added when it is done ([`clean`]). It
//! runs in phases, each a function:
//! - [`add`]: N tasks queued with [`crate::Client::add_many`] (checked as any add is), in calls of
//!   [`ADD_CHUNK`];
//! - [`drain`]: one worker in this process runs them all, from its start to its exit, with the
//!   CPU time this process spent on it;
//! - [`latency`]: single adds, one at a time, to an idle worker with the default settings; each
//!   one's time from the add to its run's start (as the database's clock records both).
//!
//! With no handler named, it uses [`NOOP`], a no-op component it carries: a handler that returns
//! `{}` without reading its task, the smallest run the sandbox can make.

use std::time::{Duration, Instant};

use crate::app::App;
use crate::error::{Error, Result};
use crate::model::{NewTask, RunStatus};
use crate::runner::{WorkerConfig, WorkerReport};
use crate::store::{BulkFilter, Finished};

/// The no-op handler `taskhost bench` carries, as component text: it exports `handle`, imports
/// nothing and returns `ok(some("{}"))`. (Its core module needs a `realloc` because the task
/// handed to it holds strings, which the host copies into its memory; it never reads them.)
pub const NOOP: &str = include_str!("bench/noop.wat");

/// [`NOOP`] assembled (`wasm-tools parse noop.wat -o noop.wasm`): carried as bytes, so the build
/// needs no WebAssembly text parser; a test checks they are the text's.
const NOOP_BYTES: &[u8] = include_bytes!("bench/noop.wasm");

/// [`NOOP`] as component bytes, ready for a plugins directory.
pub fn noop_component() -> Result<Vec<u8>> {
    Ok(NOOP_BYTES.to_vec())
}

/// Tasks queued a call.
pub const ADD_CHUNK: usize = 10_000;

/// What the phases report as they go: the phase, how far, out of how many. None: nothing is
/// shown, and the drain does not look at the queue to show it.
pub type Progress<'a> = Option<&'a (dyn Fn(Phase, u64, u64) + Sync)>;

fn report(progress: Progress<'_>, phase: Phase, done: u64, total: u64) {
    if let Some(show) = progress {
        show(phase, done, total);
    }
}

/// A benchmark's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Queueing the tasks.
    Add,
    /// Running them.
    Drain,
    /// Single adds to an idle worker.
    Latency,
}

impl Phase {
    /// Its name, as a progress line shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Add => "bulk add",
            Phase::Drain => "drain",
            Phase::Latency => "latency",
        }
    }
}

/// A queue name no one else uses: `taskhost-bench-PID-RANDOM`.
pub fn queue_name() -> String {
    format!("taskhost-bench-{}-{:08x}", std::process::id(), rand::random::<u32>())
}

/// How long [`add`] took to queue `tasks` tasks of `handler` with `data` in `queue`.
pub async fn add(
    app: &App,
    queue: &str,
    handler: &str,
    data: &str,
    tasks: usize,
    progress: Progress<'_>,
) -> Result<Duration> {
    let started = Instant::now();
    let mut done = 0;
    while done < tasks {
        let n = ADD_CHUNK.min(tasks - done);
        let chunk = (0..n).map(|_| NewTask::new(handler, data).with_queue(queue)).collect();
        app.client.add_many(chunk).await?;
        done += n;
        report(progress, Phase::Add, done as u64, tasks as u64);
    }
    Ok(started.elapsed())
}

/// What [`drain`] measured.
#[derive(Debug, Clone)]
pub struct Drained {
    /// From the worker's start to its exit.
    pub took: Duration,
    /// CPU time (user and system) this process spent meanwhile.
    pub cpu: Duration,
    /// The worker's own count.
    pub report: WorkerReport,
}

/// Run every task of `queue` with one worker in this process (`config`'s settings, draining that
/// queue alone, no overseer); `tasks` is how many there are, for the progress.
pub async fn drain(
    app: &App,
    queue: &str,
    config: WorkerConfig,
    tasks: u64,
    progress: Progress<'_>,
) -> Result<Drained> {
    let config = WorkerConfig { drain: true, queues: vec![queue.to_string()], overseer: None, ..config };
    let (started, cpu) = (Instant::now(), cpu_time());
    let run = app.worker(config).run(std::future::pending());
    let report = watch_progress(app, queue, tasks, progress, run).await?;
    Ok(Drained { took: started.elapsed(), cpu: cpu_time().saturating_sub(cpu), report })
}

/// Await `work`, reporting meanwhile, twice a second, how many tasks of `queue` are done (a look
/// at every queue's counts, which costs the database a scan: only while a bar is shown).
pub async fn watch_progress<T>(
    app: &App,
    queue: &str,
    tasks: u64,
    progress: Progress<'_>,
    work: impl std::future::Future<Output = T>,
) -> T {
    let Some(show) = progress else {
        return work.await;
    };
    let mut work = std::pin::pin!(work);
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            done = &mut work => {
                show(Phase::Drain, tasks, tasks);
                return done;
            }
            _ = tick.tick() => {
                // A failed look only skips a tick of the bar.
                if let Ok(queues) = app.store.queues(app.clock.now()).await {
                    let left = queues.iter().find(|q| q.name == queue).map_or(0, |q| q.due + q.later + q.running);
                    show(Phase::Drain, tasks.saturating_sub(left), tasks);
                }
            }
        }
    }
}

/// Enqueue-to-start times, sorted, of `runs` single adds to an idle worker of this process with
/// the default settings (its wake-ups and poll interval).
pub async fn latency(
    app: &App,
    queue: &str,
    handler: &str,
    data: &str,
    runs: usize,
    progress: Progress<'_>,
) -> Result<Vec<Duration>> {
    let config = WorkerConfig { queues: vec![queue.to_string()], overseer: None, ..WorkerConfig::default() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(app.worker(config).run(async move {
        let _ = stopped.await;
    }));
    // Idle first: one task run and written, so the worker waits for the next.
    let measured = async {
        one_start(app, queue, handler, data).await?;
        let mut took = Vec::with_capacity(runs);
        for i in 0..runs {
            took.push(one_start(app, queue, handler, data).await?);
            report(progress, Phase::Latency, i as u64 + 1, runs as u64);
        }
        Ok::<_, Error>(took)
    };
    let measured = measured.await;
    let _ = stop.send(());
    let stopped = worker.await.map_err(|e| Error::Bench(format!("the latency worker failed: {e}")))?;
    let mut took = measured?;
    stopped?;
    took.sort();
    Ok(took)
}

/// Add one task and wait until its run is done; from the add to its start.
async fn one_start(app: &App, queue: &str, handler: &str, data: &str) -> Result<Duration> {
    let asked = app.clock.now();
    let id = app.client.add(NewTask::new(handler, data).with_queue(queue)).await?.id;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = app.store.runs_of(id).await?;
        if let Some(run) = runs.first().filter(|r| !matches!(r.status, RunStatus::Scheduled | RunStatus::Running)) {
            let started = run.started_on.unwrap_or(asked);
            return Ok((started - asked).to_std().unwrap_or_default());
        }
        if Instant::now() > deadline {
            return Err(Error::Bench(format!("task {id} did not run within 60 s")));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Claim and finish (as successes, no wasm) every due task of `queue` in batches of 256, as a
/// worker's store calls would: the count, and the time spent claiming and finishing.
pub async fn claim_and_finish_all(
    app: &App,
    queue: &str,
    runner: crate::model::RunnerId,
    digest: &str,
) -> Result<(usize, Duration, Duration)> {
    let (mut claim_t, mut finish_t, mut n) = (Duration::ZERO, Duration::ZERO, 0);
    loop {
        let t = Instant::now();
        let claimed = app.store.claim(runner, &[queue.into()], 256, app.clock.now(), Duration::from_secs(60)).await?;
        claim_t += t.elapsed();
        if claimed.is_empty() {
            return Ok((n, claim_t, finish_t));
        }
        n += claimed.len();
        let now = app.clock.now();
        let outcomes: Vec<_> = claimed
            .iter()
            .map(|c| crate::model::RunOutcome {
                run_id: c.run_id,
                task_id: c.task_id,
                end: crate::model::RunEnd::Success { results: Some("{}".into()), children: Default::default() },
                percents_completed: None,
                finished_on: now,
                duration_ms: 0,
                component_digest: Some(digest.to_string()),
                fuel_used: Some(100),
                logs: None,
                fuel_key: None,
                delete_on_success: false,
            })
            .collect();
        let t = Instant::now();
        app.store.finish_runs(&outcomes).await?;
        finish_t += t.elapsed();
    }
}

/// The number in the environment variable `name` (a bench's setting), else `default`.
pub fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The value at quantile `q` (0 to 1) of sorted `values`.
pub fn quantile(values: &[Duration], q: f64) -> Duration {
    let i = ((values.len() as f64 * q) as usize).min(values.len().saturating_sub(1));
    values.get(i).copied().unwrap_or_default()
}

/// Delete every task of `queue` with its runs and its statistics (the workers' runner rows stay,
/// as every worker's do); how many tasks. Anything still unfinished is cancelled first.
pub async fn clean(app: &App, queue: &str) -> Result<u64> {
    let filter = BulkFilter { queue: Some(queue.to_string()), ..Default::default() };
    let now = app.clock.now();
    app.store.cancel_matching(&filter, crate::store::Unfinished::Any, now).await?;
    let later = now + chrono::Duration::days(1);
    let deleted = app.store.delete_finished(Finished::Any, &filter, later).await?;
    app.store.forget_stats(queue).await?;
    // Its limit, where `--on-success` set one.
    app.client.clear_limit(&format!("queue:{queue}")).await?;
    Ok(deleted)
}

/// CPU time (user and system) this process has used.
pub fn cpu_time() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

/// CPU time (user and system) of this process's children that ended and were waited for.
pub fn children_cpu_time() -> Duration {
    rusage(libc::RUSAGE_CHILDREN)
}

fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(test)]
mod noop_tests {
    #[test]
    fn the_carried_no_op_is_its_text_assembled() {
        let assembled = wat::parse_str(super::NOOP).map_err(|e| e.to_string());
        assert_eq!(assembled.as_deref(), Ok(super::NOOP_BYTES), "run: wasm-tools parse noop.wat -o noop.wasm");
    }
}
