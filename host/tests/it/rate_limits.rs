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
    let workers: Vec<Killed> = (0..2).map(|_| spawn_worker(&env, &args)).collect();
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
    let workers: Vec<Killed> = (0..2).map(|_| spawn_worker(&env, &args)).collect();
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

/// A queue whose file weighs keys by fuel: a worker's runs charge each key the fuel they burn
/// (counting the words of 200 KB against those of one letter), and a backlog of both keys added
/// at once is then claimed with the heavy key's turns spaced by its fuel, where a queue without
/// the setting takes the keys one for one.
async fn a_key_whose_runs_burn_more_fuel_is_given_fewer_turns_on_a_worker(db: Db) {
    let mut env = Env::on(db, &["word-count"]).await;
    env.set_config("[queues.metered]\nfuel_per_turn = 1000000\n").await;
    let client = &env.app.client;
    let task = counting;
    let drain = |queue: &str| {
        let o = run(&env, &["worker", "--drain", "--concurrency", "1", "--queues", queue]);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    // A run of each key: their averages.
    let ran = client.add_many(vec![task("metered", "heavy"), task("metered", "light")]).await.expect("add");
    let before = ran.iter().map(|a| a.id).max().unwrap_or_default();
    drain("metered");
    for queue in ["metered", "plain"] {
        let batch = (0..20).flat_map(|_| [task(queue, "heavy"), task(queue, "light")]);
        client.add_many(batch.collect()).await.expect("add");
    }
    let listed = stdout(&run(&env, &["queues", "--keys", "--queue", "metered"]));
    let fuel = |key: &str| -> u64 {
        let row = listed.lines().find(|l| l.starts_with(key)).unwrap_or_default();
        row.split_whitespace().last().and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("{key}'s fuel: {listed}"))
    };
    assert!(fuel("heavy") > 20 * fuel("light"), "{listed}");
    drain("metered");
    drain("plain");
    // The order claims take the tasks in, by their turns (a claim of several starts them at one
    // time): the first 20 of each queue, each task run once.
    let mut first = Vec::new();
    for queue in ["metered", "plain"] {
        let filter = TaskFilter { queue: Some(queue.into()), ..TaskFilter::default() };
        let mut tasks: Vec<_> =
            client.list(&filter).await.expect("list").into_iter().filter(|t| t.id > before).collect();
        assert!(tasks.iter().all(|t| t.last_status == RunStatus::Success), "{queue} drained");
        tasks.sort_by_key(|t| (t.scheduled_on, t.id));
        first.push(tasks.iter().take(20).filter(|t| t.key.as_deref() == Some("heavy")).count());
    }
    // Weighed: heavy's turns are spaced by its fuel over light's, a turn of its own first.
    assert!(first[0] <= 2, "heavy took {} of metered's first 20 turns", first[0]);
    assert!((9..=11).contains(&first[1]), "heavy took {} of plain's first 20 turns", first[1]);
}

/// A backlog of two keys queued at once, before any run of theirs has ended, in a queue weighed
/// by fuel: a turn a task each at first; once the first runs end, the worker's overseer lays the
/// heavy key's due tasks' turns again by its fuel, so the light key's tasks start first, where
/// turns a task would alternate the two to the end.
async fn a_backlog_queued_before_any_run_ended_is_weighed_by_fuel_on_a_worker(db: Db) {
    let mut env = Env::on(db, &["word-count"]).await;
    // Paced to 50 starts a second, so that the first runs end, and the overseer's pass comes,
    // long before the backlog is through.
    let file = "[queues.metered]\nfuel_per_turn = 1000000\nrate_limit = \"50/1s\"\n\n[overseer.key_fuel]\ninterval = \"10ms\"\n";
    env.set_config(file).await;
    let backlog = (0..60).flat_map(|_| [counting("metered", "heavy"), counting("metered", "light")]);
    env.app.client.add_many(backlog.collect()).await.expect("add");
    let o = run(&env, &["worker", "--drain", "--concurrency", "1", "--queues", "metered", "--log", "info"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut first_starts = Vec::new();
    for t in env.app.client.list(&TaskFilter::default()).await.expect("list") {
        assert_eq!(t.last_status, RunStatus::Success, "each ran");
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        let start = runs.iter().filter_map(|r| r.started_on).min().expect("a start");
        first_starts.push((start, t.id, t.key.unwrap_or_default()));
    }
    first_starts.sort();
    let heavy = first_starts.iter().take(60).filter(|(_, _, k)| k == "heavy").count();
    // Turns a task would give heavy 30 of the first 60 starts; laid by fuel (about a hundred
    // times light's), only those claimed before its first runs ended and the re-lay.
    let lines = stderr(&o);
    let order: String = first_starts.iter().map(|(_, _, k)| if k == "heavy" { 'H' } else { 'l' }).collect();
    assert!(heavy <= 12, "heavy took {heavy} of the first 60 starts ({order}): {lines}");
    assert!(lines.contains("service=\"key-fuel\""), "the overseer's pass is logged: {lines}");
}

/// A task of `key` counting words in `queue`: the words of 200 KB for the key "heavy", of one
/// letter for any other.
fn counting(queue: &str, key: &str) -> NewTask {
    let data = match key {
        "heavy" => format!("{{\"text\": \"{}\"}}", "lorem ipsum dolor sit amet\\n".repeat(8_000)),
        _ => r#"{"text": "a"}"#.to_string(),
    };
    NewTask::new("word-count", data).with_queue(queue).with_key(key)
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
    a_rate_per_key_paces_each_key_apart_on_worker_processes,
    a_key_whose_runs_burn_more_fuel_is_given_fewer_turns_on_a_worker,
    a_backlog_queued_before_any_run_ended_is_weighed_by_fuel_on_a_worker
);
