//! An operator's first day, without misleading lines: a command that only queues says nothing of
//! granted variables this host does not set (a worker loading the handler does), and a worker
//! pointed at a missing plugins directory fails before it makes a database file, and a task of
//! a plugin that finishes compiling after the worker started is claimed as it is ready, not at
//! the next poll. Real processes on real SQLite files (and PostgreSQL and MariaDB for the last).

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::process::{signal, stderr, wait_exit, Killed};
use common::{taskhost_command, taskhost_command_caching_in, wait_until, Db, Env};
use taskhost::model::{NewTask, RunStatus};

const UNSET: &str = "TASKHOST_TEST_NEVER_SET_ON_ANY_HOST";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_process_that_loads_the_handler_warns_of_a_granted_variable_it_lacks() {
    let mut env = Env::new(&["echo"]).await;
    env.set_config(&format!("[handlers.echo.grants]\nenv = [\"{UNSET}\"]\n")).await;
    let warning = "granted environment variable is not set on this host";
    for args in [&["add", "echo"][..], &["list"], &["queues"]] {
        let o = taskhost_command(&env).env_remove(UNSET).args(args).output().expect("run");
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains(warning), "{args:?}: {}", stderr(&o));
    }
    let o = taskhost_command(&env).env_remove(UNSET).args(["run-once", "echo", "--data", "{}"]).output().expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(warning) && stderr(&o).contains(UNSET), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_its_plugins_directory_fails_before_it_makes_a_database_file() {
    let env = Env::new(&[]).await;
    let db = env.dir.path().join("never-made.db");
    let missing = env.dir.path().join("no-plugins-here");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .arg("--database-url")
        .arg(format!("sqlite://{}", db.display()))
        .arg("--plugins")
        .arg(&missing)
        .args(["worker", "--drain"])
        .env_remove("TASKHOST_CONFIG")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot read the plugins directory") && stderr(&o).contains("it does not exist"));
    assert!(!db.exists(), "the database file was made: {}", db.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_of_an_empty_queue_ends_without_waiting_for_every_plugin_to_compile() {
    let env = Env::new(&["noop", "py-stats"]).await;
    // A cache of its own: the Python component (18 MB) would take many seconds to compile.
    let cache = env.dir.path().join("fresh-cache");
    let o = taskhost_command_caching_in(&env, &cache).args(["worker", "--drain"]).output().expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    let compiled = std::fs::read_dir(&cache).map_or(0, |d| d.filter_map(Result::ok).count());
    assert!(compiled < 2, "the drain waited for the Python component to compile: {compiled} artifacts");
}

async fn a_task_of_a_plugin_ready_after_the_worker_started_is_claimed_as_it_is_ready(db: Db) {
    let env = Env::on(db, &["noop", "echo"]).await;
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    // A cache of its own: both compile, the smaller (noop) first, and the worker starts with it.
    let cache = env.dir.path().join("fresh-cache");
    let polls = ["--poll-interval", "60s", "--notified-poll-interval", "60s", "--probe-interval", "0s"];
    let mut command = taskhost_command_caching_in(&env, &cache);
    command.arg("worker").args(polls).stdout(Stdio::null()).stderr(Stdio::piped());
    let worker = Killed(Some(command.spawn().expect("spawn worker")));
    let client = env.app.client.clone();
    wait_until(Duration::from_secs(30), "the echo task ran, long before the next poll", || async {
        client.show(id).await.is_ok_and(|(t, _)| t.last_status == RunStatus::Success)
    })
    .await;
    let worker = worker.take();
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(30)).await;
    assert!(out.status.success(), "{}", stderr(&out));
}

on_every_database!(a_task_of_a_plugin_ready_after_the_worker_started_is_claimed_as_it_is_ready);
