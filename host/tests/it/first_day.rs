//! An operator's first day, without misleading lines: a command that only queues says nothing of
//! granted variables this host does not set (a worker loading the handler does), and a worker
//! pointed at a missing plugins directory fails before it makes a database file, and a task of
//! a plugin that finishes compiling after the worker started is claimed as it is ready, not at
//! the next poll. A worker given no queues claims from every queue, and a queue with due tasks
//! no live worker claims from is named. Real processes on real SQLite files (and PostgreSQL and
//! MariaDB where the database's part differs).

use crate::common;

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
    let compiled = std::fs::read_dir(&cache)
        .map_or(0, |d| d.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count());
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

async fn a_worker_given_no_queues_claims_from_every_queue_even_one_first_used_while_it_runs(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let client = env.app.client.clone();
    let first = [client.add(NewTask::new("echo", "{}").with_queue("mail")).await.expect("add").id];
    let mut command = taskhost_command(&env);
    command.arg("worker").stdout(Stdio::null()).stderr(Stdio::piped());
    let worker = Killed(Some(command.spawn().expect("spawn worker")));
    let succeeded = |ids: Vec<i64>| {
        let client = client.clone();
        async move {
            for id in ids {
                if !client.show(id).await.is_ok_and(|(t, _)| t.last_status == RunStatus::Success) {
                    return false;
                }
            }
            true
        }
    };
    wait_until(Duration::from_secs(30), "the mail task ran", || succeeded(first.to_vec())).await;
    let later = [
        client.add(NewTask::new("echo", "{}").with_queue("reports")).await.expect("add").id,
        client.add(NewTask::new("echo", "{}")).await.expect("add").id,
    ];
    wait_until(Duration::from_secs(30), "tasks of a queue first used now ran", || succeeded(later.to_vec())).await;
    let live = env.app.store.live_runners().await.expect("runners");
    assert_eq!(live.iter().map(|r| r.queues.clone()).collect::<Vec<_>>(), [Some(vec!["*".to_string()])]);
    let queues = client.queues().await.expect("queues");
    assert!(queues.is_empty(), "nothing left: {queues:?}");
    let worker = worker.take();
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(30)).await;
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_with_due_tasks_no_live_worker_claims_from_is_named_by_taskhost_queues() {
    let env = Env::new(&["echo"]).await;
    env.app.client.add(NewTask::new("echo", "{}").with_queue("mail")).await.expect("add");
    let warning = "warning: queue mail has 1 task due and no live worker claims from it: start one with --queues \
                   mail, or with none for every queue\n";
    let o = taskhost_command(&env).arg("queues").output().expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), warning, "no worker at all");
    let mut command = taskhost_command(&env);
    command.args(["worker", "--queues", "default,held"]).stdout(Stdio::null()).stderr(Stdio::piped());
    let worker = Killed(Some(command.spawn().expect("spawn worker")));
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(30), "the worker says what it claims from", || async {
        store.live_runners().await.expect("runners").iter().any(|r| r.queues.is_some())
    })
    .await;
    let o = taskhost_command(&env).arg("queues").output().expect("run");
    assert_eq!(stderr(&o), warning, "a worker of other queues");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let header = text.lines().next().unwrap_or_default();
    // Columns of one word each but MAX RUNNING: WORKERS is one before its place in the header.
    let column = header.split_whitespace().position(|w| w == "WORKERS").expect(&text) - 1;
    let mail = text.lines().find(|l| l.starts_with("mail")).unwrap_or_default();
    let workers = mail.split_whitespace().nth(column);
    assert_eq!(workers, Some("0"), "{text}");
    drop(worker);
    // Paused, it is not a worker's to claim: nothing to warn of.
    assert!(taskhost_command(&env).args(["pause", "mail"]).output().expect("run").status.success());
    assert_eq!(stderr(&taskhost_command(&env).arg("queues").output().expect("run")), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_queue_is_spelled_alone_and_is_no_queue_s_name() {
    let env = Env::new(&["echo"]).await;
    let o = taskhost_command(&env).args(["worker", "--drain", "--queues", "*,mail"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o), "error: --queues: * (every queue) cannot be listed with queue names\n");
    let o = taskhost_command(&env).args(["add", "echo", "--queue", "*"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("* is not a queue's name: to workers it means every queue"), "{}", stderr(&o));
    assert!(env.app.client.queues().await.expect("queues").is_empty(), "nothing was queued");
}

/// MariaDB compares names padded with spaces ("mail" and "mail " would be one queue there, two
/// elsewhere), so a queue, key or unique key bordered by white space is refused on every database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_or_unique_key_bordered_by_white_space_is_refused_in_one_line() {
    let env = Env::new(&["echo"]).await;
    let cases = [
        (["--queue", "mail "], "error: invalid queue: the queue begins or ends with white space\n"),
        (["--queue", "\u{3000}mail"], "error: invalid queue: the queue begins or ends with white space\n"),
        (["--unique-key", " k"], "error: invalid unique_key: the unique key begins or ends with white space\n"),
        (["--key", "k\t"], "error: invalid key: the key begins or ends with white space\n"),
    ];
    for (args, said) in cases {
        let o = taskhost_command(&env).args(["add", "echo"]).args(args).output().expect("run");
        assert_eq!((o.status.code(), stderr(&o).as_str()), (Some(1), said), "{args:?}");
    }
    // Nor can such a queue be paused, limited or claimed from: on MariaDB it would be "mail".
    // One rule, one sentence, wherever a queue or a key is named.
    let refusals: [(&[&str], &str); 6] = [
        (&["pause", "mail "], "the queue begins or ends with white space"),
        (&["pause", "*"], "* is not a queue's name"),
        (&["worker", "--drain", "--queues", "mail,\u{a0}mail"], "the queue begins or ends with white space"),
        (&["limits", "set", "queue:mail ", "--max-running", "1"], "is no queue name: the queue begins or ends"),
        (&["limits", "set", "queue:*", "--max-running", "1"], "is no queue name: * is not a queue's name"),
        (&["limits", "set", "key: k", "--max-running", "1"], "is no key name: the key begins or ends"),
    ];
    for (args, said) in refusals {
        let o = taskhost_command(&env).args(args).output().expect("run");
        assert!(!o.status.success() && stderr(&o).contains(said), "{args:?}: {}", stderr(&o));
    }
    assert!(env.app.client.queues().await.expect("queues").is_empty(), "nothing was queued, paused or limited");
}

/// One name for attempts: `--max-attempts` counts the runs a task may have, the first included;
/// the old `--max-retries` (and `max_retries` in a `--many` line) is read as the same number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_have_one_name_and_the_old_one_is_read_as_the_same_number() {
    let mut env = Env::new(&["echo"]).await;
    fn attempts(env: &Env, args: &[&str]) -> Option<u64> {
        let id = common::process::add(env, args).to_string();
        let o = taskhost_command(env).args(["show", &id, "--json"]).output().expect("run");
        let shown: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        shown["task"]["max_attempts"].as_u64()
    }
    let attempts_of = |args: &[&str]| attempts(&env, args);
    let default = u64::from(taskhost::model::DEFAULT_MAX_ATTEMPTS);
    assert_eq!(attempts_of(&["echo"]), Some(default));
    assert_eq!(attempts_of(&["echo", "--max-attempts", "3"]), Some(3));
    assert_eq!(attempts_of(&["echo", "--max-retries", "3"]), Some(3));
    assert_eq!(attempts_of(&["echo", "--max-retries", "0"]), Some(1), "0 allowed one run");
    let o = taskhost_command(&env).args(["add", "echo", "--max-attempts", "0"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("max_attempts: 0 is under the minimum of 1"), "{}", stderr(&o));
    let both = ["add", "echo", "--max-attempts", "3", "--max-retries", "3"];
    assert_eq!(taskhost_command(&env).args(both).output().expect("run").status.code(), Some(2));
    let lines = env.dir.path().join("lines.jsonl");
    std::fs::write(&lines, "{\"handler\": \"echo\", \"max_retries\": 7}\n").expect("write");
    let o = taskhost_command(&env).args(["add", "--many"]).arg(&lines).output().expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = env.app.client.list(&taskhost::model::TaskFilter::default()).await.expect("list");
    assert!(listed.iter().any(|t| t.max_attempts == 7), "{listed:?}");
    // The old name in the operator's file: read, and a flag of the new name still wins over it.
    env.set_config("[add]\nmax_retries = 3\n").await;
    assert_eq!(attempts(&env, &["echo"]), Some(3));
    assert_eq!(attempts(&env, &["echo", "--max-attempts", "7"]), Some(7), "a flag over the file");
}

on_every_database!(
    a_task_of_a_plugin_ready_after_the_worker_started_is_claimed_as_it_is_ready,
    a_worker_given_no_queues_claims_from_every_queue_even_one_first_used_while_it_runs,
);
