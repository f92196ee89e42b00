//! End to end (on SQLite, and the tests on a manual clock on every database): tasks queued, claimed
//! by a worker, run in the sandbox, written back.

use crate::common;

use common::{drain_config, Db, Env};
use taskhost::clock::Clock;
use taskhost::model::{NewTask, RunStatus, TaskFilter};
use taskhost::runner::{ExitReason, WorkerConfig};
use taskhost::Error;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_a_task_and_stores_its_results() {
    let env = Env::new(&["word-count"]).await;
    let added =
        env.app.client.add(NewTask::new("word-count", r#"{"text": "one two three\nfour"}"#)).await.expect("add");
    let report = env.drain(drain_config()).await;
    assert_eq!(report.exit, ExitReason::Drained);
    assert_eq!(report.runs_finished, 1);
    let (task, runs) = env.app.client.show(added.id).await.expect("show");
    assert_eq!(task.last_status, RunStatus::Success);
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.status, RunStatus::Success);
    assert_eq!(run.percents_completed, 100);
    let results: serde_json::Value = serde_json::from_str(run.results.as_deref().expect("results")).expect("json");
    assert_eq!(results["words"], 4);
    assert_eq!(results["lines"], 2);
    let digest = run.component_digest.as_deref().expect("digest");
    assert_eq!(digest, env.app.catalog.get("word-count").expect("loaded").digest);
    assert!(run.fuel_used.expect("fuel") > 0);
    assert!(run.logs.as_deref().unwrap_or("").contains("[info] counted 4 words in 2 lines"), "{:?}", run.logs);
    assert!(run.runner_id.is_some());
    let runners = env.app.store.live_runners().await.expect("runners");
    assert!(runners.is_empty(), "the worker marked its runner finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_handler_and_invalid_json_are_refused_at_add_time_and_nothing_is_written() {
    let env = Env::new(&["echo"]).await;
    let err = env.app.client.add(NewTask::new("nope", "{}")).await.expect_err("unknown handler");
    assert!(matches!(err, Error::NotDeployed { .. }), "{err}");
    assert!(err.to_string().contains("nope.wasm"), "{err}");
    let err = env.app.client.add(NewTask::new("echo", "{not json")).await.expect_err("invalid json");
    assert!(matches!(err, Error::InvalidJson(_)), "{err}");
    let err = env.app.client.add(NewTask::new("../echo", "{}")).await.expect_err("path as name");
    assert!(err.to_string().contains("handler name"), "{err}");
    let err = env
        .app
        .client
        .add_many(vec![NewTask::new("echo", "{}"), NewTask::new("echo", "[1,")])
        .await
        .expect_err("one bad task spoils the batch");
    assert!(matches!(err, Error::InvalidJson(_)));
    assert!(env.app.client.list(&TaskFilter::default()).await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_wasm_and_a_wrong_world_component_are_refused_with_clear_errors() {
    let env = Env::new(&[]).await;
    env.write_plugin_bytes("garbage", b"this is not wasm");
    env.write_plugin_bytes("truncated", b"\0asm\x0d\0\x01\0\x01\x02");
    env.copy_plugin("wrong-world", "wrong");
    for (name, needle) in
        [("garbage", "not a WebAssembly file"), ("truncated", "invalid component"), ("wrong", "handle")]
    {
        let err = env.app.client.add(NewTask::new(name, "{}")).await.expect_err(name);
        assert!(matches!(err, Error::BrokenHandler { .. }), "{name}: {err}");
        assert!(err.to_string().contains(needle), "{name}: {err}");
    }
    let reports = env.app.catalog.reload();
    assert_eq!(reports.len(), 3);
    assert!(reports.iter().all(|r| r.status.is_err()));
    assert!(env.app.client.list(&TaskFilter::default()).await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_the_handler_leaves_its_task_queued() {
    let env = Env::new(&["echo"]).await;
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    env.remove_plugin("echo");
    // A fresh process whose plugins directory lacks the handler (a bad deploy): it must not
    // turn the task into a dead letter, but leave it to workers that have the handler.
    let app = env.second_app().await;
    let report = common::drain_app(&app, drain_config()).await;
    assert_eq!(report.runs_finished, 0);
    let (task, runs) = app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.gave_up_on), (RunStatus::Scheduled, None));
    assert!(runs.is_empty(), "never claimed, so no run: {runs:?}");
}

async fn a_handler_error_is_retried_with_backoff_until_max_attempts(db: Db) {
    let (env, clock) = Env::manual_on(db, &["fail"]).await;
    let id = env.app.client.add(NewTask::new("fail", "{}").with_max_attempts(3)).await.expect("add").id;
    let mut cfg = drain_config();
    cfg.backoff.jitter = 0.0;
    env.drain(cfg.clone()).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.task_runs_failed, runs.len()), (RunStatus::Scheduled, 1, 1));
    assert_eq!(runs[0].error_code.as_deref(), Some("demo-failure"));
    assert_eq!(task.scheduled_on, clock.now() + chrono::Duration::seconds(1), "first retry after 1 s");
    // Not due yet: a drain does nothing.
    assert_eq!(env.drain(cfg.clone()).await.runs_finished, 0);
    clock.advance(chrono::Duration::seconds(1));
    env.drain(cfg.clone()).await;
    let (task, _) = env.app.client.show(id).await.expect("show");
    assert_eq!(task.task_runs_failed, 2);
    assert_eq!(task.scheduled_on, clock.now() + chrono::Duration::seconds(2), "then after 2 s");
    clock.advance(chrono::Duration::seconds(2));
    env.drain(cfg.clone()).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.task_runs_failed, runs.len()), (RunStatus::Error, 3, 3));
    assert!(task.gave_up_on.is_some());
    assert_eq!(runs.iter().map(|r| r.attempt).collect::<Vec<_>>(), vec![1, 2, 3]);
    clock.advance(chrono::Duration::hours(1));
    assert_eq!(env.drain(cfg).await.runs_finished, 0, "no run after max retries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_retryable_handler_error_stops_at_once() {
    let env = Env::new(&["fail"]).await;
    let id = env.app.client.add(NewTask::new("fail", r#"{"retryable": false}"#)).await.expect("add").id;
    env.drain(drain_config()).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, runs.len()), (RunStatus::Error, 1));
    assert!(task.gave_up_on.is_some());
}

async fn a_task_that_succeeds_on_a_later_attempt_resets_its_failure_count(db: Db) {
    let (env, clock) = Env::manual_on(db, &["fail-until"]).await;
    let id = env.app.client.add(NewTask::new("fail-until", r#"{"succeed_on_attempt": 3}"#)).await.expect("add").id;
    let mut cfg = drain_config();
    cfg.backoff.jitter = 0.0;
    for _ in 0..3 {
        env.drain(cfg.clone()).await;
        clock.advance(chrono::Duration::seconds(10));
    }
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Success, 0));
    assert_eq!(
        runs.iter().map(|r| r.status).collect::<Vec<_>>(),
        vec![RunStatus::Error, RunStatus::Error, RunStatus::Success]
    );
    assert_eq!(runs[2].results.as_deref(), Some(r#"{"attempt":3}"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_is_listed_with_its_error_and_can_be_replayed() {
    let env = Env::new(&["fail-until"]).await;
    let id = env
        .app
        .client
        .add(NewTask::new("fail-until", r#"{"succeed_on_attempt": 2}"#).with_max_attempts(1))
        .await
        .expect("add")
        .id;
    env.drain(drain_config()).await;
    let dead = env.app.client.list(&TaskFilter { dead: true, ..Default::default() }).await.expect("list");
    assert_eq!(dead.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
    let (_, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!(runs[0].error_code.as_deref(), Some("not-yet"));
    env.app.client.retry(id).await.expect("replay");
    env.drain(drain_config()).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, runs.len()), (RunStatus::Success, 2));
    assert!(env.app.client.list(&TaskFilter { dead: true, ..Default::default() }).await.expect("list").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_partial_results_reach_the_run_row() {
    let env = Env::new(&["trap", "echo"]).await;
    // The trap handler reports 50% and then traps: the progress stays on the failed run.
    let trap = env.app.client.add(NewTask::new("trap", "{}").with_max_attempts(1)).await.expect("add").id;
    let echo = env
        .app
        .client
        .add(NewTask::new("echo", r#"{"progress": [10, 60], "partial": {"half": true}, "x": 1}"#))
        .await
        .expect("add")
        .id;
    env.drain(drain_config()).await;
    let (_, runs) = env.app.client.show(trap).await.expect("show");
    assert_eq!(runs[0].status, RunStatus::Error);
    assert_eq!(runs[0].error_code.as_deref(), Some("trap"));
    assert_eq!(runs[0].percents_completed, 50);
    let (_, runs) = env.app.client.show(echo).await.expect("show");
    assert_eq!(runs[0].status, RunStatus::Success);
    let results: serde_json::Value = serde_json::from_str(runs[0].results.as_deref().expect("results")).expect("json");
    assert_eq!(results["x"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_one_database_never_run_the_same_run() {
    let env = Env::new(&["echo"]).await;
    let other = env.second_app().await;
    // Both workers run (not drain) and serve `echo` before the tasks exist, so each is claiming
    // when they come: a worker still loading its plugins while the other drained all of them
    // left it nothing to take.
    let cfg = WorkerConfig { concurrency: 8, claim_batch: 16, drain: false, ..drain_config() };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let run = |app: &taskhost::App| {
        let (worker, mut stopped) = (app.worker(cfg.clone()), stopped.clone());
        tokio::spawn(worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        }))
    };
    let (a, b) = (run(&env.app), run(&other));
    let store = env.app.store.clone();
    common::wait_until(std::time::Duration::from_secs(60), "both runners serve echo", || async {
        let runners = store.live_runners().await.expect("runners");
        runners.iter().filter(|r| r.handlers.as_ref().is_some_and(|h| h.contains_key("echo"))).count() == 2
    })
    .await;
    let tasks: Vec<_> =
        (0..1500).map(|i| NewTask::new("echo", format!(r#"{{"attempt_echo": true, "i": {i}}}"#))).collect();
    env.app.client.add_many(tasks).await.expect("add");
    common::wait_until(std::time::Duration::from_secs(120), "the 1,500 tasks succeeded", || async {
        store.counts().await.expect("counts").success == 1500
    })
    .await;
    stop.send_replace(true);
    let (a, b) = (a.await.expect("join").expect("worker a"), b.await.expect("join").expect("worker b"));
    assert_eq!(a.runs_finished + b.runs_finished, 1500);
    // They take turns at SQLite's lock (`store/sqlite/turn.rs`): one writing back to back once
    // starved the other, which ran none of them.
    assert!(
        a.runs_finished >= 150 && b.runs_finished >= 150,
        "both workers took a fair part: {} / {}",
        a.runs_finished,
        b.runs_finished
    );
    let tasks = env.app.client.list(&TaskFilter { limit: Some(10_000), ..Default::default() }).await.expect("list");
    assert_eq!(tasks.len(), 1500);
    for t in tasks {
        assert_eq!(t.last_status, RunStatus::Success);
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        assert_eq!(runs.len(), 1, "task {} has exactly one run", t.id);
        let echoed: serde_json::Value =
            serde_json::from_str(runs[0].results.as_deref().expect("results")).expect("json");
        assert_eq!(echoed["run_id"], runs[0].id, "the handler saw its own run");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_respect_queues_and_priority() {
    let env = Env::new(&["echo"]).await;
    let low = env.app.client.add(NewTask::new("echo", "{}").with_priority(10)).await.expect("add").id;
    let high = env.app.client.add(NewTask::new("echo", "{}").with_priority(-10)).await.expect("add").id;
    let mail = env.app.client.add(NewTask::new("echo", "{}").with_queue("mail")).await.expect("add").id;
    env.drain(WorkerConfig { concurrency: 1, queues: vec!["default".into()], ..drain_config() }).await;
    let run_of = |id| {
        let store = env.app.store.clone();
        async move { store.runs_of(id).await.expect("runs").first().cloned() }
    };
    let (l, h, m) = (run_of(low).await.expect("ran"), run_of(high).await.expect("ran"), run_of(mail).await);
    assert!(m.is_none(), "the mail queue was not asked for: {m:?}");
    // One at a time (concurrency 1), on the real clock: the higher priority started strictly first.
    assert!(
        h.started_on.expect("started") < l.started_on.expect("started"),
        "the higher priority ran first: {h:?} {l:?}"
    );
    env.drain(WorkerConfig { queues: vec!["mail".into()], ..drain_config() }).await;
    assert_eq!(run_of(mail).await.expect("ran").status, RunStatus::Success);
}

async fn a_scheduled_task_waits_for_its_time(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let at = clock.now() + chrono::Duration::minutes(5);
    let id = env.app.client.add(NewTask::new("echo", "{}").with_scheduled_on(at)).await.expect("add").id;
    assert_eq!(env.drain(drain_config()).await.runs_finished, 0);
    clock.advance(chrono::Duration::minutes(5));
    assert_eq!(env.drain(drain_config()).await.runs_finished, 1);
    assert_eq!(env.app.client.show(id).await.expect("show").0.last_status, RunStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_limit_stops_an_extra_worker() {
    let env = Env::new(&["echo"]).await;
    let mut cfg = drain_config();
    cfg.runner_limit = 1;
    env.app.store.register_runner(1, "elsewhere", env.app.clock.now(), 10).await.expect("another runner");
    let err = env.app.worker(cfg).run(std::future::pending()).await.expect_err("limit reached");
    assert!(matches!(err, Error::RunnerLimit { live: 1, limit: 1 }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_key_deduplicates_unfinished_tasks() {
    let env = Env::new(&["echo"]).await;
    let a = env.app.client.add(NewTask::new("echo", "{}").with_unique_key("user-7")).await.expect("add");
    let b = env.app.client.add(NewTask::new("echo", "{}").with_unique_key("user-7")).await.expect("add");
    assert!(a.created && !b.created);
    assert_eq!(a.id, b.id);
    env.drain(drain_config()).await;
    let c = env.app.client.add(NewTask::new("echo", "{}").with_unique_key("user-7")).await.expect("add");
    assert!(c.created, "finished tasks free their key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_partial_results_are_visible_while_the_run_is_running() {
    let mut env = Env::new(&["echo"]).await;
    env.set_config("[handlers.echo.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"20s\"\n").await;
    let id = env
        .app
        .client
        .add(
            NewTask::new("echo", r#"{"progress": [30, 60], "partial": {"rows": 10}, "spin_after": true}"#)
                .with_max_attempts(1),
        )
        .await
        .expect("add")
        .id;
    let cfg = WorkerConfig { shutdown_grace: std::time::Duration::from_secs(2), ..drain_config() };
    let worker = env.app.worker(cfg);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run(async move {
        let _ = stop_rx.await;
    }));
    let store = env.app.store.clone();
    common::wait_until(std::time::Duration::from_secs(15), "progress reaches the run row", || {
        let store = store.clone();
        async move {
            let runs = store.runs_of(id).await.expect("runs");
            runs.first().is_some_and(|r| {
                r.status == RunStatus::Running
                    && r.percents_completed == 60
                    && r.results.as_deref() == Some(r#"{"rows":10}"#)
            })
        }
    })
    .await;
    let _ = stop_tx.send(());
    let report = handle.await.expect("join").expect("worker");
    assert_eq!(report.runs_abandoned, 1, "the spinning run is cut off after the grace period");
    let runs = env.app.store.runs_of(id).await.expect("runs");
    assert_eq!(runs[0].status, RunStatus::Timeout);
    assert_eq!(runs[0].percents_completed, 60, "progress stays on the run");
    // Said as what happened: the worker stopped past its grace, not only a runner gone silent.
    let said = runs[0].error_message.as_deref().unwrap_or_default();
    assert!(said.contains("shutdown grace period over"), "{said}");
}

/// Concurrency caps the guests running at once, not the runs a claim takes: with one slot and
/// short runs, claims take runs ahead of the slot (all of a claim's runs share its start time),
/// and every run still runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slot_claims_short_runs_ahead_of_it() {
    let env = Env::new(&["echo"]).await;
    let tasks: Vec<_> = (0..300).map(|i| NewTask::new("echo", format!(r#"{{"i": {i}}}"#))).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let report = env.drain(WorkerConfig { concurrency: 1, ..drain_config() }).await;
    assert_eq!(report.runs_finished, 300);
    let all = TaskFilter { limit: Some(1_000), ..Default::default() };
    let mut per_claim = std::collections::HashMap::new();
    for t in env.app.client.list(&all).await.expect("list") {
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        assert_eq!((runs.len(), runs[0].status), (1, RunStatus::Success), "task {}", t.id);
        *per_claim.entry(runs[0].started_on.expect("started")).or_insert(0) += 1;
    }
    let most = per_claim.values().copied().max().unwrap_or(0);
    assert!(most > 1, "every claim took one run: {} claims for 300 runs", per_claim.len());
    eprintln!("{} claims for 300 runs, at most {most} in one", per_claim.len());
}

/// Runs claimed ahead of a slot do not wait behind a long run that took it: past a moment they
/// go back to the queue, uncounted and in their place, and a worker with a free slot runs them.
/// (Worker a, of one slot, learns that echo runs are short; then one claim takes a run that
/// spins for a minute, first by its priority, and echo runs ahead of the slot it takes; worker b
/// runs them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_claimed_ahead_of_a_long_run_go_back_for_a_free_slot() {
    let mut env = Env::new(&["echo", "spin"]).await;
    // Fuel for a minute of spinning: only its deadline (or the cancel below) ends it.
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"60s\"\n").await;
    let client = &env.app.client;
    let echo = |i: usize| NewTask::new("echo", format!(r#"{{"i": {i}}}"#));
    let echoes = |status| TaskFilter { handler: Some("echo".into()), status, limit: Some(1_000), ..Default::default() };
    let succeeded =
        |n: usize| async move { client.list(&echoes(Some(RunStatus::Success))).await.expect("list").len() == n };
    let one_slot = || WorkerConfig { concurrency: 1, ..drain_config() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let a = env.app.worker(WorkerConfig { drain: false, ..one_slot() });
    let a = tokio::spawn(a.run(async move {
        let _ = stopped.await;
    }));
    client.add_many((0..100).map(echo).collect()).await.expect("add");
    common::wait_until(std::time::Duration::from_secs(60), "a ran the first echo runs", || succeeded(100)).await;
    let spin = NewTask::new("spin", "{}").with_priority(-10).with_run_timeout(std::time::Duration::from_secs(60));
    let spin = client.add_many(std::iter::once(spin).chain((100..300).map(echo)).collect()).await.expect("add")[0].id;
    let running = || async { client.show(spin).await.expect("show").0.last_status == RunStatus::Running };
    common::wait_until(std::time::Duration::from_secs(60), "a runs the long run", running).await;
    let b = tokio::spawn(env.app.worker(one_slot()).run(std::future::pending()));
    // Without the put-back, the runs a claimed with the long one would wait for it (a minute).
    common::wait_until(std::time::Duration::from_secs(30), "every echo run succeeded", || succeeded(300)).await;
    assert!(running().await, "the long run still holds a's slot");
    client.cancel(&[spin]).await.expect("cancel");
    assert_eq!(b.await.expect("join").expect("worker b").exit, ExitReason::Drained);
    let _ = stop.send(());
    a.await.expect("join").expect("worker a");
    for t in client.list(&echoes(None)).await.expect("list") {
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        assert_eq!((runs.len(), runs[0].status), (1, RunStatus::Success), "task {}: put back uncounted", t.id);
    }
    let runs = env.app.store.runs_of(spin).await.expect("runs");
    assert_eq!((runs.len(), runs[0].status), (1, RunStatus::Cancelled));
}

/// A worker of this process starts what this process queues at once, on any database, not at
/// its next poll: tasks added, a resumed queue's, a replayed one. (PostgreSQL's LISTEN would
/// wake it anyway, so SQLite and MariaDB show it.)
async fn an_idle_worker_is_woken_by_what_its_own_process_queues(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    common::wakeups::an_idle_worker_runs_what_is_queued_without_a_poll(&env, &env.app).await;
}

mod woken_by_its_own_process {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_sqlite() {
        super::an_idle_worker_is_woken_by_what_its_own_process_queues(super::Db::Sqlite).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_mysql() {
        super::an_idle_worker_is_woken_by_what_its_own_process_queues(super::Db::MySql).await
    }
}

/// Another process's tasks (another store on the same database) are found by the idle worker's
/// probe of the newest task's id, not its poll. (PostgreSQL's LISTEN wakes it instead.)
async fn an_idle_worker_finds_what_another_process_adds_by_its_probe(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let other = env.second_app().await;
    common::wakeups::an_idle_worker_probes_for_what_another_process_adds(&env, &other).await;
}

mod finds_other_processes_tasks_by_its_probe {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_sqlite() {
        super::an_idle_worker_finds_what_another_process_adds_by_its_probe(super::Db::Sqlite).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_mysql() {
        super::an_idle_worker_finds_what_another_process_adds_by_its_probe(super::Db::MySql).await
    }
}

// On a manual clock, on every database.
on_every_database!(
    a_handler_error_is_retried_with_backoff_until_max_attempts,
    a_task_that_succeeds_on_a_later_attempt_resets_its_failure_count,
    a_scheduled_task_waits_for_its_time,
);
