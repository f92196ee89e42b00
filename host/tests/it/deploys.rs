//! Handlers published into the database with `taskhost deploy`: run by worker processes that have
//! none of them on disk, switched by a deploy or a rollback, on every database.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::process::{run, signal, stderr, stdout, wait_exit, Killed};
use common::{component, wait_until, Db, Env};
use sha2::{Digest, Sha256};
use taskhost::model::{NewTask, RunStatus, TaskFilter, TaskId};

/// A worker process with a compiled cache of its own, empty (as a fresh machine has), and an
/// empty plugins directory (`with_dir`) or none at all, on the environment's database.
fn fresh_worker(env: &Env, name: &str, with_dir: bool) -> Child {
    let home = env.dir.path().join(name);
    let (plugins, cache) = (home.join("plugins"), home.join("cache"));
    if with_dir {
        std::fs::create_dir_all(&plugins).expect("plugins dir");
    }
    Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .arg("--database-url")
        .arg(&env.db_url)
        .arg("--plugins")
        .arg(&plugins)
        .arg("--cache-dir")
        .arg(&cache)
        .env_remove("TASKHOST_DATABASE_URL")
        .env_remove("TASKHOST_PLUGINS")
        .env_remove("TASKHOST_CONFIG")
        .args(["worker", "--concurrency", "4", "--log", "info"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn worker")
}

fn digest_of(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).expect("read component")))
}

/// Queue `n` tasks of `greet`; their ids.
async fn queue(env: &Env, n: usize) -> Vec<TaskId> {
    let tasks = (0..n).map(|i| NewTask::new("greet", format!("{{\"i\": {i}}}"))).collect();
    env.app.client.add_many(tasks).await.expect("add").iter().map(|a| a.id).collect()
}

/// Wait until each of `ids` succeeded; the component each ran.
async fn ran(env: &Env, ids: &[TaskId]) -> Vec<String> {
    let client = &env.app.client;
    wait_until(Duration::from_secs(120), "the tasks ran", || async {
        let tasks = client.list(&TaskFilter::default()).await.expect("list");
        ids.iter().all(|id| tasks.iter().any(|t| t.id == *id && t.last_status == RunStatus::Success))
    })
    .await;
    let mut digests = Vec::new();
    for id in ids {
        let (_, runs) = client.show(*id).await.expect("show");
        let last = runs.last().expect("a run");
        digests.push(last.component_digest.clone().expect("the run records its component"));
    }
    digests
}

