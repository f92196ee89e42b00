//! One claimed run: load its plugin, run it in the sandbox within its memory budget and its
//! run timeout, and decide what comes next. A panic inside the host while doing so ends the run
//! with `host-error`; it never takes the worker down.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::{mpsc, Notify, Semaphore};

use super::put_back::PutBacks;
use crate::clock::SharedClock;
use crate::error::Error;
use crate::metrics::{Counter, Histogram};
use crate::model::*;
use crate::plugins::{Catalog, Plugin};
use crate::retry::{self, Backoff};
use crate::sandbox::{codes, Failure, GuestOutcome, RunControl, RunInput, RunReport};

/// What every run of a worker shares.
pub(super) struct Shared {
    pub catalog: Arc<Catalog>,
    pub clock: SharedClock,
    pub backoff: Backoff,
    pub progress_tx: mpsc::Sender<ProgressUpdate>,
    /// Guest memory, in MiB: a run holds its memory limit while it runs.
    pub memory: Arc<Semaphore>,
    pub memory_budget_mib: u32,
    /// Runs put back because they could not start (`host-busy`).
    pub put_backs: PutBacks,
    /// Where a run reads the tasks its task runs after (`dependencies`; None: it reads none).
    pub store: Option<crate::store::SharedStore>,
}

/// What became of a claimed run.
pub(super) enum Executed {
    Ended(RunOutcome),
    /// It could not start for want of a host resource: to be put back in the queue, due at
    /// `at`, uncounted; `fallback` (a `host-busy` failure) is written if that cannot be done.
    PutBack {
        at: chrono::DateTime<chrono::Utc>,
        reason: String,
        fallback: RunOutcome,
    },
    /// Told to stop (cancelled, or ended elsewhere) before it ended: nothing to write but what
    /// the guest left, if it had started.
    Stopped(Option<StoppedRun>),
}

/// How [`execute`] ended.
enum Ran {
    Ended(RunOutcome),
    Stopped(Option<StoppedRun>),
}

/// What a run's outcome needs of its claim (kept apart from the task's data, which moves into
/// the sandbox).
#[derive(Debug, Clone)]
pub(super) struct RunMeta {
    pub run_id: RunId,
    pub task_id: TaskId,
    pub task_runs_failed: u32,
    pub max_attempts: u32,
    pub backoff: BackoffSettings,
    pub snoozes: u32,
    pub fuel_key: Option<FuelKey>,
    pub delete_on_success: bool,
}

/// The tasks a run queued, each due at its time now that the run ended at `end`.
fn children_due(children: Vec<crate::sandbox::children::Child>, end: chrono::DateTime<chrono::Utc>) -> QueuedTasks {
    let mut queued = QueuedTasks::default();
    for (n, c) in (0u32..).zip(children) {
        if !c.after.is_empty() {
            queued.after.insert(n, c.after);
        }
        queued.tasks.push(NewTask { scheduled_on: Some(c.due.at(end)), ..c.task });
    }
    queued
}

impl RunMeta {
    pub fn of(run: &ClaimedRun) -> Self {
        RunMeta {
            run_id: run.run_id,
            task_id: run.task_id,
            task_runs_failed: run.task_runs_failed,
            max_attempts: run.max_attempts,
            backoff: run.backoff,
            snoozes: run.snoozes,
            fuel_key: run.fuel_key.clone(),
            delete_on_success: run.delete_on_success,
        }
    }
}

