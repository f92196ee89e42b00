//! Real `taskhost worker` processes against real PostgreSQL and MariaDB servers: several
//! processes sharing one queue, and a worker killed with SIGKILL mid-run.

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{wait_until, Env};
use taskhost::model::{NewTask, RunStatus, TaskFilter};

fn taskhost(env: &Env) -> Command {
    let mut c = common::taskhost_command(env);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn wait_exit(mut child: Child, within: Duration) -> Output {
    let start = std::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        tick.tick().await;
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        assert!(start.elapsed() < within, "the worker did not exit within {within:?}");
    }
}

/// 4 worker processes drain 10,000 tasks: every task succeeds with exactly one run.
async fn four_processes_drain_10000_tasks(env: Env) {
    let tasks: Vec<_> = (0..10_000).map(|i| NewTask::new("noop", format!(r#"{{"i": {i}}}"#))).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let workers: Vec<Child> = (0..4)
        .map(|_| {
            taskhost(&env)
                .args(["worker", "--drain", "--concurrency", "32", "--no-overseer"])
                .spawn()
                .expect("spawn worker")
        })
        .collect();
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
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"60s\"\n").await;
    let id = env.app.client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    let mut worker = taskhost(&env).arg("worker").spawn().expect("spawn");
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(30), "the run is running", || async {
        store.runs_of(id).await.expect("runs").last().map(|r| r.status) == Some(RunStatus::Running)
    })
    .await;
    Command::new("kill").args(["-KILL", &worker.id().to_string()]).status().expect("kill");
    worker.wait().expect("reaped");
    env.remove_plugin("spin");
    env.copy_plugin("echo", "spin");
    let out = taskhost(&env).args(["worker", "--drain", "--drain-horizon", "10s"]).output().expect("second worker");
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[0].status, runs[0].error_code.as_deref()), (RunStatus::Timeout, Some("runner-lost")));
    assert_eq!(runs[1].status, RunStatus::Success);
    assert!(store.live_runners().await.expect("live").is_empty());
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