/// A handler deployed into the database runs on two worker processes whose caches are empty, one
/// with an empty plugins directory and one with none; every task queued after a deploy runs the version it made active, and
/// after a rollback the version before; `versions` lists both; a component that does not
/// implement the world is refused with one line and changes nothing.
async fn a_deployed_handler_runs_on_fresh_workers_and_each_release_switches_them_all(db: Db) {
    let env = Env::on(db, &[]).await;
    let (v1, v2) = (component("echo"), component("noop"));
    let (d1, d2) = (digest_of(&v1), digest_of(&v2));
    let o = run(&env, &["deploy", v1.to_str().expect("path"), "--name", "greet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with(&format!("deployed greet {}", &d1[..12])), "{}", stdout(&o));
    let workers: Vec<Killed> =
        [("a", true), ("b", false)].iter().map(|(n, dir)| Killed(Some(fresh_worker(&env, n, *dir)))).collect();

    let first = queue(&env, 8).await;
    assert!(ran(&env, &first).await.iter().all(|d| *d == d1), "every run of the first version");

    let o = run(&env, &["deploy", v2.to_str().expect("path"), "--name", "greet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Queued after the release is committed: no run of them may start on the version before.
    let second = queue(&env, 8).await;
    assert!(ran(&env, &second).await.iter().all(|d| *d == d2), "every run after the deploy runs it");

    let o = run(&env, &["rollback", "greet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with(&format!("rolled greet back to {}", &d1[..12])), "{}", stdout(&o));
    let third = queue(&env, 8).await;
    assert!(ran(&env, &third).await.iter().all(|d| *d == d1), "every run after the rollback runs the first");

    // Pinned to the version that is not active, by the start of its digest.
    let o = run(&env, &["add", "greet", "--version", &d2[..12]]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pinned: TaskId = stdout(&o).trim().parse().expect("an id");
    assert_eq!(ran(&env, &[pinned]).await, std::slice::from_ref(&d2), "a pinned task runs its version");
    let shown = stdout(&run(&env, &["show", &pinned.to_string()]));
    assert!(shown.contains(&format!("version     {d2}")), "{shown}");
    for (version, says) in [("ffff0000", "no version ffff0000"), ("xyz", "not a digest")] {
        let o = run(&env, &["add", "greet", "--version", version]);
        assert!(!o.status.success(), "version {version} is refused");
        assert!(stderr(&o).lines().count() == 1 && stderr(&o).contains(says), "{}", stderr(&o));
    }

    let listed = stdout(&run(&env, &["versions", "greet"]));
    let active: Vec<&str> = listed.lines().filter(|l| l.starts_with('*')).collect();
    assert_eq!(active.len(), 1, "{listed}");
    assert!(active[0].contains(&d1[..12]) && listed.contains(&d2[..12]), "{listed}");
    let history = stdout(&run(&env, &["versions", "greet", "--history"]));
    assert_eq!(history.lines().filter(|l| l.contains("deploy") || l.contains("rollback")).count(), 3, "{history}");

    let wrong = component("wrong-world");
    let o = run(&env, &["deploy", wrong.to_str().expect("path"), "--name", "greet"]);
    assert!(!o.status.success(), "a component of another world is refused");
    let said = stderr(&o);
    assert!(said.lines().next().is_some_and(|l| l.starts_with("refused greet: ") && l.contains("handle")), "{said}");
    assert_eq!(said.lines().count(), 1, "one file's refusal is one line: {said}");
    assert!(stdout(&run(&env, &["versions", "greet"])).lines().count() == 3, "nothing was deployed");

    for w in workers {
        let child = w.take();
        signal(&child, "TERM");
        let out = wait_exit(child, Duration::from_secs(30)).await;
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// `serve` with no plugins directory at all: ready, its plugins list names the deployed handler,
/// it queues that handler's tasks and refuses an unknown one in one line (400, not a 5xx).
async fn a_server_without_a_plugins_directory_queues_deployed_handlers_and_refuses_others(db: Db) {
    let env = Env::on(db, &[]).await;
    let echo = component("echo");
    let o = run(&env, &["deploy", echo.to_str().expect("path"), "--name", "greet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_dir_all(&env.plugins).expect("remove the plugins directory");
    let served = common::served::Served::start(&env, "127.0.0.1:0");
    assert_eq!(served.call("GET", "/ready", None, None).0, 200);
    let (status, listed) = served.call("GET", "/plugins", None, None);
    assert_eq!(status, 200, "{listed}");
    let names: Vec<(&str, &str)> = listed["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .map(|p| (p["name"].as_str().unwrap_or(""), p["source"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(names, [("greet", "deployed")], "{listed}");
    let (status, added) = served.call("POST", "/tasks", None, Some(r#"{"handler": "greet"}"#));
    assert_eq!(status, 201, "{added}");
    let (status, refused) = served.call("POST", "/tasks", None, Some(r#"{"handler": "nosuch"}"#));
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("unknown-handler")), "{refused}");
}

/// A version written as `show` prints it (`sha256:…`), in capitals too, pins a task and rolls
/// back as its digest; a pin of a handler never deployed, a file that is not there, each one line
/// saying so; a deploy by a user the environment does not name records the process's user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_is_read_as_show_prints_it_and_what_is_not_there_says_so() {
    let env = Env::new(&["echo"]).await;
    let (v1, v2) = (component("echo"), component("noop"));
    let d1 = digest_of(&v1);
    let nameless = common::taskhost_command(&env)
        .args(["deploy", v1.to_str().expect("path"), "--name", "greet"])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .expect("deploy");
    assert!(nameless.status.success(), "{}", stderr(&nameless));
    assert!(run(&env, &["deploy", v2.to_str().expect("path"), "--name", "greet"]).status.success());
    let versions = env.app.client.versions("greet").await.expect("versions");
    let first = versions.iter().find(|v| v.digest == d1).expect("the first version");
    assert!(!first.deployed_by.starts_with("?@"), "who deployed it, from the process: {}", first.deployed_by);

    let written = format!("sha256:{}", d1[..12].to_uppercase());
    let o = run(&env, &["add", "greet", "--version", &written, "--in", "1h"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id: TaskId = stdout(&o).trim().parse().expect("an id");
    assert_eq!(env.app.client.show(id).await.expect("show").0.version.as_deref(), Some(d1.as_str()));
    let o = run(&env, &["rollback", "greet", "--to", &written]);
    assert!(stdout(&o).starts_with(&format!("rolled greet back to {}", &d1[..12])), "{}{}", stdout(&o), stderr(&o));

    let refusals = [
        (vec!["add", "echo", "--version", "ffff0000"], "no version of it is deployed"),
        (vec!["deploy", "/nonexistent/nothere.wasm"], "cannot read /nonexistent/nothere.wasm"),
    ];
    for (args, says) in refusals {
        let o = run(&env, &args);
        assert!(!o.status.success() && stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: one line: {}", stderr(&o));
    }
}

on_every_database!(
    a_deployed_handler_runs_on_fresh_workers_and_each_release_switches_them_all,
    a_server_without_a_plugins_directory_queues_deployed_handlers_and_refuses_others
);