/// Run one claimed run until it ends or `stop` is notified, turning a panic anywhere in it into a
/// `host-error` outcome.
pub(super) async fn execute_guarded(shared: &Shared, run: ClaimedRun, stop: Arc<Notify>) -> Executed {
    let meta = RunMeta::of(&run);
    let started = Instant::now();
    let (handler, queue) = (run.handler.clone(), run.queue.clone());
    let labels = [("handler", handler.as_str()), ("queue", queue.as_str())];
    let metrics = crate::metrics::global();
    metrics.add(Counter::RunsStarted, &labels, 1);
    let waited = (run.started_on - run.due_on).num_milliseconds().max(0) as f64 / 1000.0;
    metrics.observe(Histogram::RunWait, &labels, waited);
    // Whatever is logged while the run goes (the guest's lines among them) carries the run's
    // identity; the outcome is recorded on the span as it ends.
    let span = tracing::info_span!("run", task_id = run.task_id, run_id = run.run_id, handler = %run.handler,
        queue = %run.queue, attempt = run.attempt, outcome = tracing::field::Empty);
    // Boxed once, here, and passed on as the box: a run's future is some 6 KiB, and each async
    // fn taking it by value kept a copy beside its own (19 KiB in all), moved at every start.
    let work = Box::pin(execute(shared, run, started, stop));
    let run_id = meta.run_id;
    let ran = tracing::Instrument::instrument(guarded(shared, meta, started, work), span.clone()).await;
    let executed = counted(shared, run_id, ran);
    let ended = match &executed {
        Executed::Ended(outcome) => {
            metrics.observe(Histogram::RunDuration, &labels, outcome.duration_ms as f64 / 1000.0);
            if let Some(fuel) = outcome.fuel_used {
                metrics.observe(Histogram::RunFuel, &labels[..1], fuel as f64);
            }
            outcome.status().as_str()
        }
        Executed::PutBack { .. } => "put-back",
        Executed::Stopped(_) => "stopped",
    };
    span.record("outcome", ended);
    metrics.add(Counter::RunsEnded, &[labels[0], labels[1], ("outcome", ended)], 1);
    executed
}

/// The run's end: ended, put back for later, or stopped.
fn counted(shared: &Shared, run_id: RunId, ran: Ran) -> Executed {
    let outcome = match ran {
        Ran::Ended(outcome) => outcome,
        Ran::Stopped(kept) => return Executed::Stopped(kept),
    };
    let busy = outcome.failure().filter(|f| f.code == codes::HOST_BUSY).map(|f| f.message.clone());
    match busy.and_then(|reason| Some((reason, shared.put_backs.due_again(run_id)?))) {
        Some((reason, at)) => Executed::PutBack { at, reason, fallback: outcome },
        None => {
            shared.put_backs.forget(run_id);
            Executed::Ended(outcome)
        }
    }
}

async fn guarded(shared: &Shared, meta: RunMeta, started: Instant, run: impl std::future::Future<Output = Ran>) -> Ran {
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Ok(ran) => ran,
        Err(panic) => {
            let what = crate::error::panic_text(&*panic);
            tracing::error!(run_id = meta.run_id, "the host panicked while running a task: {what}");
            let failure = Failure::host_error(&format!("panic: {what}")).bounded();
            Ran::Ended(outcome(shared, meta, started, Ended { failure: Some(failure), ..Ended::default() }))
        }
    }
}

/// `work`'s output, or None when the run is told to stop first.
async fn unless_stopped<T>(stop: &Notify, work: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::select! {
        done = work => Some(done),
        () = stop.notified() => None,
    }
}

/// How a run ended, before the next step is decided.
#[derive(Default)]
struct Ended {
    failure: Option<Failure>,
    results: Option<String>,
    snooze: Option<Duration>,
    /// The signal it ends waiting for.
    wait: Option<SignalWait>,
    children: Vec<crate::sandbox::children::Child>,
    /// The signals it was handed.
    signals: Vec<SignalId>,
    digest: Option<String>,
    fuel: Option<i64>,
    report: RunReport,
}

