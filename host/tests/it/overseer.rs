//! Maintenance services on each database, each driven by `run_once(now)` on a manual clock,
//! and the overseer running inside a worker.

use crate::common;

use std::time::Duration;

use common::{drain_config, Db, Env};
use taskhost::clock::Clock;
use taskhost::model::{NewTask, RunStatus, RunnerStatus, TaskFilter};
use taskhost::overseer::{
    key_turns, liveness, retries, rotation, run_timeout, stats_compaction, unserved, versions, OverseerConfig, Service,
    Summary,
};
use taskhost::retry::Backoff;
use taskhost::runner::WorkerConfig;

const DAY: Duration = Duration::from_secs(86_400);

fn no_jitter() -> retries::Config {
    retries::Config { backoff: Backoff { jitter: 0.0, ..Backoff::default() }, ..Default::default() }
}

fn this_host() -> String {
    liveness::local_identity()
}

/// A PID that belonged to a process that has exited.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

async fn a_runner_with_a_stale_heartbeat_is_timed_out_and_its_task_retried(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    // A runner on another machine claims the run, then goes silent.
    let ghost = store.register_runner(1, "another-machine", clock.now(), 8).await.expect("register");
    store.claim(ghost, &["default".into()], 1, clock.now(), DAY).await.expect("claim");
    let svc = liveness::Liveness::new(store.clone(), liveness::Config::default());
    clock.advance(chrono::Duration::seconds(29));
    assert!(svc.run_once(clock.now()).await.expect("liveness").runners_timed_out.is_empty(), "not stale yet");
    clock.advance(chrono::Duration::seconds(2));
    let report = svc.run_once(clock.now()).await.expect("liveness");
    assert_eq!(report, liveness::Report { runners_timed_out: vec![ghost], runs_timed_out: 1, orphans_timed_out: 0 });
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Timeout, 1));
    assert_eq!(runs[0].status, RunStatus::Timeout);

    let retries = retries::Retries::new(store.clone(), no_jitter());
    assert_eq!(retries.run_once(clock.now()).await.expect("retries").retries_scheduled, 1);
    assert_eq!(retries.run_once(clock.now()).await.expect("retries"), retries::Report::default(), "idempotent");
    clock.advance(chrono::Duration::seconds(1));
    env.drain(drain_config()).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, runs.len()), (RunStatus::Success, 2));
    assert_eq!(runs[1].attempt, 2);
}

async fn a_runner_whose_process_is_gone_from_this_host_is_timed_out_at_once(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    env.app.client.add(NewTask::new("echo", "{}")).await.expect("add");
    let gone = store.register_runner(dead_pid(), &this_host(), clock.now(), 8).await.expect("register");
    let alive = store.register_runner(std::process::id(), &this_host(), clock.now(), 8).await.expect("register");
    store.claim(gone, &["default".into()], 1, clock.now(), DAY).await.expect("claim");
    let svc = liveness::Liveness::new(store.clone(), liveness::Config::default());
    let report = svc.run_once(clock.now()).await.expect("liveness");
    assert_eq!(report.runners_timed_out, vec![gone]);
    assert_eq!(report.runs_timed_out, 1);
    let live: Vec<_> = store.live_runners().await.expect("live").iter().map(|r| r.id).collect();
    assert_eq!(live, vec![alive]);
}

