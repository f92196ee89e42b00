//! The fence: a worker whose heartbeats do not reach the database stops its guests before any
//! overseer could declare it dead, and puts their runs back once heartbeats are back.

use crate::common;

use std::time::Duration;

use common::locker::Locker;
use common::{drain_config, wait_until, Db, Env};
use taskhost::model::{NewTask, RunStatus};
use taskhost::runner::WorkerConfig;

/// Runs of `spin` last until stopped.
const LONG_SPIN: &str = "[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"1h\"\n";

/// Heartbeats held back by a lock on the runners' table for longer than the fence (1 s here):
/// the worker stops its run and claims nothing; once the lock goes, the run goes back to the
/// queue uncounted and runs again. Held back again, and the worker stopped meanwhile: the run
/// its fence stopped is still claimed, so the worker reports it left running (its runner's
/// time-out ends it and the task runs again), rather than ending as if it had none.
async fn a_run_the_fence_stopped_goes_back_once_heartbeats_are_back(db: Db) {
    let mut env = Env::on(db, &["spin"]).await;
    env.set_config(LONG_SPIN).await;
    let id = env.app.client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    let cfg = WorkerConfig {
        drain: false,
        concurrency: 1,
        heartbeat_interval: Duration::from_millis(100),
        heartbeat_horizon: Duration::from_millis(1_500),
        shutdown_grace: Duration::from_millis(500),
        ..drain_config()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(env.app.worker(cfg).run(async move {
        let _ = stopped.await;
    }));
    // Read through a pool of its own: the worker's connections may wait on the lock.
    let watcher = env.second_app().await;
    let store = watcher.store.clone();
    let running = || async {
        let runs = store.runs_of(id).await.expect("runs");
        let run = runs.iter().find(|r| r.status == RunStatus::Running);
        (runs.len(), run.map(|r| (r.id, r.runner_id.expect("its runner"))))
    };
    wait_until(Duration::from_secs(30), "the run started", || async { running().await.1.is_some() }).await;
    let (_, Some((first, runner))) = running().await else { unreachable!("seen running") };
    let beat_older_than = |secs: i64| {
        let store = store.clone();
        move || {
            let store = store.clone();
            async move {
                let live = store.live_runners().await.expect("runners");
                let beat = live.iter().find(|r| r.id == runner).expect("still live").heartbeat_on;
                chrono::Utc::now() - beat > chrono::Duration::seconds(secs)
            }
        }
    };
    let locker = Locker::lock(db, &env.db_url, "task_runners").await;
    // Three times the fence's 1 s since the last heartbeat: its run was stopped.
    wait_until(Duration::from_secs(30), "the heartbeats stopped", beat_older_than(3)).await;
    locker.unlock().await;
    wait_until(Duration::from_secs(30), "the run went back and runs again", || async {
        matches!(running().await, (1, Some((run, _))) if run != first)
    })
    .await;
    let (task, _) = watcher.client.show(id).await.expect("show");
    assert_eq!(task.task_runs_failed, 0, "put back uncounted: {task:?}");

    let locker = Locker::lock(db, &env.db_url, "task_runners").await;
    wait_until(Duration::from_secs(30), "the heartbeats stopped again", beat_older_than(3)).await;
    let _ = stop.send(());
    let report = tokio::time::timeout(Duration::from_secs(60), worker).await.expect("stops").expect("join");
    let report = report.expect("worker");
    assert_eq!((report.runs_abandoned, report.outcomes_rejected), (1, 0), "{report:?}");
    locker.unlock().await;
    // What another worker's overseer does to a runner whose heartbeat stopped (this one could
    // not mark itself: its last call waited on the lock).
    use taskhost::overseer::liveness::{Config, Liveness};
    use taskhost::overseer::Service;
    let overseer =
        Liveness::new(store.clone(), Config { heartbeat_horizon: Duration::from_secs(1), ..Config::default() });
    // Its heartbeats blocked on the lock may land once it goes (on MariaDB a statement cut off
    // client-side still runs): looked at 5 s on, as an overseer would after the horizon.
    overseer.run_once(chrono::Utc::now() + chrono::Duration::seconds(5)).await.expect("liveness");
    let (task, runs) = watcher.client.show(id).await.expect("show");
    let last = runs.iter().max_by_key(|r| r.id).expect("a run");
    assert_eq!((last.status, last.error_code.as_deref()), (RunStatus::Timeout, Some("runner-lost")), "{runs:?}");
    assert!(task.gave_up_on.is_none(), "the task runs again: {task:?}");
}

on_every_database!(a_run_the_fence_stopped_goes_back_once_heartbeats_are_back);