async fn execute(shared: &Shared, run: ClaimedRun, started: Instant, stop: Arc<Notify>) -> Ran {
    let meta = RunMeta::of(&run);
    if let Some(reason) = run.unreadable.as_deref() {
        let failure = Failure::unreadable_task(reason).bounded();
        return Ran::Ended(outcome(shared, meta, started, Ended { failure: Some(failure), ..Ended::default() }));
    }
    match plugin_of(shared, &run, &stop).await {
        None => Ran::Stopped(None),
        Some(Ok(plugin)) => execute_plugin(shared, run, meta, started, stop, plugin).await,
        Some(Err(failure)) => {
            Ran::Ended(outcome(shared, meta, started, Ended { failure: Some(failure), ..Ended::default() }))
        }
    }
}

/// The plugin `run` runs: the version of its handler it names, or the plugins directory's
/// (loaded now if need be); None when told to stop first.
async fn plugin_of(shared: &Shared, run: &ClaimedRun, stop: &Notify) -> Option<Result<Arc<Plugin>, Failure>> {
    if let Some(digest) = run.digest.as_deref() {
        let load = super::deploys::plugin_of(shared.store.as_ref(), &shared.catalog, &run.handler, digest);
        return unless_stopped(stop, load).await;
    }
    let plugin = match shared.catalog.get(&run.handler) {
        Some(p) => Ok(p),
        None => {
            let catalog = shared.catalog.clone();
            let name = run.handler.clone();
            let load = tokio::task::spawn_blocking(move || catalog.get_or_load(&name));
            match unless_stopped(stop, load).await? {
                Ok(r) => r,
                Err(e) => Err(Error::Engine(format!("plugin loader panicked: {e}"))),
            }
        }
    };
    Some(plugin.map_err(|e| match e {
        Error::UnknownHandler { .. } | Error::HandlerName(_) | Error::PluginsDir { .. } => {
            Failure::handler_not_found(&run.handler)
        }
        e => Failure::handler_broken(&run.handler, &e.to_string()),
    }))
}

/// Run `plugin` for `run`.
async fn execute_plugin(
    shared: &Shared,
    run: ClaimedRun,
    meta: RunMeta,
    started: Instant,
    stop: Arc<Notify>,
    plugin: Arc<Plugin>,
) -> Ran {
    let (run_id, fuel_key) = (meta.run_id, meta.fuel_key.clone());
    let ended = |ended: Ended| Ran::Ended(outcome(shared, meta, started, ended));
    // Hold this run's memory limit from the worker's budget while it runs (a limit over the
    // whole budget takes all of it: that run runs alone).
    let want = u32::try_from(plugin.limits.memory_bytes.div_ceil(1 << 20)).unwrap_or(u32::MAX);
    let memory = shared.memory.clone().acquire_many_owned(want.clamp(1, shared.memory_budget_mib.max(1)));
    let Some(_memory) = unless_stopped(&stop, memory).await else {
        return Ran::Stopped(None);
    };
    let time_left = (run.timeout_on - shared.clock.now()).to_std().unwrap_or(Duration::ZERO);
    let input = RunInput {
        task_id: run.task_id,
        run_id: run.run_id,
        attempt: run.attempt,
        handler: run.handler,
        data: run.data,
        queued_by: run.queued_by,
        queueing: crate::sandbox::children::Queueing {
            parent: run.task_id,
            depth: run.depth,
            max_depth: shared.catalog.policy().max_depth,
            max_data_bytes: shared.catalog.policy().max_data_bytes,
        },
    };
    let (dependencies, signals) = readers(shared, run.task_id);
    let progress = Some(shared.progress_tx.clone());
    let control = RunControl { progress, time_left: Some(time_left), stop: Some(stop), dependencies, signals };
    let r = shared.catalog.sandbox().run(&plugin.pre, plugin.limits, &plugin.grants, input, control).await;
    let fuel = Some(i64::try_from(r.fuel_used).unwrap_or(i64::MAX));
    let (failure, results, snooze, wait) = match r.outcome {
        GuestOutcome::Success(results) => (None, results, None, None),
        GuestOutcome::Failed(f) => (Some(f), None, None, None),
        GuestOutcome::Snoozed(after) => (None, None, Some(after), None),
        GuestOutcome::Awaiting(wait) => (None, None, Some(wait.timeout), Some(wait)),
        GuestOutcome::Stopped => {
            let digest = Some(plugin.digest.clone());
            let kept =
                StoppedRun { run_id, component_digest: digest, fuel_used: fuel, logs: r.report.logs(), fuel_key };
            return Ran::Stopped(Some(kept));
        }
    };
    let (digest, children, signals) = (Some(plugin.digest.clone()), r.children, r.signals);
    ended(Ended { failure, results, snooze, wait, children, signals, digest, fuel, report: r.report })
}