async fn a_run_left_running_under_a_runner_no_longer_running_is_timed_out_and_retried(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let gone = store.register_runner(1, "another-machine", clock.now(), 8).await.expect("register");
    let claimed = store.claim(gone, &["default".into()], 1, clock.now(), DAY).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    // Its runner ended without its run (as a crash between the two would leave it): no live
    // runner holds the run, so no time-out of runners would ever reach it.
    store.finish_runner(gone, RunnerStatus::Success, clock.now()).await.expect("finish");
    let svc = liveness::Liveness::new(store.clone(), liveness::Config::default());
    let report = svc.run_once(clock.now()).await.expect("liveness");
    assert_eq!(report, liveness::Report { orphans_timed_out: 1, ..Default::default() });
    assert_eq!(svc.run_once(clock.now()).await.expect("liveness"), liveness::Report::default(), "once");
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Timeout, 1));
    assert_eq!(runs[0].error_code.as_deref(), Some("runner-lost"));
    retries::Retries::new(store.clone(), no_jitter()).run_once(clock.now()).await.expect("retries");
    clock.advance(chrono::Duration::seconds(1));
    env.drain(drain_config()).await;
    assert_eq!(env.app.client.show(id).await.expect("show").0.last_status, RunStatus::Success);
}

async fn a_runner_of_the_same_host_name_in_another_pid_namespace_is_not_judged_by_its_pid(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    // Another container with this host name: its PIDs are not ours to check, however dead they look here.
    let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
    let elsewhere = format!("{host} boot:00000000 pidns:1");
    let theirs = store.register_runner(dead_pid(), &elsewhere, clock.now(), 8).await.expect("register");
    let svc = liveness::Liveness::new(store.clone(), liveness::Config::default());
    assert!(svc.run_once(clock.now()).await.expect("liveness").runners_timed_out.is_empty());
    // Its heartbeat still decides.
    clock.advance(chrono::Duration::from_std(liveness::Config::DEFAULT_HEARTBEAT_HORIZON).expect("horizon") * 2);
    assert_eq!(svc.run_once(clock.now()).await.expect("liveness").runners_timed_out, vec![theirs]);
}

async fn a_run_past_its_run_timeout_is_timed_out_and_retried(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    let id =
        env.app.client.add(NewTask::new("echo", "{}").with_run_timeout(Duration::from_secs(10))).await.expect("add").id;
    let runner = store.register_runner(std::process::id(), &this_host(), clock.now(), 8).await.expect("register");
    store.claim(runner, &["default".into()], 1, clock.now(), DAY).await.expect("claim");
    let svc = run_timeout::RunTimeout::new(store.clone(), run_timeout::Config::default());
    // Its worker stops it at 10 s; the overseer leaves the worker a margin before it steps in.
    let margin = chrono::Duration::from_std(run_timeout::Config::DEFAULT_MARGIN).expect("margin");
    clock.advance(chrono::Duration::seconds(10) + margin - chrono::Duration::seconds(1));
    assert_eq!(svc.run_once(clock.now()).await.expect("timeouts").runs_timed_out, 0);
    clock.advance(chrono::Duration::seconds(1));
    assert_eq!(svc.run_once(clock.now()).await.expect("timeouts").runs_timed_out, 1);
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!(task.last_status, RunStatus::Timeout);
    assert_eq!(runs[0].error_code.as_deref(), Some("run-timeout"));
    retries::Retries::new(store.clone(), no_jitter()).run_once(clock.now()).await.expect("retries");
    clock.advance(chrono::Duration::seconds(1));
    env.drain(drain_config()).await;
    assert_eq!(env.app.client.show(id).await.expect("show").0.last_status, RunStatus::Success);
}

/// A pass takes at most `MAX_BATCHES_A_PASS` full batches, so a flood cannot hold up the other
/// services (they run one at a time); the rest is the next pass's.
async fn a_pass_takes_at_most_its_batches_and_leaves_the_rest_to_the_next(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    let most = taskhost::overseer::MAX_BATCHES_A_PASS as usize;
    let tasks: Vec<_> =
        (0..most + 20).map(|_| NewTask::new("echo", "{}").with_run_timeout(Duration::from_secs(10))).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let runner = store.register_runner(std::process::id(), &this_host(), clock.now(), 8).await.expect("register");
    let claimed = store.claim(runner, &["default".into()], 1_000, clock.now(), DAY).await.expect("claim");
    assert_eq!(claimed.len(), most + 20);
    let margin = chrono::Duration::from_std(run_timeout::Config::DEFAULT_MARGIN).expect("margin");
    clock.advance(chrono::Duration::seconds(11) + margin);
    let svc = run_timeout::RunTimeout::new(store.clone(), run_timeout::Config { batch: 1, ..Default::default() });
    assert_eq!(svc.run_once(clock.now()).await.expect("pass").runs_timed_out, most as u64);
    assert_eq!(svc.run_once(clock.now()).await.expect("pass").runs_timed_out, 20, "the rest, at the next pass");
}

