//! Rate limits across worker processes, of a queue and of each key, and limits changed live with `taskhost limits`, on
//! every database (the claim's part is in the store suite).

use crate::common;

use std::time::Duration;

use common::process::{run, signal, spawn_worker, stderr, stdout, wait_exit, Killed};
use common::{wait_until, Db, Env};
use taskhost::model::{NewTask, RunStatus, TaskFilter};

/// Two worker processes of 16 slots each share a queue the operator's file limits to 5/1s: the
/// first tasks start paced, 5 in a second at most; `taskhost limits set` then raises the rate,
/// and both workers apply it without a restart.
async fn a_rate_limit_paces_worker_processes_and_a_live_change_applies_without_a_restart(db: Db) {
    let mut env = Env::on(db, &["echo"]).await;
    env.set_config("[queues.api]\nrate_limit = \"5/1s\"\n").await;
    let client = &env.app.client;
    let first: Vec<_> = (0..8).map(|_| NewTask::new("echo", "{}").with_queue("api")).collect();
    client.add_many(first).await.expect("add");
    let args = ["--concurrency", "16", "--queues", "api"];
    let workers: Vec<Killed> = (0..2).map(|_| Killed(Some(spawn_worker(&env, &args)))).collect();
    let done = |n: usize| async move {
        let tasks = client.list(&TaskFilter::default()).await.expect("list");
        tasks.iter().filter(|t| t.last_status == RunStatus::Success).count() >= n
    };
    wait_until(Duration::from_secs(60), "the first 8 tasks ran", || done(8)).await;
    let paced = starts(&env).await;
    // A run starts at the database's time its rate counted by (the server's, read under the
    // limit's lock): 5 in a second at most, one every 200 ms. (Whether the workers keep up with
    // the rate is the benchmark's to say: a loaded machine claims later, never sooner.)
    assert!(most_in(&paced, chrono::Duration::seconds(1)) <= 5, "{paced:?}");
    assert!(paced.windows(2).all(|w| w[1] - w[0] >= chrono::Duration::milliseconds(200)), "paced: {paced:?}");

    let o = run(&env, &["limits", "set", "queue:api", "--rate", "100/1s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let changed = env.app.clock.now();
    let more: Vec<_> = (0..40).map(|_| NewTask::new("echo", "{}").with_queue("api")).collect();
    client.add_many(more).await.expect("add");
    wait_until(Duration::from_secs(60), "the 40 more ran", || done(48)).await;
    // Applied without a restart (each claim reads the limit afresh): starts closer than the old
    // pace follow.
    let after: Vec<_> = starts(&env).await.into_iter().filter(|s| *s > changed).collect();
    assert_eq!(after.len(), 40, "{after:?}");
    let quick = after.windows(2).filter(|w| w[1] - w[0] < chrono::Duration::milliseconds(150)).count();
    assert!(quick > 0, "no start closer than the old pace after the change: {after:?}");
    let listed = stdout(&run(&env, &["limits"]));
    let api = listed.lines().find(|l| l.starts_with("queue:api")).unwrap_or_default();
    assert!(api.contains("100/1s") && api.contains("operator"), "{listed}");
    let queues = stdout(&run(&env, &["queues"]));
    assert!(queues.lines().any(|l| l.starts_with("api ") && l.contains("100/1s")), "{queues}");
    for w in workers {
        let child = w.take();
        signal(&child, "TERM");
        let o = wait_exit(child, Duration::from_secs(60)).await;
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// Two worker processes share a queue whose file paces each key to 5/1s: each key's starts are
/// 5 in a second at most, one every 200 ms, the two keys' side by side (the second does not wait
/// for the first's backlog).
async fn a_rate_per_key_paces_each_key_apart_on_worker_processes(db: Db) {
    let mut env = Env::on(db, &["echo"]).await;
    env.set_config("[queues.api]\nrate_limit_per_key = \"5/1s\"\n").await;
    let client = &env.app.client;
    let tasks =
        ["a", "b"].iter().flat_map(|k| (0..8).map(|_| NewTask::new("echo", "{}").with_queue("api").with_key(*k)));
    client.add_many(tasks.collect()).await.expect("add");
    let args = ["--concurrency", "16", "--queues", "api"];
    let workers: Vec<Killed> = (0..2).map(|_| Killed(Some(spawn_worker(&env, &args)))).collect();
    let done = || async move {
        let tasks = client.list(&TaskFilter::default()).await.expect("list");
        tasks.iter().filter(|t| t.last_status == RunStatus::Success).count() >= 16
    };
    wait_until(Duration::from_secs(60), "the 16 tasks ran", done).await;
    let (a, b) = (starts_of(&env, Some("a")).await, starts_of(&env, Some("b")).await);
    for paced in [&a, &b] {
        assert_eq!(paced.len(), 8, "{paced:?}");
        assert!(most_in(paced, chrono::Duration::seconds(1)) <= 5, "{paced:?}");
        assert!(paced.windows(2).all(|w| w[1] - w[0] >= chrono::Duration::milliseconds(200)), "paced: {paced:?}");
    }
    assert!(b[0] < a[7] && a[0] < b[7], "the keys ran side by side: {a:?} {b:?}");
    for w in workers {
        let child = w.take();
        signal(&child, "TERM");
        let o = wait_exit(child, Duration::from_secs(60)).await;
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// Every run's start (the time its rate counted by), in order.
async fn starts(env: &Env) -> Vec<chrono::DateTime<chrono::Utc>> {
    starts_of(env, None).await
}

/// The starts of the runs of `key`'s tasks (None: of every task), in order.
async fn starts_of(env: &Env, key: Option<&str>) -> Vec<chrono::DateTime<chrono::Utc>> {
    let mut all = Vec::new();
    let tasks = env.app.client.list(&TaskFilter::default()).await.expect("list");
    for task in tasks.iter().filter(|t| key.is_none() || t.key.as_deref() == key) {
        let runs = env.app.store.runs_of(task.id).await.expect("runs");
        all.extend(runs.iter().filter_map(|r| r.started_on));
    }
    all.sort();
    all
}

/// The most starts within any window of `width` (from a start on).
fn most_in(starts: &[chrono::DateTime<chrono::Utc>], width: chrono::Duration) -> usize {
    (0..starts.len()).map(|i| starts[i..].iter().take_while(|s| **s < starts[i] + width).count()).max().unwrap_or(0)
}

on_every_database!(
    a_rate_limit_paces_worker_processes_and_a_live_change_applies_without_a_restart,
    a_rate_per_key_paces_each_key_apart_on_worker_processes
);
