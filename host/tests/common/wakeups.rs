//! An idle worker woken, not polled: the same sequence for each way of waking it.

use std::time::Duration;

use taskhost::model::{NewTask, RunStatus};
use taskhost::runner::WorkerConfig;
use taskhost::App;

use super::{drain_config, wait_until, Env};

/// Start a worker of `env` whose polls are ten minutes apart, wait until it is idle, then queue
/// through `queuer` in each way that must wake it (a task added, a resumed queue's task, a
/// replayed task) and wait, a minute at most, for each to run.
pub async fn an_idle_worker_runs_what_is_queued_without_a_poll(env: &Env, queuer: &App) {
    let ten_minutes = Duration::from_secs(600);
    let cfg = WorkerConfig {
        drain: false,
        poll_interval: ten_minutes,
        notified_poll_interval: ten_minutes,
        ..drain_config()
    };
    let worker = env.app.worker(cfg);
    let mut idle = worker.idle_turns();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    // It found nothing and waits (ten minutes, or a wake-up).
    tokio::time::timeout(Duration::from_secs(60), idle.wait_for(|n| *n >= 1))
        .await
        .expect("the worker went idle in time")
        .expect("the worker is running");
    let ran = |id: i64| {
        let store = env.app.store.clone();
        async move { store.get_task(id).await.expect("get").map(|t| t.last_status) == Some(RunStatus::Success) }
    };
    let client = &queuer.client;
    let id = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    wait_until(Duration::from_secs(60), "the added task ran", || ran(id)).await;
    client.pause_queue("default").await.expect("pause");
    let held = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let cancelled = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    client.cancel(&[cancelled]).await.expect("cancel");
    client.resume_queue("default").await.expect("resume");
    wait_until(Duration::from_secs(60), "the resumed queue's task ran", || ran(held)).await;
    client.retry(cancelled).await.expect("replay");
    wait_until(Duration::from_secs(60), "the replayed task ran", || ran(cancelled)).await;
    let _ = stop.send(());
    handle.await.expect("join").expect("worker");
}
