//! The queue's promises on SQLite, PostgreSQL and MariaDB: one active run per task (a run is
//! stopped at its run timeout by its own worker, and at once when it was ended elsewhere or
//! cancelled), an
//! outcome the database refuses never wedges a worker, a claim whose answer was lost is put
//! back, and the same length and size limits everywhere.

use crate::common;

use std::time::{Duration, Instant};

use common::{drain_config, wait_until, Env};
use taskhost::model::{BackoffSettings, NewTask, RunStatus};
use taskhost::runner::{WorkerConfig, WorkerReport};

/// A worker running in this process until [`InProcess::stop`].
struct InProcess {
    stop: tokio::sync::oneshot::Sender<()>,
    worker: tokio::task::JoinHandle<taskhost::Result<WorkerReport>>,
}

impl InProcess {
    fn start(env: &Env, cfg: WorkerConfig) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker = tokio::spawn(env.app.worker(cfg).run(async move {
            let _ = stopped.await;
        }));
        InProcess { stop, worker }
    }

    /// Ask it to stop, and wait a minute at most (`what` says what that proves) for its report.
    async fn stop(self, what: &str) -> WorkerReport {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(60), self.worker).await.expect(what).expect("join").expect("worker")
    }
}

/// Runs of `spin` last until stopped: fuel far beyond the deadline, a deadline far beyond the tests.
const LONG_SPIN: &str = "[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"1h\"\n";

async fn a_run_is_stopped_at_its_run_timeout_by_its_own_worker(mut env: Env) {
    env.set_config(LONG_SPIN).await;
    let quick = BackoffSettings { base_ms: Some(1), max_ms: Some(1) };
    let task = NewTask::new("spin", "{}").with_run_timeout(Duration::from_secs(2)).with_max_attempts(2);
    let id = env.app.client.add(task.with_backoff(quick)).await.expect("add").id;
    let started = Instant::now();
    env.drain(WorkerConfig { drain_horizon: Duration::from_secs(5), ..drain_config() }).await;
    assert!(started.elapsed() < Duration::from_secs(60), "stopped long before the handler's deadline");
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!(runs.len(), 2, "a retry after each timeout, up to max retries");
    for r in &runs {
        eprintln!("a run with a 2 s run timeout was stopped after {:?} ms", r.duration_ms);
        assert_eq!((r.status, r.error_code.as_deref()), (RunStatus::Timeout, Some("run-timeout")), "{r:?}");
        // Its time as a person writes it ("1s 988ms"), not to the nanosecond.
        let message = r.error_message.as_deref().unwrap_or("");
        let said = message.split_once('(').and_then(|(_, t)| t.split_once(')')).map(|(t, _)| t).unwrap_or("?");
        assert!(!said.is_empty() && said.chars().all(|c| "0123456789hms ".contains(c)), "{message}");
        // The timeout counts from the claim (`started_on`); the guest's time from after it committed.
        let (start, end) = (r.started_on.expect("started"), r.finished_on.expect("finished"));
        assert!(end - start >= chrono::Duration::milliseconds(1_990), "{r:?}");
    }
    assert!(runs[1].started_on >= runs[0].finished_on, "runs of one task never overlap: {runs:?}");
    assert!(task.gave_up_on.is_some());
}

async fn a_run_ended_elsewhere_is_stopped_at_once(mut env: Env) {
    env.set_config(LONG_SPIN).await;
    let id = env.app.client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    let cfg = WorkerConfig {
        drain: false,
        heartbeat_interval: Duration::from_millis(100),
        shutdown_grace: Duration::from_secs(600),
        ..drain_config()
    };
    let worker = InProcess::start(&env, cfg);
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(30), "the run started", || async {
        store.runs_of(id).await.expect("runs").first().is_some_and(|r| r.status == RunStatus::Running)
    })
    .await;
    // What an overseer does to a run it judges overdue.
    let far = chrono::Utc::now() + chrono::Duration::days(365);
    assert_eq!(store.time_out_overdue_runs(far, chrono::Utc::now(), 10).await.expect("time out"), 1);
    let ended = Instant::now();
    // Running in the store from the claim's commit on: the guest may not have started yet, and a
    // worker stopping then hands the run back unstarted (nothing to stop, counted nowhere). The
    // worker saves the fuel of the guest it stopped on the run's row.
    wait_until(Duration::from_secs(10), "the worker stopped the run ended elsewhere", || async {
        store.runs_of(id).await.expect("runs").first().is_some_and(|r| r.fuel_used.is_some())
    })
    .await;
    // The grace period is ten minutes: the worker stops this quickly only if the run is gone.
    let report = worker.stop("the worker stopped without waiting for the run").await;
    assert_eq!((report.runs_ended_elsewhere, report.runs_abandoned), (1, 0), "{report:?}");
    eprintln!("a run ended elsewhere was stopped and its worker stopped {:?} later", ended.elapsed());
}

