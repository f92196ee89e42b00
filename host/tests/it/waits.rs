//! Waiting for a task's end through `serve` (`GET /api/v1/tasks/{id}?wait=`), with real server
//! and worker processes: a wait answers when a worker ends the task or an operator cancels it,
//! with the task as a plain read has it; one that runs out answers the task as it is; bad waits
//! get one clear error; a server that stops ends its waits at once. `/metrics` counts the
//! requests waiting, which is how the test knows a wait is under way before the task ends.

use crate::common;

use std::time::{Duration, Instant};

use common::process::{run, signal, spawn_worker, stderr, stdout, wait_exit};
use common::served::Served;
use common::{wait_until, Db, Env};
use serde_json::{json, Value};

/// `GET /tasks/ID?wait=WAIT` on its own thread: the answer and how long it took.
fn wait_for(served: &Served, id: i64, wait: &str) -> std::thread::JoinHandle<((u16, Value), Duration)> {
    let handle = served.handle();
    let path = format!("/tasks/{id}?wait={wait}");
    std::thread::spawn(move || {
        let start = Instant::now();
        (handle.call("GET", &path, None, None), start.elapsed())
    })
}

/// Until `/metrics` counts `n` requests waiting.
async fn waiting(served: &Served, n: usize) {
    let want = format!("taskhost_api_waiting_requests {n}\n");
    wait_until(Duration::from_secs(30), &format!("{n} requests waiting"), || async {
        served.page("/metrics").2.contains(&want)
    })
    .await;
}

async fn answer(t: std::thread::JoinHandle<((u16, Value), Duration)>) -> ((u16, Value), Duration) {
    tokio::task::spawn_blocking(move || t.join().expect("the waiting request")).await.expect("join")
}

fn add(served: &Served, body: &str) -> i64 {
    let (status, added) = served.call("POST", "/tasks", None, Some(body));
    assert_eq!(status, 201, "{added}");
    added["id"].as_i64().expect("an id")
}

