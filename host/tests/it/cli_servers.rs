//! Real `taskhost worker` processes against real databases: several processes sharing one queue,
//! a worker killed with SIGKILL mid-run, a worker shedding poison outcomes then stopped by SIGTERM,
//! a drain whose last plugin loads during a claim, a worker stopped while its database does not
//! answer; a worker a failing test started is killed with it.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::locker::Locker;
use common::process::{signal, spawn_worker, stderr, wait_exit};
use common::{wait_until, Db, Env};
use taskhost::model::{NewTask, RunStatus, TaskFilter};

/// 4 worker processes drain 10,000 tasks: every task succeeds with exactly one run.
async fn four_processes_drain_10000_tasks(env: Env) {
    let tasks: Vec<_> = (0..10_000).map(|i| NewTask::new("noop", format!(r#"{{"i": {i}}}"#))).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let workers: Vec<_> =
        (0..4).map(|_| spawn_worker(&env, &["--drain", "--concurrency", "32", "--no-overseer"])).collect();
    let mut finished = 0u64;
    for w in workers {
        let out = wait_exit(w, Duration::from_secs(300)).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let line = stderr(&out);
        let runs: u64 = line
            .split("Drained): ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no run count in {line}"));
        finished += runs;
    }
    assert_eq!(finished, 10_000, "the workers together finished each task once");
    let tasks = env.app.client.list(&TaskFilter { limit: Some(20_000), ..Default::default() }).await.expect("list");
    assert_eq!(tasks.len(), 10_000);
    assert!(tasks.iter().all(|t| t.last_status == RunStatus::Success && t.task_runs_failed == 0));
    let counts = env.app.store.counts().await.expect("counts");
    assert_eq!(counts.success, 10_000);
    // Exactly one run per task: a run claimed twice would have left a second run or a failure.
    for t in tasks.iter().step_by(97) {
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        assert_eq!(runs.len(), 1, "task {}", t.id);
        assert_eq!(runs[0].status, RunStatus::Success);
    }
}

/// SIGKILL a worker mid-run; a new worker's overseer finds it dead and the task runs again.
async fn a_killed_worker_is_recovered(mut env: Env) {
    env.set_config(common::process::KILLED_CONFIG).await;
    let id = env.app.client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    let mut worker = spawn_worker(&env, &[]);
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(30), "the run is running", || async {
        store.runs_of(id).await.expect("runs").last().map(|r| r.status) == Some(RunStatus::Running)
    })
    .await;
    signal(&worker, "KILL");
    worker.wait().expect("reaped");
    env.remove_plugin("spin");
    env.copy_plugin("echo", "spin");
    let out = common::process::run(&env, &["worker", "--drain", "--drain-horizon", "10s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[0].status, runs[0].error_code.as_deref()), (RunStatus::Timeout, Some("runner-lost")));
    assert_eq!(runs[1].status, RunStatus::Success);
    assert!(store.live_runners().await.expect("live").is_empty());
}

/// Handlers that put NUL bytes and over-long strings in every field they control, queued among
/// normal tasks so that they share the outcome writer's batches, through one worker process:
/// every normal task succeeds, every poison run ends with a clear error, the worker stays up, and
/// SIGTERM stops it within its grace period.
async fn a_worker_process_sheds_poison_outcomes_and_stops_on_sigterm(env: Env) {
    let poison_data = [
        serde_json::json!({"nul": true}),
        serde_json::json!({"code_bytes": 300, "message_bytes": 70_000}),
        serde_json::json!({"log": "a\u{0}b", "code": "x\u{0}y", "message": "m\u{0}"}),
        serde_json::json!({"log_bytes": 70_000, "code": "after-a-long-line"}),
        serde_json::json!({"return_bytes": 2_000_000}),
    ];
    let mut tasks = Vec::new();
    for round in 0..4 {
        for data in &poison_data {
            tasks.push(NewTask::new("flood", data.to_string()).with_max_attempts(1));
        }
        tasks.extend((0..20).map(|i| NewTask::new("echo", format!(r#"{{"round": {round}, "i": {i}}}"#))));
    }
    let added = env.app.client.add_many(tasks).await.expect("add");
    let mut worker = spawn_worker(&env, &["--concurrency", "8", "--poll-interval", "20ms", "--shutdown-grace", "3s"]);
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(120), "every task ended", || async {
        let c = store.counts().await.expect("counts");
        c.scheduled + c.running == 0
    })
    .await;
    assert!(worker.try_wait().expect("try_wait").is_none(), "the worker is still up");
    let asked = std::time::Instant::now();
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(3 + 10)).await;
    eprintln!("stopped {:?} after SIGTERM", asked.elapsed());
    assert!(out.status.success(), "{}", stderr(&out));
    for a in added {
        let (task, runs) = env.app.client.show(a.id).await.expect("show");
        let run = &runs[0];
        if task.handler == "echo" {
            assert_eq!((task.last_status, runs.len()), (RunStatus::Success, 1), "{run:?}");
            continue;
        }
        assert!(task.gave_up_on.is_some() && run.status != RunStatus::Success, "{run:?}");
        let code = run.error_code.as_deref().expect("a code");
        assert!(code.len() <= 128 && !code.contains('\0'), "{code:?}");
        let message = run.error_message.as_deref().expect("a message");
        assert!(message.len() <= 8 << 10 && !message.contains('\0'), "{message:?}");
        assert!(!run.logs.as_deref().unwrap_or("").contains('\0'));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_sheds_poison_outcomes_and_stops_on_sigterm_on_sqlite() {
    a_worker_process_sheds_poison_outcomes_and_stops_on_sigterm(Env::new(&["flood", "echo"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_sheds_poison_outcomes_and_stops_on_sigterm_on_postgres() {
    a_worker_process_sheds_poison_outcomes_and_stops_on_sigterm(Env::postgres(&["flood", "echo"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_sheds_poison_outcomes_and_stops_on_sigterm_on_mysql() {
    a_worker_process_sheds_poison_outcomes_and_stops_on_sigterm(Env::mysql(&["flood", "echo"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_worker_processes_drain_10000_tasks_on_postgres() {
    four_processes_drain_10000_tasks(Env::postgres(&["noop"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_worker_processes_drain_10000_tasks_on_mysql() {
    four_processes_drain_10000_tasks(Env::mysql(&["noop"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_recovered_on_postgres() {
    a_killed_worker_is_recovered(Env::postgres(&["spin"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_recovered_on_mysql() {
    a_killed_worker_is_recovered(Env::mysql(&["spin"]).await).await;
}

/// A draining worker whose last plugin finishes loading while a claim is under way: the claim,
/// made for the handlers loaded until then, finds nothing, and the drain still runs the late
/// plugin's tasks before it ends. The claim is held on a lock until the runner reports the plugin
/// loaded. (On SQLite a write lock would hold that report too: only the server databases apply.)
async fn a_drain_runs_the_tasks_of_a_plugin_loaded_during_its_claim<C>(env: Env, lock: &str, unlock: &str)
where
    C: sqlx::Connection,
    for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
{
    use sqlx::Executor;
    let tasks = (0..3).map(|_| NewTask::new("js-words", r#"{"text": "b a b", "top": 1}"#)).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let mut locker = C::connect(&env.db_url).await.expect("connect");
    for statement in lock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("lock");
    }
    // A new cache: `echo` compiles first and lets the claims start, `js-words` (larger) compiles after.
    let cache = tempfile::tempdir().expect("cache dir");
    let worker = common::process::Killed::from(
        common::taskhost_command_caching_in(&env, cache.path())
            .args(["worker", "--drain", "--heartbeat-interval", "50ms", "--poll-interval", "20ms"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker"),
    );
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(300), "the runner reports js-words loaded", || async {
        let runners = store.live_runners().await.expect("runners");
        runners.iter().any(|r| r.handlers.as_ref().is_some_and(|h| h.contains_key("js-words")))
    })
    .await;
    for statement in unlock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("unlock");
    }
    let out = wait_exit(worker, Duration::from_secs(300)).await;
    assert!(out.status.success() && stderr(&out).contains("3 runs finished (3 succeeded"), "{}", stderr(&out));
    assert_eq!(env.app.store.counts().await.expect("counts").success, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_runs_the_tasks_of_a_plugin_loaded_during_its_claim_on_postgres() {
    let env = Env::postgres(&["echo", "js-words"]).await;
    let lock = "BEGIN; LOCK TABLE task_queue IN EXCLUSIVE MODE";
    a_drain_runs_the_tasks_of_a_plugin_loaded_during_its_claim::<sqlx::PgConnection>(env, lock, "COMMIT").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_runs_the_tasks_of_a_plugin_loaded_during_its_claim_on_mysql() {
    let env = Env::mysql(&["echo", "js-words"]).await;
    let (lock, unlock) = ("LOCK TABLES task_queue READ", "UNLOCK TABLES");
    a_drain_runs_the_tasks_of_a_plugin_loaded_during_its_claim::<sqlx::MySqlConnection>(env, lock, unlock).await;
}

/// A worker process asked to stop while its database does not answer (the runners' table held
/// locked: nothing the worker writes at its end gets through) is gone within its grace period
/// all the same, counted from the signal: its run is left to the overseer, its last calls cut
/// off rather than waited for. Once the database answers, the run is still `running`, its
/// runner left for another overseer to find dead.
async fn a_worker_stops_within_its_grace_while_its_database_does_not_answer(db: Db) {
    let mut env = Env::on(db, &["spin"]).await;
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"1h\"\n").await;
    let id = env.app.client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    // The guest's lines are logged at debug: its first one says the run is under way (the task
    // reads `running` from its claim on, while its plugin may still be compiling, and a run that
    // has not started is put back at a signal rather than left running).
    let filter = "warn,taskhost::sandbox::host=debug";
    let mut worker = spawn_worker(&env, &["--shutdown-grace", "2s", "--poll-interval", "20ms", "--log", filter]);
    let err = worker.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let lines = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(err)).map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    let started = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
                Ok(line) if line.contains("guest: spinning") => return Some(rx),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    });
    let Some(_rx) = started.await.expect("join") else {
        let _ = worker.kill();
        panic!("the guest did not run within 60 s");
    };
    let store = env.app.store.clone();
    let locker = Locker::lock(db, &env.db_url, "task_runners").await;
    let asked = std::time::Instant::now();
    signal(&worker, "TERM");
    // The grace, and two seconds for the process to be scheduled and reaped on a loaded machine;
    // before, the last calls waited 5 s each past the grace.
    let out = wait_exit(worker, Duration::from_secs(4)).await;
    eprintln!("stopped {:?} after SIGTERM with the database not answering", asked.elapsed());
    let said = tokio::task::spawn_blocking(move || lines.join().expect("the reader")).await.expect("join");
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 abandoned"), "{said}");
    locker.unlock().await;
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs[0].status, RunStatus::Running, "left for the overseer: {runs:?}");
    let runner = runs[0].runner_id.expect("runner");
    assert!(store.live_runners().await.expect("live").iter().any(|r| r.id == runner), "not marked");
}

crate::on_every_database!(a_worker_stops_within_its_grace_while_its_database_does_not_answer);

/// A worker a test started is killed when the test fails before its end: the panic that unwinds
/// the test drops it, and its process is gone (it had gone on polling the database for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_a_failing_test_started_is_killed_with_it() {
    let env = Env::new(&["echo"]).await;
    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    let pid = worker.id();
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = worker;
        panic!("a failing assertion");
    }));
    assert!(failed.is_err());
    // (Reaped by the drop, so no process of that id is left, not even a zombie.)
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "worker {pid} still runs");
}