async fn a_cancelled_run_is_stopped_within_a_second_and_never_retried(mut env: Env) {
    env.set_config(LONG_SPIN).await;
    let client = &env.app.client;
    let id = client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    // One slot: the next task runs only once the cancelled guest has stopped.
    let cfg = WorkerConfig { drain: false, concurrency: 1, shutdown_grace: Duration::from_secs(600), ..drain_config() };
    let worker = InProcess::start(&env, cfg);
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(30), "the run started", || async {
        store.runs_of(id).await.expect("runs").first().is_some_and(|r| r.status == RunStatus::Running)
    })
    .await;
    let next = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let cancelled = Instant::now();
    assert_eq!(client.cancel(&[id]).await.expect("cancel"), vec![id]);
    wait_until(Duration::from_secs(10), "the next task ran in the freed slot", || async {
        store.get_task(next).await.expect("get").map(|t| t.last_status) == Some(RunStatus::Success)
    })
    .await;
    eprintln!("a cancelled run freed its slot for the next task within {:?}", cancelled.elapsed());
    let report = worker.stop("the worker stopped without waiting for the cancelled run").await;
    assert_eq!((report.runs_ended_elsewhere, report.runs_finished, report.runs_abandoned), (1, 1, 0), "{report:?}");
    let (task, runs) = client.show(id).await.expect("show");
    assert_eq!((task.last_status, runs.len(), runs[0].status), (RunStatus::Cancelled, 1, RunStatus::Cancelled));
    // What the guest logged and the fuel it burned up to the stop are kept.
    let logs = runs[0].logs.as_deref().unwrap_or("");
    assert!(logs.contains("spinning, attempt 1"), "{:?}", runs[0]);
    assert!(runs[0].fuel_used.is_some_and(|f| f > 1_000_000), "{:?}", runs[0]);
    assert!(runs[0].component_digest.is_some(), "{:?}", runs[0]);
}