async fn timeouts_past_max_attempts_make_a_dead_letter(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    let id = env.app.client.add(NewTask::new("echo", "{}").with_max_attempts(1)).await.expect("add").id;
    let ghost = store.register_runner(1, "another-machine", clock.now(), 8).await.expect("register");
    store.claim(ghost, &["default".into()], 1, clock.now(), DAY).await.expect("claim");
    store.time_out_runners(&[ghost], clock.now()).await.expect("timeout");
    let r = retries::Retries::new(store.clone(), no_jitter()).run_once(clock.now()).await.expect("retries");
    assert_eq!(r, retries::Report { retries_scheduled: 0, given_up: 1 });
    let dead = env.app.client.list(&TaskFilter { dead: true, ..Default::default() }).await.expect("list");
    assert_eq!(dead.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
}

async fn rotation_deletes_old_successful_tasks_and_keeps_the_rest(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo", "fail"]).await;
    let tasks: Vec<_> = (0..25).map(|_| NewTask::new("echo", "{}")).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let failed = env.app.client.add(NewTask::new("fail", r#"{"retryable": false}"#)).await.expect("add").id;
    env.drain(drain_config()).await;
    clock.advance(chrono::Duration::days(10));
    let fresh = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    env.drain(drain_config()).await;
    let svc = rotation::Rotation::new(
        env.app.store.clone(),
        rotation::Config { batch: 10, max_batches: 2, ..Default::default() },
    );
    clock.advance(chrono::Duration::days(25));
    assert_eq!(svc.run_once(clock.now()).await.expect("rotate").tasks_deleted, 20, "two batches per run");
    assert_eq!(svc.run_once(clock.now()).await.expect("rotate").tasks_deleted, 5);
    assert_eq!(svc.run_once(clock.now()).await.expect("rotate").tasks_deleted, 0);
    let left: Vec<_> = env.app.client.list(&TaskFilter::default()).await.expect("list").iter().map(|t| t.id).collect();
    assert_eq!(left, vec![failed, fresh], "the dead letter and the 25-day-old success stay");
}

async fn statistics_older_than_two_hours_are_merged_into_hours_and_read_the_same(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    for _ in 0..3 {
        env.app.client.add(NewTask::new("echo", "{}")).await.expect("add");
        env.drain(drain_config()).await;
        clock.advance(chrono::Duration::minutes(7));
    }
    let svc = stats_compaction::StatsCompaction::new(env.app.store.clone(), Default::default());
    let report = svc.run_once(clock.now()).await.expect("compact");
    assert_eq!(report.rows_merged, 0, "the last two hours stay by minute");
    let before = env.app.client.stats(None, None).await.expect("stats");
    assert_eq!(before[0].runs.succeeded, 3);
    clock.advance(chrono::Duration::hours(3));
    let now_before = env.app.client.stats(None, None).await.expect("stats");
    let report = svc.run_once(clock.now()).await.expect("compact");
    assert!(report.rows_merged >= 3, "one row a minute and runner at least: {report:?}");
    assert_eq!(svc.run_once(clock.now()).await.expect("compact").rows_merged, 0);
    let after = env.app.client.stats(None, None).await.expect("stats");
    assert_eq!(format!("{after:?}"), format!("{now_before:?}"), "the statistics read the same");
}

/// Keys' turns idle for more than a day are deleted, in batches; a key active since, or with a
/// task still waiting (its turn a day back all the same), keeps its row, and a key that comes
/// back starts at its queue's head, as a new one.
async fn idle_keys_turns_are_deleted_in_batches_and_active_keys_keep_theirs(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    for key in ["a", "b", "c"] {
        env.app.client.add(NewTask::new("echo", "{}").with_key(key)).await.expect("add");
    }
    env.drain(drain_config()).await;
    let waiting = NewTask::new("echo", "{}").with_key("d").with_queue("nobody");
    let waiting = env.app.client.add(waiting).await.expect("a task no worker takes").id;
    let svc = key_turns::KeyTurns::new(env.app.store.clone(), key_turns::Config { batch: 2, ..Default::default() });
    assert_eq!(svc.run_once(clock.now()).await.expect("prune").rows_deleted, 0, "turns of now stay");
    clock.advance(chrono::Duration::hours(25));
    env.app.client.add(NewTask::new("echo", "{}").with_key("b")).await.expect("b comes back");
    let report = svc.run_once(clock.now()).await.expect("prune");
    assert_eq!((report.rows_deleted, report.batches), (2, 2), "a's and c's, a full batch then none: {report:?}");
    assert_eq!(report.summary().as_deref(), Some("deleted 2 idle key's turns"));
    assert_eq!(svc.run_once(clock.now()).await.expect("prune").rows_deleted, 0, "b's turn is new, d waits");
    // d's task still waits, a day on: its next task is queued behind it.
    let next = env.app.client.add(NewTask::new("echo", "{}").with_key("d").with_queue("nobody")).await.expect("add");
    let (first, _) = env.app.client.show(waiting).await.expect("show");
    let (next, _) = env.app.client.show(next.id).await.expect("show");
    assert!(next.scheduled_on > first.scheduled_on, "d's turns go on from its row: {first:?} {next:?}");
    let a = env.app.client.add(NewTask::new("echo", "{}").with_key("a")).await.expect("a comes back").id;
    let (task, _) = env.app.client.show(a).await.expect("show");
    assert_eq!(task.scheduled_on, clock.now(), "at the head (b's task, due now), as a new key");
}

/// Deployed versions superseded longer ago than the retention are deleted, in batches, with their
/// components; the active version stays however old it is.
async fn deployed_versions_go_after_the_retention_and_the_active_one_stays(db: Db) {
    let (env, clock) = Env::manual_on(db, &[]).await;
    for file in ["echo", "noop", "probe"] {
        let component = env.app.catalog.check_to_deploy("greet", &common::component(file), false).expect("checked");
        env.app.client.deploy(&component, "ops").await.expect("deploy");
        clock.advance(chrono::Duration::days(1));
    }
    let config = versions::Config { batch: 1, retention: Duration::from_secs(10 * 86_400), ..Default::default() };
    let svc = versions::Versions::new(env.app.store.clone(), config);
    assert_eq!(svc.run_once(clock.now()).await.expect("retire").versions, 0, "superseded within the retention");
    clock.advance(chrono::Duration::days(11));
    let report = svc.run_once(clock.now()).await.expect("retire");
    assert_eq!((report.versions, report.components, report.batches), (2, 2, 3), "{report:?}");
    assert!(report.summary().is_some_and(|s| s.starts_with("deleted 2 old versions and 2 components (")), "{report:?}");
    let kept = env.app.client.versions("greet").await.expect("versions");
    assert_eq!((kept.len(), kept[0].active), (1, true), "{kept:?}");
    clock.advance(chrono::Duration::days(400));
    assert_eq!(svc.run_once(clock.now()).await.expect("retire").versions, 0, "the active version stays");
}

async fn a_worker_runs_the_overseer_and_recovers_a_dead_runners_task(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let store = env.app.store.clone();
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let long_ago = env.app.clock.now() - chrono::Duration::minutes(5);
    let ghost = store.register_runner(1, "another-machine", long_ago, 8).await.expect("register");
    let claimed = store.claim(ghost, &["default".into()], 1, env.app.clock.now(), DAY).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    let mut overseer = OverseerConfig::default();
    overseer.liveness.interval = Duration::from_millis(20);
    overseer.retries.interval = Duration::from_millis(20);
    let cfg = WorkerConfig {
        overseer: Some(overseer),
        backoff: Backoff { base: Duration::from_millis(10), max: Duration::from_millis(10), jitter: 0.0 },
        drain_horizon: Duration::from_secs(5),
        ..drain_config()
    };
    let report = env.drain(cfg).await;
    assert_eq!(report.runs_finished, 1);
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, runs.len()), (RunStatus::Success, 2));
    let runners = store.live_runners().await.expect("live");
    assert!(runners.is_empty());
}

async fn one_overseer_at_a_time_holds_the_lease_and_another_takes_over(db: Db) {
    use taskhost::overseer::Overseer;
    let env = Env::on(db, &[]).await;
    let cfg = OverseerConfig { lease_ttl: Duration::from_millis(1_500), ..Default::default() };
    let a = Overseer::new(env.app.store.clone(), env.app.clock.clone(), cfg.clone());
    let b = Overseer::new(env.app.store.clone(), env.app.clock.clone(), cfg);
    let (lead_a, lead_b) = (a.leadership(), b.leadership());
    let (stop_a, rx_a) = tokio::sync::watch::channel(false);
    let (stop_b, rx_b) = tokio::sync::watch::channel(false);
    let run_a = tokio::spawn(a.run_until(rx_a));
    common::wait_until(Duration::from_secs(10), "a holds the lease", || async { lead_a.is_leader() }).await;
    let run_b = tokio::spawn(b.run_until(rx_b));
    // Over two lease periods (b tries three times a period) a keeps renewing and b never leads:
    // every change of hands is counted, so none can fall between two looks.
    let tried = lead_b.tries();
    common::wait_until(Duration::from_secs(30), "b tried the lease over two periods", || async {
        lead_b.tries() >= tried + 6
    })
    .await;
    assert_eq!((lead_a.times_gained(), lead_a.is_leader()), (1, true), "a held the lease throughout");
    assert_eq!(lead_b.times_gained(), 0, "b never led while a renewed");
    stop_a.send(true).expect("stop a");
    run_a.await.expect("a stopped");
    common::wait_until(Duration::from_secs(10), "b takes the lease over", || async { lead_b.is_leader() }).await;
    assert_eq!(lead_b.times_gained(), 1);
    stop_b.send(true).expect("stop b");
    run_b.await.expect("b stopped");
}

/// A stopped overseer hands its lease back: A, a `taskhost overseer` process holding a 30 s
/// lease, gets a SIGTERM; B, waiting for the lease, takes it over within a few seconds, not when
/// A's lease would have lapsed.
async fn an_overseer_stopped_by_a_signal_hands_its_lease_to_a_waiting_one_at_once(db: Db) {
    use common::process::{signal, stderr, wait_exit, Killed};
    use taskhost::overseer::Overseer;
    let mut env = Env::on(db, &[]).await;
    env.set_config("[overseer]\nlease_ttl = \"30s\"\n[overseer.liveness]\ninterval = \"200ms\"\n").await;
    let store = env.app.store.clone();
    // A leads once its liveness pass times out a runner whose process is gone.
    let gone = store.register_runner(dead_pid(), &this_host(), chrono::Utc::now(), 8).await.expect("register");
    let a = Killed(Some(
        common::taskhost_command(&env).arg("overseer").stderr(std::process::Stdio::piped()).spawn().expect("spawn"),
    ));
    common::wait_until(Duration::from_secs(60), "A leads and times out the runner", || async {
        !store.live_runners().await.expect("live").iter().any(|r| r.id == gone)
    })
    .await;
    let cfg = OverseerConfig { lease_ttl: Duration::from_secs(30), ..Default::default() };
    let b = Overseer::new(store.clone(), env.app.clock.clone(), cfg);
    let lead_b = b.leadership();
    let (stop_b, rx_b) = tokio::sync::watch::channel(false);
    let run_b = tokio::spawn(b.run_until(rx_b));
    common::wait_until(Duration::from_secs(30), "B tried the lease twice", || async { lead_b.tries() >= 2 }).await;
    assert!(!lead_b.is_leader(), "A holds the lease");
    let a = a.take();
    signal(&a, "TERM");
    let out = wait_exit(a, Duration::from_secs(30)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    common::wait_until(Duration::from_secs(5), "B takes the lease over", || async { lead_b.is_leader() }).await;
    stop_b.send(true).expect("stop b");
    run_b.await.expect("b stopped");
}

/// A queue whose due tasks no live runner claims from is warned of once they have waited
/// `warn_after`; a runner of every queue silences it. Its tasks are left as they are.
async fn a_queue_no_live_runner_claims_from_is_warned_of_once_its_tasks_have_waited(db: Db) {
    let (env, clock) = Env::manual_on(db, &["echo"]).await;
    let store = env.app.store.clone();
    let id = env.app.client.add(NewTask::new("echo", "{}").with_queue("mail")).await.expect("add").id;
    let runner = store.register_runner(std::process::id(), &this_host(), clock.now(), 8).await.expect("register");
    store.set_runner_queues(runner, &["default".into()]).await.expect("queues");
    let svc = unserved::Unserved::new(store.clone(), unserved::Config::default());
    let wait = chrono::Duration::from_std(unserved::Config::DEFAULT_WARN_AFTER).expect("wait");
    clock.advance(wait - chrono::Duration::seconds(1));
    let early = svc.run_once(clock.now()).await.expect("pass");
    assert!(early.unclaimed_queues.is_empty() && !early.warns(), "not yet: {early:?}");
    clock.advance(chrono::Duration::seconds(1));
    let report = svc.run_once(clock.now()).await.expect("pass");
    assert_eq!(report.unclaimed_queues, [("mail".to_string(), 1)]);
    assert!(report.warns());
    let line = report.summary().unwrap_or_default();
    assert!(line.contains("queue mail has 1 task due and no live worker claims from it"), "{line}");
    store.set_runner_queues(runner, &["*".into()]).await.expect("queues");
    let later = svc.run_once(clock.now()).await.expect("pass");
    assert!(later.unclaimed_queues.is_empty(), "a runner of every queue claims from it: {later:?}");
    assert_eq!(env.app.client.show(id).await.expect("show").0.last_status, RunStatus::Scheduled);
}

on_every_database!(
    a_pass_takes_at_most_its_batches_and_leaves_the_rest_to_the_next,
    a_queue_no_live_runner_claims_from_is_warned_of_once_its_tasks_have_waited,
    an_overseer_stopped_by_a_signal_hands_its_lease_to_a_waiting_one_at_once,
    a_runner_with_a_stale_heartbeat_is_timed_out_and_its_task_retried,
    a_runner_whose_process_is_gone_from_this_host_is_timed_out_at_once,
    a_runner_of_the_same_host_name_in_another_pid_namespace_is_not_judged_by_its_pid,
    a_run_left_running_under_a_runner_no_longer_running_is_timed_out_and_retried,
    a_run_past_its_run_timeout_is_timed_out_and_retried,
    timeouts_past_max_attempts_make_a_dead_letter,
    rotation_deletes_old_successful_tasks_and_keeps_the_rest,
    statistics_older_than_two_hours_are_merged_into_hours_and_read_the_same,
    idle_keys_turns_are_deleted_in_batches_and_active_keys_keep_theirs,
    deployed_versions_go_after_the_retention_and_the_active_one_stays,
    a_worker_runs_the_overseer_and_recovers_a_dead_runners_task,
    one_overseer_at_a_time_holds_the_lease_and_another_takes_over,
);