async fn a_wait_answers_when_the_task_ends_or_when_it_runs_out(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let mut served = Served::start(&env, "127.0.0.1:0");
    // A task that runs after another and holds a signal, so its answer has every part.
    let first = add(&served, r#"{"handler": "echo", "data": {"n": 0}}"#);
    let id = add(&served, &format!(r#"{{"handler": "echo", "data": {{"n": 1}}, "after": [{first}]}}"#));
    let (status, sent) = served.call("POST", &format!("/tasks/{id}/signals/go"), None, Some("{}"));
    assert_eq!(status, 201, "{sent}");
    // No worker yet: the wait runs out, and the task is answered as it is.
    let (status, shown) = served.call("GET", &format!("/tasks/{id}?wait=300ms"), None, None);
    assert_eq!((status, shown["task"]["state"].as_str()), (200, Some("waiting")), "{shown}");

    // A wait under way when a worker runs the task answers with its results, long before it runs out.
    let pending = wait_for(&served, id, "25s");
    waiting(&served, 1).await;
    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    let ((status, shown), took) = answer(pending).await;
    assert_eq!((status, shown["task"]["state"].as_str()), (200, Some("succeeded")), "{shown}");
    assert_eq!(shown["runs"][0]["results"], json!({"n": 1}), "{shown}");
    assert!(took < Duration::from_secs(20), "answered at the end, not when the wait ran out: {took:?}");
    // Handed over by the watcher, read with the others that ended then: as a plain read has it.
    let (_, plain) = served.call("GET", &format!("/tasks/{id}"), None, None);
    assert_eq!(shown, plain);
    assert_eq!((shown["after"][0]["id"].as_i64(), shown["signals"][0]["name"].as_str()), (Some(first), Some("go")));
    // A final task is answered at once, however long the wait asked.
    let (status, shown) = served.call("GET", &format!("/tasks/{id}?wait=60s"), None, None);
    assert_eq!((status, shown["task"]["state"].as_str()), (200, Some("succeeded")));
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;

    // Two waits for one task due next year end when it is cancelled.
    let later = add(&served, r#"{"handler": "echo", "at": "2099-01-01T00:00:00Z"}"#);
    let (first, second) = (wait_for(&served, later, "25s"), wait_for(&served, later, "25s"));
    waiting(&served, 2).await;
    let (status, cancelled) = served.call("POST", &format!("/tasks/{later}/cancel"), None, None);
    assert_eq!(status, 200, "{cancelled}");
    for pending in [first, second] {
        let ((status, shown), took) = answer(pending).await;
        assert_eq!((status, shown["task"]["state"].as_str()), (200, Some("cancelled")), "{shown}");
        assert!(took < Duration::from_secs(20), "{took:?}");
    }
    waiting(&served, 0).await;

    for (path, needle) in [
        (format!("/tasks/{later}?wait=61s"), "at most 60s"),
        (format!("/tasks/{later}?wait=soon"), "wait=\"soon\""),
        (format!("/tasks/{later}?colour=red"), "no such parameter (wait)"),
    ] {
        let (status, error) = served.call("GET", &path, None, None);
        assert_eq!((status, error["error"]["code"].as_str()), (400, Some("invalid")), "{path}: {error}");
        assert!(error["error"]["message"].as_str().unwrap_or("").contains(needle), "{path}: {error}");
    }
    let (status, error) = served.call("GET", "/tasks/999999?wait=5s", None, None);
    assert_eq!((status, error["error"]["code"].as_str()), (404, Some("not-found")), "{error}");

    // A server asked to stop ends the waits under way with the task as it is, and exits.
    let unrun = add(&served, r#"{"handler": "echo", "at": "2099-01-01T00:00:00Z"}"#);
    let pending = wait_for(&served, unrun, "25s");
    waiting(&served, 1).await;
    let asked = Instant::now();
    let kill = std::process::Command::new("kill").args(["-TERM", &served.pid().to_string()]).status();
    assert!(kill.expect("kill").success());
    let ((status, shown), _) = answer(pending).await;
    assert_eq!((status, shown["task"]["state"].as_str()), (200, Some("scheduled")), "{shown}");
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while !served.exited() {
        assert!(asked.elapsed() < Duration::from_secs(30), "serve did not exit");
        tick.tick().await;
    }
    eprintln!("serve exited {:?} after SIGTERM with a request waiting", asked.elapsed());
}

/// A task its success deleted (a queue with `--on-success delete`) is answered as that, not as
/// no task: 410 `deleted`, saying when it succeeded, to a plain read, a wait (at once), a retry,
/// a cancel, a signal and `taskhost show`; an id never given is still 404.
async fn a_task_its_success_deleted_is_answered_as_succeeded_and_deleted_not_as_missing(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let o = run(&env, &["limits", "set", "queue:gone", "--on-success", "delete"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let served = Served::start(&env, "127.0.0.1:0");
    let id = add(&served, r#"{"handler": "echo", "queue": "gone"}"#);
    let worker = spawn_worker(&env, &["--queues", "gone", "--poll-interval", "20ms"]);
    let path = format!("/tasks/{id}");
    // Plain reads (a wait would keep it), until its success has deleted it.
    wait_until(Duration::from_secs(60), "the task's success deleted it", || async {
        served.call("GET", &path, None, None).0 == 410
    })
    .await;
    signal(&worker, "TERM");
    let plain = served.call("GET", &path, None, None);
    let start = Instant::now();
    let waited = served.call("GET", &format!("{path}?wait=30s"), None, None);
    assert!(start.elapsed() < Duration::from_secs(20), "answered at once: {:?}", start.elapsed());
    let retried = served.call("POST", &format!("{path}/retry"), None, None);
    let cancelled = served.call("POST", &format!("{path}/cancel"), None, None);
    let signalled = served.call("POST", &format!("{path}/signals/go"), None, Some("{}"));
    let under = served.call("POST", &format!("{path}/cancel?with_children=true"), None, None);
    let deleted = served.call("DELETE", &path, None, None);
    let answers = [
        ("get", plain),
        ("wait", waited),
        ("retry", retried),
        ("cancel", cancelled),
        ("signal", signalled),
        ("cancel with children", under),
        ("delete", deleted),
    ];
    for (what, (status, error)) in answers {
        assert_eq!((status, error["error"]["code"].as_str()), (410, Some("deleted")), "{what}: {error}");
        let message = error["error"]["message"].as_str().unwrap_or("");
        let told = format!("task {id} succeeded at 20");
        assert!(
            message.contains(&told) && message.contains("queue \"gone\" deletes its successes"),
            "{what}: {message}"
        );
    }
    let o = run(&env, &["show", &id.to_string()]);
    assert!(!o.status.success() && stderr(&o).contains("and was deleted"), "{}{}", stdout(&o), stderr(&o));
    let (status, error) = served.call("GET", &format!("/tasks/{}", id + 1000), None, None);
    assert_eq!((status, error["error"]["code"].as_str()), (404, Some("not-found")), "{error}");
    wait_exit(worker, Duration::from_secs(30)).await;
    drop(served);
}

crate::on_every_database!(
    a_wait_answers_when_the_task_ends_or_when_it_runs_out,
    a_task_its_success_deleted_is_answered_as_succeeded_and_deleted_not_as_missing
);