/// What a run of `task` reads from the database when it asks: the tasks it runs after
/// (`dependencies`) and the signals it waits for (`await-signal`); none without a store.
fn readers(
    shared: &Shared,
    task: TaskId,
) -> (Option<crate::sandbox::dependencies::DependencyReader>, Option<crate::sandbox::signals::SignalReader>) {
    let Some(store) = shared.store.clone() else {
        return (None, None);
    };
    let dependencies = {
        let store = store.clone();
        crate::sandbox::dependencies::DependencyReader::new(move |max_bytes| {
            let store = store.clone();
            Box::pin(async move { store.dependency_results(task, max_bytes).await.map_err(|e| e.to_string()) })
        })
    };
    let clock = shared.clock.clone();
    let signals = crate::sandbox::signals::SignalReader::new(move |name| {
        let (store, clock) = (store.clone(), clock.clone());
        Box::pin(async move {
            let lookup = store.signal_lookup(task, &name).await.map_err(|e| e.to_string())?;
            // Timed out by the database's clock, as every worker reads it.
            Ok(lookup.found(&name, clock.now()))
        })
    });
    (Some(dependencies), Some(signals))
}

/// The outcome to write: success, a snooze until its time (by the database's clock; a wait for
/// a signal is a snooze until its timeout), or the failure with its next step decided. A snooze
/// past `[tasks] max_snoozes` is a failure.
fn outcome(shared: &Shared, meta: RunMeta, started: Instant, mut ended: Ended) -> RunOutcome {
    let now = shared.clock.now();
    let max_snoozes = shared.catalog.policy().max_snoozes;
    if ended.snooze.is_some() && meta.snoozes >= max_snoozes {
        let message = format!("the task snoozed {} times, the most [tasks] max_snoozes allows", meta.snoozes);
        ended.failure = Some(Failure::too_many_snoozes(message));
    }
    let mut good_end = children_due(ended.children, now);
    good_end.signals = ended.signals;
    let end = match (ended.failure, ended.snooze) {
        (None, None) => RunEnd::Success { results: ended.results, children: good_end },
        (None, Some(after)) => {
            let until = chrono::Duration::from_std(after).ok().and_then(|d| now.checked_add_signed(d)).unwrap_or(now);
            // A wait begun by an earlier run keeps its timeout.
            let until = ended.wait.as_ref().and_then(|w| w.until).unwrap_or(until);
            let awaiting = ended.wait.map(|w| w.name);
            RunEnd::Snoozed {
                until,
                awaiting,
                partial_results: ended.report.partial_results.take(),
                children: good_end,
            }
        }
        (Some(failure), _) => {
            let backoff = shared.backoff.for_task(&meta.backoff);
            let next = retry::decide(
                meta.task_runs_failed + 1,
                meta.max_attempts,
                failure.retryable,
                &backoff,
                now,
                retry::jitter_unit(),
            );
            RunEnd::Failure { failure, partial_results: ended.report.partial_results.take(), next }
        }
    };
    let logs = ended.report.logs();
    RunOutcome {
        run_id: meta.run_id,
        task_id: meta.task_id,
        end,
        percents_completed: ended.report.percent,
        finished_on: now,
        duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
        component_digest: ended.digest,
        fuel_used: ended.fuel,
        logs,
        fuel_key: meta.fuel_key,
        delete_on_success: meta.delete_on_success,
    }
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;