async fn poison_outcomes_never_wedge_the_worker(env: Env) {
    let mut poison = Vec::new();
    for data in [
        serde_json::json!({"nul": true}),
        serde_json::json!({"code_bytes": 300, "message_bytes": 70_000}),
        serde_json::json!({"log": "a\u{0}b", "code": "x\u{0}y", "message": "m\u{0}"}),
        serde_json::json!({"log_bytes": 70_000, "code": "after-a-long-line"}),
    ] {
        let t = NewTask::new("flood", data.to_string()).with_max_attempts(1);
        poison.push(env.app.client.add(t).await.expect("add").id);
    }
    let good: Vec<_> = (0..20).map(|i| NewTask::new("echo", format!(r#"{{"i": {i}}}"#))).collect::<Vec<_>>();
    let good: Vec<i64> = env.app.client.add_many(good).await.expect("add").iter().map(|a| a.id).collect();
    let report = env.drain(WorkerConfig { concurrency: 8, ..drain_config() }).await;
    assert_eq!(report.runs_finished, 24, "{report:?}");
    for id in good {
        assert_eq!(env.app.client.show(id).await.expect("show").0.last_status, RunStatus::Success);
    }
    for id in poison {
        let (task, runs) = env.app.client.show(id).await.expect("show");
        assert!(task.gave_up_on.is_some(), "{runs:?}");
        let run = &runs[0];
        assert!(run.error_code.as_deref().is_some_and(|c| c.len() <= 128 && !c.contains('\0')), "{run:?}");
        assert!(run.error_message.as_deref().is_some_and(|m| m.len() <= 8 << 10 && !m.contains('\0')));
        assert!(!run.logs.as_deref().unwrap_or("").contains('\0'));
    }
}

async fn large_results_are_written_in_batches_the_server_takes(env: Env) {
    // 48 results of ~1 MB finishing together: 48 MB in all, three times MariaDB's default packet.
    let blob = "x".repeat(1_000_000);
    let mut ids = Vec::new();
    for i in 0..48 {
        let t = NewTask::new("echo", format!(r#"{{"i": {i}, "blob": "{blob}"}}"#));
        ids.push(env.app.client.add(t).await.expect("add").id);
    }
    let report = env.drain(WorkerConfig { concurrency: 32, ..drain_config() }).await;
    assert_eq!((report.runs_finished, report.outcomes_rejected), (48, 0), "{report:?}");
    for id in ids {
        let (task, runs) = env.app.client.show(id).await.expect("show");
        assert_eq!(task.last_status, RunStatus::Success);
        assert!(runs[0].results.as_deref().is_some_and(|r| r.len() > 1_000_000));
    }
}

async fn names_and_keys_have_one_maximum_length_everywhere(env: Env) {
    let long = "k".repeat(256);
    let err = env.app.client.add(NewTask::new("echo", "{}").with_unique_key(&long)).await.expect_err("too long");
    assert!(err.to_string().contains("unique_key") && err.to_string().contains("maximum of 255"), "{err}");
    let err = env.app.client.add(NewTask::new("echo", "{}").with_queue("q".repeat(129))).await.expect_err("long");
    assert!(err.to_string().contains("queue"), "{err}");
    let err = env.app.client.add(NewTask::new("echo", "{}").with_queued_by("a\0b")).await.expect_err("NUL");
    assert!(err.to_string().contains("NUL"), "{err}");
    let at_max = env.app.client.add(NewTask::new("echo", "{}").with_unique_key("k".repeat(255))).await.expect("fits");
    assert!(at_max.created);
    let again = env.app.client.add(NewTask::new("echo", "{}").with_unique_key("k".repeat(255))).await.expect("dup");
    assert_eq!((again.id, again.created), (at_max.id, false), "the full key is kept and matched");
}

async fn task_data_has_one_limit_checked_before_the_database(env: Env) {
    // 40 MiB: over the default limit of 1 MiB. The same line on every database (MariaDB, whose
    // packet is 16 MiB, used to reset the connection three times over), and nothing queued.
    let big = format!("\"{}\"", "x".repeat(40 << 20));
    let err = env.app.client.add(NewTask::new("echo", big.clone())).await.expect_err("over the limit");
    let said = err.to_string();
    assert!(said.contains("task data") && said.contains("over the limit of 1048576 bytes"), "{said}");
    assert!(said.contains("[tasks] max_data_bytes") && !said.contains('\n'), "{said}");
    let batch = vec![NewTask::new("echo", "{}"), NewTask::new("echo", big)];
    env.app.client.add_many(batch).await.expect_err("a batch with one over the limit");
    assert!(env.app.client.list(&Default::default()).await.expect("list").is_empty(), "nothing was queued");

    // Twenty at the limit in one call: 20 MiB, written in statements the server takes.
    let at_limit = format!(r#"{{"blob": "{}"}}"#, "x".repeat((1 << 20) - 12));
    assert_eq!(at_limit.len(), 1 << 20);
    let added = env.app.client.add_many(vec![NewTask::new("echo", &at_limit); 20]).await.expect("at the limit");
    for a in [added[0], added[19]] {
        assert_eq!(env.app.client.show(a.id).await.expect("show").0.data, at_limit);
    }

    // The operator may raise it; a server that cannot take it is refused when the store opens,
    // with what to set, rather than at the first large task.
    let path = env.dir.path().join("operator.toml");
    std::fs::write(&path, "[tasks]\nmax_data_bytes = 33554432\n").expect("write config");
    let mut config = common::app_config(&env.db_url, &env.plugins);
    config.policy = taskhost::config::Policy::load(&path).expect("valid configuration");
    let packet_limited = env.db_url.starts_with("mysql");
    match taskhost::App::open(&config).await {
        Err(e) if packet_limited => {
            let said = e.to_string();
            assert!(said.contains("max_allowed_packet") && said.contains("set max_allowed_packet = 33M"), "{said}");
        }
        Ok(app) if !packet_limited => {
            let data = format!("\"{}\"", "y".repeat((32 << 20) - 2));
            let id = app.client.add(NewTask::new("echo", &data)).await.expect("32 MiB when allowed").id;
            assert_eq!(app.client.show(id).await.expect("show").0.data.len(), 32 << 20);
        }
        Err(e) => panic!("opening with a 32 MiB limit: {e}"),
        Ok(_) => panic!("a server whose packet is under 33 MiB was accepted"),
    }
}

async fn tasks_of_a_handler_no_worker_serves_wait_then_are_given_up(env: Env) {
    use taskhost::overseer::unserved::{Config, Unserved};
    use taskhost::overseer::Service;
    env.copy_plugin("echo", "ghost");
    let ghost = env.app.client.add(NewTask::new("ghost", "{}")).await.expect("add").id;
    let echo = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    env.remove_plugin("ghost");
    // A worker deployed without `ghost`: it runs `echo` and leaves `ghost` queued.
    let app = env.second_app().await;
    common::drain_app(&app, drain_config()).await;
    assert_eq!(env.app.client.show(echo).await.expect("show").0.last_status, RunStatus::Success);
    assert_eq!(env.app.client.show(ghost).await.expect("show").0.last_status, RunStatus::Scheduled);

    let store = env.app.store.clone();
    let t0 = chrono::Utc::now();
    let minutes = |m| t0 + chrono::Duration::minutes(m);
    let runner = store.register_runner(1, "elsewhere", t0, 8).await.expect("register");
    let echo_digest = app.catalog.get("echo").expect("loaded").digest.clone();
    let served = taskhost::store::Served::from([("echo".to_string(), echo_digest.clone())]);
    store.set_runner_handlers(runner, &served).await.expect("handlers");
    let listed = store.live_runners().await.expect("runners");
    assert_eq!(listed.iter().find(|r| r.id == runner).and_then(|r| r.handlers.clone()), Some(served));
    let silent = store.register_runner(2, "elsewhere", t0, 8).await.expect("register");
    let svc = Unserved::new(store.clone(), Config::default());
    assert_eq!(svc.run_once(minutes(11)).await.expect("run").tasks_given_up, 0, "a runner has not said");
    store.finish_runner(silent, taskhost::RunnerStatus::Success, t0).await.expect("finish");
    assert_eq!(svc.run_once(minutes(5)).await.expect("run").tasks_given_up, 0, "within the horizon");
    // A worker that served `ghost` until a minute ago (stopped for an upgrade, say) still counts.
    let restarting = store.register_runner(3, "elsewhere", minutes(10), 8).await.expect("register");
    let ghostly = taskhost::store::Served::from([("ghost".to_string(), echo_digest.clone())]);
    store.set_runner_handlers(restarting, &ghostly).await.expect("handlers");
    store.finish_runner(restarting, taskhost::RunnerStatus::Success, minutes(10)).await.expect("finish");
    assert_eq!(svc.run_once(minutes(11)).await.expect("run").tasks_given_up, 0, "served within the horizon");
    assert_eq!(svc.run_once(minutes(21)).await.expect("run").tasks_given_up, 1);
    let (task, runs) = env.app.client.show(ghost).await.expect("show");
    assert!(task.gave_up_on.is_some());
    assert_eq!((runs[0].status, runs[0].error_code.as_deref()), (RunStatus::Error, Some("handler-not-found")));
    assert_eq!(env.app.client.show(echo).await.expect("show").0.last_status, RunStatus::Success);
}

/// Another session holds the task table locked while a run's outcome is due: the writer waits
/// (a lock is never taken for a refusal), and past its limit the worker stops heartbeating so
/// that another overseer times it out and the task runs again. Nothing is lost or rejected.
/// (On SQLite a write lock blocks the heartbeat itself, so only the server databases apply.)
async fn a_writer_stuck_on_a_lock_stops_heartbeating_and_loses_nothing<C>(mut env: Env, lock: &str, unlock: &str)
where
    C: sqlx::Connection,
    for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
{
    use sqlx::Executor;
    // The deadline leaves time to take the lock once the run is seen running (a new connection).
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"3s\"\n").await;
    let id = env.app.client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    let cfg = WorkerConfig {
        drain: false,
        concurrency: 1,
        heartbeat_interval: Duration::from_millis(100),
        writer_stuck_limit: Duration::from_secs(1),
        write_timeout: Duration::from_millis(300),
        shutdown_grace: Duration::from_millis(500),
        ..drain_config()
    };
    let worker = InProcess::start(&env, cfg);
    // Watched through a pool of its own: the worker's connections wait on the lock.
    let watcher = env.second_app().await;
    let store = watcher.store.clone();
    wait_until(Duration::from_secs(30), "the run started", || async {
        store.runs_of(id).await.expect("runs").first().is_some_and(|r| r.status == RunStatus::Running)
    })
    .await;
    let mut locker = C::connect(&env.db_url).await.expect("connect");
    for statement in lock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("lock");
    }
    let runner = store.runs_of(id).await.expect("runs")[0].runner_id.expect("runner");
    // The run ends after its 3 s deadline; its outcome cannot be written; 1 s later the
    // heartbeat (every 100 ms until then) stops.
    wait_until(Duration::from_secs(60), "the heartbeat stopped", || async {
        let live = store.live_runners().await.expect("runners");
        let beat = live.iter().find(|r| r.id == runner).expect("still live").heartbeat_on;
        chrono::Utc::now() - beat > chrono::Duration::seconds(3)
    })
    .await;
    let report = worker.stop("the worker stopped").await;
    assert_eq!((report.outcomes_rejected, report.runs_abandoned), (0, 1), "{report:?}");
    for statement in unlock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("unlock");
    }
    // What another worker's overseer does to a runner whose heartbeat stopped.
    use taskhost::overseer::liveness::{Config, Liveness};
    use taskhost::overseer::Service;
    let overseer =
        Liveness::new(store.clone(), Config { heartbeat_horizon: Duration::from_secs(1), ..Config::default() });
    overseer.run_once(chrono::Utc::now()).await.expect("liveness");
    let (task, runs) = watcher.client.show(id).await.expect("show");
    assert_eq!((runs[0].status, runs[0].error_code.as_deref()), (RunStatus::Timeout, Some("runner-lost")));
    assert!(task.gave_up_on.is_none(), "the task runs again: {task:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_stuck_on_a_lock_stops_heartbeating_and_loses_nothing_on_postgres() {
    let env = Env::postgres(&["spin"]).await;
    let lock = "BEGIN; LOCK TABLE task_queue IN SHARE ROW EXCLUSIVE MODE";
    a_writer_stuck_on_a_lock_stops_heartbeating_and_loses_nothing::<sqlx::PgConnection>(env, lock, "COMMIT").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_stuck_on_a_lock_stops_heartbeating_and_loses_nothing_on_mysql() {
    let env = Env::mysql(&["spin"]).await;
    let (lock, unlock) = ("LOCK TABLES task_queue READ", "UNLOCK TABLES");
    a_writer_stuck_on_a_lock_stops_heartbeating_and_loses_nothing::<sqlx::MySqlConnection>(env, lock, unlock).await;
}

/// A claim that committed but whose answer never reached its worker (the connection dropped
/// between the two) leaves a run `running` on a live runner that nothing runs: the test claims
/// on the worker's behalf, from a queue it does not serve. Its run watch puts the run back,
/// uncounted; then it runs once.
async fn a_claim_whose_answer_was_lost_is_put_back_uncounted(env: Env) {
    // Of the default queue only: the task in another queue is claimed for it below, by hand.
    let cfg = WorkerConfig {
        drain: false,
        run_check_interval: Duration::from_millis(100),
        queues: vec!["default".into()],
        ..drain_config()
    };
    let worker = InProcess::start(&env, cfg);
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(30), "the worker registers", || async {
        !store.live_runners().await.expect("runners").is_empty()
    })
    .await;
    let runner = store.live_runners().await.expect("runners")[0].id;
    let id =
        env.app.client.add(NewTask::new("echo", r#"{"name": "lost"}"#).with_queue("elsewhere")).await.expect("add").id;
    let queues = ["elsewhere".to_string()];
    let req = taskhost::store::ClaimRequest {
        runner,
        queues: &queues,
        handlers: None,
        limit: 1,
        now: env.app.clock.now(),
        default_timeout: Duration::from_secs(3600),
        limits: None,
        paced_by_server: false,
    };
    assert_eq!(store.claim_for(&req).await.expect("claim").len(), 1, "claimed on the worker's behalf");
    wait_until(Duration::from_secs(30), "the task is back in the queue, its run gone", || async {
        let (task, runs) = env.app.client.show(id).await.expect("show");
        task.last_status == RunStatus::Scheduled && runs.is_empty()
    })
    .await;
    worker.stop("the worker stops").await;
    let cfg = WorkerConfig { queues: queues.to_vec(), ..drain_config() };
    env.drain(cfg).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.task_runs_failed, runs.len(), runs[0].status), (0, 1, RunStatus::Success), "{runs:?}");
}

macro_rules! on_every_database {
    ($name:ident, $plugins:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_sqlite() {
                super::$name(Env::new(&$plugins).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_postgres() {
                super::$name(Env::postgres(&$plugins).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_mysql() {
                super::$name(Env::mysql(&$plugins).await).await;
            }
        }
    };
}

on_every_database!(a_run_is_stopped_at_its_run_timeout_by_its_own_worker, ["spin"]);
on_every_database!(a_run_ended_elsewhere_is_stopped_at_once, ["spin"]);
on_every_database!(a_cancelled_run_is_stopped_within_a_second_and_never_retried, ["spin", "echo"]);
on_every_database!(poison_outcomes_never_wedge_the_worker, ["flood", "echo"]);
on_every_database!(large_results_are_written_in_batches_the_server_takes, ["echo"]);
on_every_database!(names_and_keys_have_one_maximum_length_everywhere, ["echo"]);
on_every_database!(tasks_of_a_handler_no_worker_serves_wait_then_are_given_up, ["echo"]);
on_every_database!(task_data_has_one_limit_checked_before_the_database, ["echo"]);
on_every_database!(a_claim_whose_answer_was_lost_is_put_back_uncounted, ["echo"]);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_values_the_server_would_refuse_does_not_open_on_mysql() {
    let env = Env::mysql(&["flood"]).await;
    // Results larger than MariaDB's packet limit (16 MiB by default), allowed by the operator:
    // once every such outcome was refused when written; now the store says so when it opens.
    let path = env.dir.path().join("operator.toml");
    std::fs::write(&path, "[handlers.flood.limits]\nmax_results_bytes = 33554432\n").expect("write config");
    let mut config = common::app_config(&env.db_url, &env.plugins);
    config.policy = taskhost::config::Policy::load(&path).expect("valid configuration");
    let Err(refused) = taskhost::App::open_with_clock(&config, env.clock.clone()).await else {
        panic!("a host that writes values the server refuses opened")
    };
    let line = refused.to_string();
    assert!(!line.contains('\n') && line.contains("set max_allowed_packet = 34M or more"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_add_maps_runs_to_tasks_whatever_the_auto_increment_step_on_mysql() {
    use sqlx::Connection;
    let env = Env::mysql(&["echo"]).await;
    let mut conn = sqlx::MySqlConnection::connect(&env.db_url).await.expect("connect");
    sqlx::query("SET SESSION auto_increment_increment = 2").execute(&mut conn).await.expect("set");
    let tasks: Vec<_> = (0..10).map(|i| NewTask::new("echo", format!(r#"{{"i":{i}}}"#))).collect();
    env.app.client.validate(&tasks).await.expect("valid");
    let now = chrono::Utc::now();
    let added = taskhost::store::mysql::MySqlStore::add_tasks_in(&mut conn, &tasks, now).await.expect("add");
    let ids: Vec<i64> = added.iter().map(|a| a.id).collect();
    assert!(ids.windows(2).all(|w| w[1] - w[0] == 2), "{ids:?}");
    env.drain(drain_config()).await;
    for (i, id) in ids.iter().enumerate() {
        let (task, runs) = env.app.client.show(*id).await.expect("show");
        assert_eq!((task.last_status, runs.len()), (RunStatus::Success, 1));
        assert_eq!(runs[0].results.as_deref(), Some(format!(r#"{{"i":{i}}}"#).as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_unique_key_is_an_error_not_a_silent_cut_on_mysql() {
    use sqlx::Connection;
    let env = Env::mysql(&["echo"]).await;
    let mut conn = sqlx::MySqlConnection::connect(&env.db_url).await.expect("connect");
    // Past the client's checks, straight to the store: the database must refuse, not truncate.
    let task = NewTask::new("echo", "{}").with_unique_key("k".repeat(300));
    let now = chrono::Utc::now();
    let err = taskhost::store::mysql::MySqlStore::add_tasks_in(&mut conn, &[task], now).await.expect_err("refused");
    assert!(err.to_string().contains("too long") || err.to_string().contains("Data"), "{err}");
}
