//! An idle worker woken, not polled: the same sequence for each way of waking it.

use std::time::Duration;

use taskhost::model::{NewTask, RunStatus};
use taskhost::runner::WorkerConfig;
use taskhost::App;

use super::{drain_config, wait_until, Env};

/// A worker of `env` whose polls are ten minutes apart, running until dropped or stopped.
struct IdleWorker {
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<taskhost::Result<taskhost::runner::WorkerReport>>,
}

impl IdleWorker {
    /// Started with `probe_interval`, once it has found nothing and waits (ten minutes, a
    /// wake-up or a probe).
    async fn start(env: &Env, probe_interval: Duration) -> IdleWorker {
        let ten_minutes = Duration::from_secs(600);
        let cfg = WorkerConfig {
            drain: false,
            poll_interval: ten_minutes,
            notified_poll_interval: ten_minutes,
            probe_interval,
            ..drain_config()
        };
        let worker = env.app.worker(cfg);
        let mut idle = worker.idle_turns();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(worker.run(async move {
            let _ = stopped.await;
        }));
        tokio::time::timeout(Duration::from_secs(60), idle.wait_for(|n| *n >= 1))
            .await
            .expect("the worker went idle in time")
            .expect("the worker is running");
        IdleWorker { stop, handle }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.handle.await.expect("join").expect("worker");
    }
}

/// Wait, a minute at most, until task `id` has run.
async fn runs(env: &Env, id: i64, what: &str) {
    let ran = || {
        let store = env.app.store.clone();
        async move { store.get_task(id).await.expect("get").map(|t| t.last_status) == Some(RunStatus::Success) }
    };
    wait_until(Duration::from_secs(60), what, ran).await;
}

/// With no probe, queue through `queuer` in each way that must wake an idle worker (a task
/// added, a resumed queue's task, a replayed task) and wait for each to run.
pub async fn an_idle_worker_runs_what_is_queued_without_a_poll(env: &Env, queuer: &App) {
    let worker = IdleWorker::start(env, Duration::ZERO).await;
    let client = &queuer.client;
    let id = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    runs(env, id, "the added task ran").await;
    client.pause_queue("default").await.expect("pause");
    let held = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let cancelled = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    client.cancel(&[cancelled]).await.expect("cancel");
    client.resume_queue("default").await.expect("resume");
    runs(env, held, "the resumed queue's task ran").await;
    client.retry(cancelled).await.expect("replay");
    runs(env, cancelled, "the replayed task ran").await;
    worker.stop().await;
}

/// Tasks `other` adds (another process: its adds do not wake this one's workers in-process)
/// are found by the idle worker's probe of the newest task, well before its poll; several
/// times over.
pub async fn an_idle_worker_probes_for_what_another_process_adds(env: &Env, other: &App) {
    let worker = IdleWorker::start(env, WorkerConfig::DEFAULT_PROBE_INTERVAL).await;
    for _ in 0..3 {
        let id = other.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
        runs(env, id, "the task another process added ran").await;
    }
    worker.stop().await;
}

/// A worker whose polls are ten minutes apart, in a queue capped at one run in flight: each run's
/// room is its successor's once the run's outcome is written (the writer says so), not at the
/// next poll. Five tasks run one after another.
pub async fn a_capped_worker_claims_again_once_its_runs_are_written(env: &Env) {
    use taskhost::model::{Limit, LimitScope};
    use taskhost::store::{LimitEdit, LimitSetBy};
    let one = Limit { max_running: Some(1), ..Limit::default() };
    let (store, at) = (&env.app.store, chrono::Utc::now());
    store.set_limit(LimitScope::Queue, "default", LimitEdit::Set(one), LimitSetBy::Operator, at).await.expect("cap");
    let worker = IdleWorker::start(env, Duration::ZERO).await;
    let tasks: Vec<NewTask> = (0..5).map(|_| NewTask::new("echo", "{}")).collect();
    let ids: Vec<i64> = env.app.client.add_many(tasks).await.expect("add").iter().map(|a| a.id).collect();
    for id in ids {
        runs(env, id, "each task ran, one after another, without a poll").await;
    }
    worker.stop().await;
}
