//! Tasks that run after others (issue 47, `--after`), through the command line and the API on a
//! SQLite file with real workers: a join runs only after each task it runs after succeeded, a
//! failed one cancels it, and every refusal is one line naming what is wrong. (The store's side, on
//! every database, is in the store suite: `suite/dependencies.rs`.)

use crate::common;

use common::process::{add, run, stderr, stdout};
use common::served::Served;
use common::Env;
use serde_json::{json, Value};

fn show(env: &Env, id: i64) -> Value {
    serde_json::from_slice(&run(env, &["show", &id.to_string(), "--json"]).stdout).expect("json")
}

/// `add --after A,B` waits (listed as `waiting`, shown with what it runs after), then runs after
/// both; the join's run starts after each of theirs ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_added_from_the_command_line_runs_after_each_task_it_runs_after() {
    let env = Env::new(&["echo"]).await;
    let (a, b) = (add(&env, &["echo", "--data", r#"{"n":1}"#]), add(&env, &["echo", "--data", r#"{"n":2}"#]));
    let join = add(&env, &["echo", "--after", &format!("{a},{b}"), "--priority", "-10"]);
    let o = run(&env, &["show", &join.to_string()]);
    assert!(
        stdout(&o).contains(&format!("runs after  {a} (scheduled), {b} (scheduled): waiting for 2")),
        "{}",
        stdout(&o)
    );
    let o = run(&env, &["list", "--state", "waiting", "--json"]);
    let listed: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(listed.as_array().map(|l| l.iter().map(|t| t["task"]["id"].clone()).collect()), Some(vec![json!(join)]));

    // The join has the highest priority, and still runs last.
    let o = run(&env, &["worker", "--drain"]);
    assert!(stderr(&o).contains("3 runs finished (3 succeeded"), "{}", stderr(&o));
    let shown = show(&env, join);
    assert_eq!(shown["task"]["state"], "succeeded", "{shown}");
    assert_eq!(shown["after"], json!([{"id": a, "state": "succeeded"}, {"id": b, "state": "succeeded"}]), "{shown}");
    let started = shown["runs"][0]["started_on"].as_str().expect("started").to_string();
    for id in [a, b] {
        let ended = show(&env, id)["runs"][0]["finished_on"].as_str().expect("ended").to_string();
        assert!(ended <= started, "task {id} ended at {ended}, after the join started at {started}");
    }
}

/// A dependency that fails for good cancels the join, whose run says why; `--run-anyway` runs it
/// all the same. A missing task, a dead one, and `--run-anyway` alone are refused, one line each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_dependency_cancels_the_join_unless_it_runs_anyway_and_bad_lists_are_refused() {
    let env = Env::new(&["echo", "fail"]).await;
    let failing = add(&env, &["fail", "--max-attempts", "1"]);
    let join = add(&env, &["echo", "--after", &failing.to_string()]);
    let anyway = add(&env, &["echo", "--after", &failing.to_string(), "--run-anyway"]);
    let o = run(&env, &["worker", "--drain"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = show(&env, join);
    assert_eq!(shown["task"]["state"], "cancelled", "{shown}");
    assert_eq!(shown["runs"][0]["error_code"], "dependency-failed", "{shown}");
    assert_eq!(show(&env, anyway)["task"]["state"], "succeeded");

    let dead = failing.to_string();
    let refusals = [
        ("999999", "error: invalid after: there is no task 999999\n".to_string()),
        (
            &*dead,
            format!(
                "error: invalid after: task {dead} is dead, so this task would never run (unless it runs anyway)\n"
            ),
        ),
    ];
    for (after, line) in refusals {
        let o = run(&env, &["add", "echo", "--after", after]);
        assert_eq!((o.status.code(), stderr(&o)), (Some(1), line), "--after {after}");
    }
    let o = run(&env, &["add", "echo", "--run-anyway"]);
    let said = (o.status.code(), stderr(&o));
    assert_eq!(said, (Some(1), "error: invalid run_anyway: it runs after no task\n".to_string()), "one line");
}

/// The API's `after`: the task is `waiting`, its page lists what it runs after; a wrong list is a
/// 400 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_adds_a_task_after_others_and_shows_what_it_runs_after() {
    let env = Env::new(&["echo"]).await;
    let first = add(&env, &["echo"]);
    let served = Served::start(&env, "127.0.0.1:0");
    let body = json!({"handler": "echo", "after": [first]}).to_string();
    let (status, added) = served.call("POST", "/tasks", None, Some(&body));
    assert_eq!(status, 201, "{added}");
    let (_, shown) = served.call("GET", &format!("/tasks/{}", added["id"]), None, None);
    assert_eq!(shown["task"]["state"], "waiting", "{shown}");
    assert_eq!(shown["after"], json!([{"id": first, "state": "scheduled"}]), "{shown}");
    let (_, page) = served.call("GET", "/tasks?state=waiting", None, None);
    assert_eq!(page["tasks"].as_array().map(Vec::len), Some(1), "{page}");
    let (status, refused) = served.call("POST", "/tasks", None, Some(r#"{"handler": "echo", "after": [424242]}"#));
    assert_eq!((status, &refused["error"]["code"]), (400, &json!("invalid")), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or("").contains("there is no task 424242"), "{refused}");
    let batch = r#"{"tasks": [{"handler": "echo"}, {"handler": "echo", "after": [424242]}]}"#;
    let (status, refused) = served.call("POST", "/tasks", None, Some(batch));
    assert_eq!((status, &refused["error"]["code"]), (400, &json!("invalid")), "{refused}");
    let said = refused["error"]["message"].as_str().unwrap_or("");
    assert_eq!(said, "tasks[1]: invalid after: there is no task 424242", "named by its place: {refused}");
    // A batch of one is named by its place too, as the checks before the store name it.
    let (status, refused) =
        served.call("POST", "/tasks", None, Some(r#"{"tasks": [{"handler": "echo", "after": [424242]}]}"#));
    assert_eq!(
        (status, &refused["error"]["message"]),
        (400, &json!("tasks[0]: invalid after: there is no task 424242"))
    );
}
