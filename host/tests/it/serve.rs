//! `taskhost serve`: the HTTP API as applications use it. A Python program (standard library)
//! and a Node.js program (fetch) queue tasks through a live server while a worker runs them, and
//! read their results; bad requests get JSON errors with a 4xx status; tokens and roles are
//! enforced, and the server will not listen beyond this machine without one. Real processes, a
//! real SQLite file (and PostgreSQL and MariaDB for the API's answers).

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::process::{run, signal, spawn_worker, stderr, stdout, wait_exit};
use common::served::Served;
use common::{repo_root, taskhost_command, wait_until, Db, Env};
use serde_json::{json, Value};

fn client(program: &str, args: &[&str]) -> Value {
    let script = repo_root().join("host/tests/clients").join(args[0]);
    let o = Command::new(program).arg(script).args(&args[1..]).output().expect("run the client");
    assert!(o.status.success(), "{program} {args:?}: {}{}", stdout(&o), stderr(&o));
    serde_json::from_str(stdout(&o).trim()).expect("one JSON line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_node_applications_queue_tasks_and_read_their_results() {
    let env = Env::new(&["echo", "word-count"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let worker = spawn_worker(&env, &[]);
    let py = client("python3", &["queue.py", &served.base]);
    assert_eq!(py["ids"].as_array().map(Vec::len), Some(3), "{py}");
    assert_eq!(py["results"], json!([{"words": 3, "lines": 1, "chars": 5}, {"n": 0}, {"n": 1}]), "{py}");
    let node = client("node", &["queue.mjs", &served.base]);
    assert_eq!(node["results"], json!({"words": 4, "lines": 1, "chars": 7}), "{node}");
    // What they queued is the queue's, as the command line shows it.
    let (status, shown) = served.call("GET", &format!("/tasks/{}", node["id"]), None, None);
    assert_eq!((status, &shown["task"]["queued_by"]), (200, &json!("node")), "{shown}");
    // A finished task is refused a cancel by its state, as the task reads (not its last run's).
    let (status, answer) = served.call("POST", &format!("/tasks/{}/cancel", node["id"]), None, None);
    let refused = format!("task {} is succeeded: only unfinished tasks can be cancelled", node["id"]);
    assert_eq!((status, answer["error"]["message"].as_str()), (409, Some(refused.as_str())), "{answer}");
    let (status, page) = served.call("GET", "/tasks?handler=echo&order=oldest&limit=1", None, None);
    assert_eq!((status, page["tasks"][0]["data"].clone()), (200, json!({"n": 0})), "{page}");
    let next = page["next"].as_i64().expect("a next page");
    let (_, page) = served.call("GET", &format!("/tasks?handler=echo&order=oldest&limit=1&after={next}"), None, None);
    assert_eq!(page["tasks"][0]["data"], json!({"n": 1}), "{page}");
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}

async fn bad_requests_get_a_json_error_and_lose_nothing(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    for (method, path, body, status, code) in [
        ("POST", "/tasks", Some("{nope"), 400, "invalid-json"),
        ("POST", "/tasks", Some(r#"{"handler": "missing"}"#), 400, "unknown-handler"),
        ("POST", "/tasks", Some(r#"{"handler": "echo", "at": "tomorrow"}"#), 400, "invalid"),
        ("POST", "/tasks", Some(r#"{"handler": "echo", "colour": "red"}"#), 400, "invalid"),
        ("POST", "/tasks", Some(r#"{"tasks": [{"handler": "echo"}, {"handler": "missing"}]}"#), 400, "unknown-handler"),
        ("GET", "/tasks/12345", None, 404, "not-found"),
        ("GET", "/tasks/seven", None, 400, "invalid"),
        ("GET", "/tasks?status=sleeping", None, 400, "invalid"),
        ("GET", "/tasks?limit=0", None, 400, "invalid"),
        ("GET", "/tasks?text=a%00b", None, 400, "invalid"),
        ("GET", "/stats/throughput?minutes=61", None, 400, "invalid"),
        ("GET", "/stats/throughput?colour=red", None, 400, "invalid"),
        ("GET", "/stats/throughput?handler=a%00b", None, 400, "invalid"),
        ("GET", "/stats?queue=a%00b", None, 400, "invalid"),
        ("POST", "/tasks/12345/cancel", None, 404, "not-found"),
        ("GET", "/tasks?queue=a&queue=b", None, 400, "invalid"),
        ("GET", "/events?queue=a&queue=b", None, 400, "invalid"),
        ("GET", "/tasks/12345?wait=60s&wait=1s", None, 400, "invalid"),
        ("POST", "/tasks/12345/signals/go", Some("{}"), 404, "not-found"),
        ("GET", "/nothing-here", None, 404, "not-found"),
    ] {
        let (got, answer) = served.call(method, path, None, body);
        assert_eq!((got, answer["error"]["code"].as_str()), (status, Some(code)), "{method} {path}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
    }
    let (_, answer) =
        served.call("POST", "/tasks", None, Some(r#"{"tasks": [{"handler": "echo"}, {"handler": "missing"}]}"#));
    assert!(answer["error"]["message"].as_str().unwrap_or("").starts_with("tasks[1]: unknown handler"), "{answer}");
    // A field refused is named as the API names it.
    for (body, named) in [
        (r#"{"handler": "echo", "unique_for": "1m"}"#, "invalid unique_key: "),
        (&format!(r#"{{"handler": "echo", "queued_by": "{}"}}"#, "b".repeat(300)), "invalid queued_by: "),
    ] {
        let (status, answer) = served.call("POST", "/tasks", None, Some(body));
        let message = answer["error"]["message"].as_str().unwrap_or("");
        assert_eq!((status, message.starts_with(named)), (400, true), "{body}: {answer}");
    }
    let (status, _) = served.call("GET", "/health", None, None);
    assert_eq!(status, 200);
    assert_eq!(env.app.client.store().counts().await.expect("counts").scheduled, 0, "nothing was queued");
    // A finished task cannot be cancelled; a cancelled one is retried.
    let (status, added) = served.call("POST", "/tasks", None, Some(r#"{"handler": "echo", "queue": "api"}"#));
    assert_eq!(status, 201, "{added}");
    let id = added["id"].as_i64().expect("id");
    let (status, _) = served.call("POST", &format!("/tasks/{id}/cancel"), None, None);
    assert_eq!(status, 200);
    let (status, answer) = served.call("POST", &format!("/tasks/{id}/cancel"), None, None);
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("conflict")), "{answer}");
    let (status, answer) = served.call("POST", &format!("/tasks/{id}/retry"), None, None);
    assert_eq!((status, answer["id"].as_i64()), (200, Some(id)), "{answer}");
    // A signal is kept for the unfinished task (it awaits none: nothing wakes), listed with it; bad
    // data is refused, and so is a signal to a finished task.
    let (status, sent) = served.call("POST", &format!("/tasks/{id}/signals/go"), None, Some(r#"{"by": "api"}"#));
    assert_eq!((status, &sent["woke"]), (201, &json!(false)), "{sent}");
    let (_, task) = served.call("GET", &format!("/tasks/{id}"), None, None);
    assert_eq!(
        (&task["signals"][0]["name"], &task["signals"][0]["data"]),
        (&json!("go"), &json!({"by": "api"})),
        "{task}"
    );
    for bad in ["{nope", ""] {
        let (status, answer) = served.call("POST", &format!("/tasks/{id}/signals/go"), None, Some(bad));
        assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("invalid-json")), "{bad:?}: {answer}");
    }
    served.call("POST", &format!("/tasks/{id}/cancel"), None, None);
    let (status, answer) = served.call("POST", &format!("/tasks/{id}/signals/go"), None, Some("{}"));
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("conflict")), "{answer}");
    served.call("POST", &format!("/tasks/{id}/retry"), None, None);
    let (status, answer) = served.call("POST", "/queues/api/pause", None, None);
    assert_eq!((status, &answer["changed"]), (200, &json!(true)), "{answer}");
    let (_, answer) = served.call("GET", "/queues", None, None);
    let api = answer["queues"].as_array().and_then(|q| q.iter().find(|q| q["name"] == "api")).cloned();
    assert!(api.is_some_and(|q| !q["paused_on"].is_null()), "{answer}");
}

/// Bulk actions by ids or filter and deleting one task apply only where they can; a body over
/// the limit, a wrong method and an unknown field get JSON errors too.
async fn bulk_actions_and_deletes_touch_only_the_tasks_they_may(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let four = r#"{"tasks": [{"handler": "echo", "queue": "bulk"}, {"handler": "echo", "queue": "bulk"},
                             {"handler": "echo", "queue": "bulk"}, {"handler": "echo", "queue": "bulk"}]}"#;
    let (status, added) = served.call("POST", "/tasks", None, Some(four));
    assert_eq!(status, 201, "{added}");
    let ids: Vec<i64> = added["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["id"].as_i64()).collect();
    let [a, b, c, _d] = ids[..] else { panic!("four ids: {added}") };
    let (status, answer) = served.call("POST", "/tasks/cancel", None, Some(&format!(r#"{{"ids": [{a}, {b}]}}"#)));
    assert_eq!((status, &answer["cancelled"]), (200, &json!(2)), "{answer}");
    for (body, what) in [
        ("{}", "name the tasks"),
        (r#"{"all": true, "queue": "bulk"}"#, "\"all\" goes alone"),
        (r#"{"ids": []}"#, "\"ids\" is empty"),
        (r#"{"queue": "bulk", "colour": 1}"#, "unknown field \"colour\""),
        (r#"{"queue": "bulk", "status": "asleep"}"#, "status \"asleep\""),
    ] {
        let (status, answer) = served.call("POST", "/tasks/cancel", None, Some(body));
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(message.contains(what), "{body}: {answer}");
    }
    let (status, answer) = served.call("DELETE", &format!("/tasks/{c}"), None, None);
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("conflict")), "a waiting task stays: {answer}");
    let (status, answer) = served.call("DELETE", &format!("/tasks/{a}"), None, None);
    assert_eq!((status, &answer["deleted"]), (200, &json!(true)), "{answer}");
    assert_eq!(served.call("GET", &format!("/tasks/{a}"), None, None).0, 404);
    let (status, answer) =
        served.call("POST", "/tasks/retry", None, Some(&format!(r#"{{"ids": [{b}, {c}], "of": "cancelled"}}"#)));
    assert_eq!((status, &answer["retried"]), (200, &json!(1)), "only b was cancelled: {answer}");
    let (_, answer) = served.call("POST", "/tasks/cancel", None, Some(r#"{"queue": "bulk", "handler": "echo"}"#));
    assert_eq!(answer["cancelled"], json!(3), "{answer}");
    let (_, answer) = served.call("POST", "/tasks/delete", None, Some(r#"{"queue": "elsewhere", "of": "cancelled"}"#));
    assert_eq!(answer["deleted"], json!(0), "another queue: {answer}");
    let (_, answer) = served.call("POST", "/tasks/delete", None, Some(r#"{"queue": "bulk", "of": "cancelled"}"#));
    assert_eq!(answer["deleted"], json!(3), "{answer}");
    assert_eq!(env.app.client.store().counts().await.expect("counts").scheduled, 0);
    // Errors axum itself answers are JSON too; the body's size is refused before it is read.
    let (status, answer) = served.raw("POST", "/tasks", "Content-Length: 17000000\r\n", "");
    assert_eq!((status, answer["error"]["code"].as_str()), (413, Some("too-large")), "{answer}");
    let (status, answer) = served.call("PUT", "/tasks", None, None);
    assert_eq!((status, answer["error"]["code"].as_str()), (405, Some("method-not-allowed")), "{answer}");
    assert_eq!(served.call("GET", "/ready", None, None), (200, json!({"status": "ready"})));
}

/// Limits are listed, changed live and taken out through the API as `taskhost limits` does;
/// a bad name, value or body is a JSON error that changes nothing.
async fn limits_are_listed_set_and_cleared_through_the_api(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let (status, answer) =
        served.call("PUT", "/limits/queue:api", None, Some(r#"{"max_running": 3, "rate_limit": "5/1s"}"#));
    assert_eq!((status, &answer["max_running"], &answer["rate_limit"]), (200, &json!(3), &json!("5/1s")), "{answer}");
    let (status, answer) = served.call("PUT", "/limits/key:tenant-a", None, Some(r#"{"weight": 3}"#));
    assert_eq!((status, &answer["weight"]), (200, &json!(3)), "{answer}");
    for (path, body, code) in [
        ("/limits/queue:api", r#"{"max_running": 0}"#, "invalid"),
        ("/limits/key:tenant-a", r#"{"max_running": 2}"#, "invalid"),
        ("/limits/tenant:a", r#"{"weight": 2}"#, "invalid"),
        // As a task's add says them: JSON that is no change is `invalid`, a body not JSON `invalid-json`.
        ("/limits/queue:api", r#"{"colour": "red"}"#, "invalid"),
        ("/limits/queue:api", r#"{"max_running": "3"}"#, "invalid"),
        ("/limits/queue:api", "{nope", "invalid-json"),
    ] {
        let (status, answer) = served.call("PUT", path, None, Some(body));
        assert_eq!((status, &answer["error"]["code"]), (400, &json!(code)), "{path} {body}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
    }
    let (_, answer) = served.call("PUT", "/limits/queue:api", None, Some(r#"{"max_running": "3"}"#));
    assert!(
        answer["error"]["message"].as_str().is_some_and(|m| m.contains("\"max_running\"")),
        "names the field: {answer}"
    );
    let (status, answer) = served.call("GET", "/limits", None, None);
    let names: Vec<String> = answer["limits"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|l| format!("{}:{}", l["scope"].as_str().unwrap_or(""), l["target"].as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!((status, names), (200, vec!["key:tenant-a".to_string(), "queue:api".to_string()]), "{answer}");
    assert_eq!(answer["limits"][1]["max_running"], json!(3), "the bad changes changed nothing: {answer}");
    assert_eq!(
        served.call("DELETE", "/limits/queue:api", None, None),
        (200, json!({"name": "queue:api", "changed": true}))
    );
    assert_eq!(served.call("DELETE", "/limits/queue:api", None, None).1["changed"], json!(false));
    let (_, answer) = served.call("GET", "/limits", None, None);
    assert_eq!(answer["limits"].as_array().map(Vec::len), Some(1), "{answer}");
}

/// What a limit holds back and what each key holds, the longest-waiting first, as the API, the
/// metrics and `taskhost queues` show them (no worker: every task stays due).
async fn keys_and_what_limits_hold_back_are_shown_by_the_api_the_metrics_and_the_cli(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    for key in ["tenant-a", "tenant-a", "tenant-a", "tenant-b"] {
        let task = taskhost::model::NewTask::new("echo", "{}").with_queue("keyed").with_key(key);
        env.app.client.add(task).await.expect("add");
    }
    let o = run(&env, &["limits", "set", "queue:keyed", "--max-running", "1", "--max-running-per-key", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let served = Served::start(&env, "127.0.0.1:0");
    let (status, answer) = served.call("GET", "/keys?queue=keyed", None, None);
    let keys: Vec<(&str, u64)> = answer["keys"]
        .as_array()
        .map(|k| k.iter().map(|k| (k["key"].as_str().unwrap_or(""), k["due"].as_u64().unwrap_or(0))).collect())
        .unwrap_or_default();
    assert_eq!((status, keys), (200, vec![("tenant-a", 3), ("tenant-b", 1)]), "a has waited longest: {answer}");
    for bad in ["/keys?limit=0", "/keys?limit=1001", "/keys?colour=red"] {
        let (status, answer) = served.call("GET", bad, None, None);
        assert_eq!(status, 400, "{bad}: {answer}");
    }
    let (_, queues) = served.call("GET", "/queues", None, None);
    assert_eq!(queues["queues"][0]["held_back"], json!(3), "room for one of four: {queues}");
    let (_, limits) = served.call("GET", "/limits", None, None);
    assert_eq!(limits["limits"][0]["held_back"], json!(3), "{limits}");
    let (status, _, metrics) = served.page("/metrics");
    assert_eq!(status, 200);
    for line in [
        "taskhost_limit{limit=\"queue:keyed\",value=\"max_running\"} 1\n",
        "taskhost_limit_held_back{limit=\"queue:keyed\"} 3\n",
        "taskhost_limit_due{limit=\"queue:keyed\"} 4\n",
        "taskhost_key_tasks{queue=\"keyed\",key=\"tenant-a\",state=\"due\"} 3\n",
        "taskhost_key_wait_seconds{queue=\"keyed\",key=\"tenant-b\"} ",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    let listed = stdout(&run(&env, &["queues", "--keys"]));
    let lines: Vec<Vec<&str>> = listed.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["KEY", "QUEUE", "DUE", "LATER", "RUNNING", "WAIT", "WEIGHT", "FUEL/RUN"], "{listed}");
    assert_eq!(lines[1][..5], ["tenant-a", "keyed", "3", "0", "0"], "{listed}");
    let queues = stdout(&run(&env, &["queues"]));
    assert!(queues.lines().next().is_some_and(|l| l.contains(" HELD ")), "{queues}");
    let row: Vec<&str> = queues.lines().nth(1).map(|l| l.split_whitespace().collect()).unwrap_or_default();
    assert_eq!(row[..7], ["keyed", "4", "0", "0", "1", "-", "3"], "{queues}");
    let o = run(&env, &["queues", "--queue", "keyed"]);
    assert!(!o.status.success() && stderr(&o).contains("--keys"), "--queue needs --keys: {}", stderr(&o));
    // A rate per key: one start of each key now, the rest held back.
    let o = run(&env, &["limits", "set", "queue:paced", "--rate-per-key", "1/1h", "--burst-per-key", "0"]);
    assert!(o.status.success() && stdout(&o).contains("rate per key 1/1h"), "{}{}", stdout(&o), stderr(&o));
    for key in ["x", "x", "x", "y"] {
        let task = taskhost::model::NewTask::new("echo", "{}").with_queue("paced").with_key(key);
        env.app.client.add(task).await.expect("add");
    }
    let (_, limits) = served.call("GET", "/limits", None, None);
    let paced = &limits["limits"][1];
    assert_eq!(
        (&paced["target"], &paced["rate_per_key"], &paced["held_back"]),
        (&json!("paced"), &json!("1/1h"), &json!(2))
    );
    let listed = stdout(&run(&env, &["limits"]));
    let row: Vec<&str> =
        listed.lines().find(|l| l.starts_with("queue:paced")).unwrap_or("").split_whitespace().collect();
    assert_eq!(row[..11], ["queue:paced", "-", "-", "-", "-", "1/1h", "-", "-", "keep", "0", "4"], "{listed}");
    // A queue's successes deleted: set, shown, and a word it does not know refused in one line.
    let o = run(&env, &["limits", "set", "queue:paced", "--on-success", "delete"]);
    assert!(o.status.success() && stdout(&o).contains("on success delete"), "{}{}", stdout(&o), stderr(&o));
    let (_, limits) = served.call("GET", "/limits", None, None);
    assert_eq!(limits["limits"][1]["on_success"], json!("delete"));
    let o = run(&env, &["limits", "set", "queue:paced", "--on-success", "sometimes"]);
    assert!(!o.status.success() && stderr(&o).contains("\"sometimes\" is neither keep nor delete"), "{}", stderr(&o));
    let o = run(&env, &["limits", "set", "handler:echo", "--on-success", "delete"]);
    assert!(
        !o.status.success() && stderr(&o).contains("a handler takes max_running and a rate only"),
        "{}",
        stderr(&o)
    );
    let o = run(&env, &["limits", "set", "queue:paced", "--on-success", "keep"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Keys weighed by fuel: set, shown, and refused where it means nothing.
    let o = run(&env, &["limits", "set", "queue:paced", "--fuel-per-turn", "5000000"]);
    assert!(o.status.success() && stdout(&o).contains("fuel per turn 5000000"), "{}{}", stdout(&o), stderr(&o));
    let (_, limits) = served.call("GET", "/limits", None, None);
    assert_eq!(limits["limits"][1]["fuel_per_turn"], json!(5_000_000), "{limits}");
    let listed = stdout(&run(&env, &["limits"]));
    assert!(listed.lines().any(|l| l.starts_with("queue:paced") && l.contains(" 5000000 ")), "{listed}");
    for (bad, why) in [
        (["limits", "set", "queue:paced", "--fuel-per-turn", "10"], "fuel_per_turn = 10 is out of range"),
        (["limits", "set", "key:x", "--fuel-per-turn", "5000000"], "a key takes a weight only"),
        (["limits", "set", "queue:paced", "--fuel-per-turn", "lots"], "--fuel-per-turn lots"),
    ] {
        let o = run(&env, &bad);
        assert!(!o.status.success() && stderr(&o).contains(why), "{bad:?}: {}", stderr(&o));
    }
    let o = run(&env, &["limits", "set", "handler:echo", "--rate-per-key", "5/1s"]);
    assert!(
        !o.status.success() && stderr(&o).contains("a handler takes max_running and a rate only"),
        "{}",
        stderr(&o)
    );
}

on_every_database!(
    keys_and_what_limits_hold_back_are_shown_by_the_api_the_metrics_and_the_cli,
    bad_requests_get_a_json_error_and_lose_nothing,
    bulk_actions_and_deletes_touch_only_the_tasks_they_may,
    limits_are_listed_set_and_cleared_through_the_api
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_roles_are_enforced_and_only_loopback_is_open_without_one() {
    let mut env = Env::new(&["echo"]).await;
    let o = taskhost_command(&env).args(["serve", "--listen", "0.0.0.0:0"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: refusing to listen on 0.0.0.0:0 without a token"), "{}", stderr(&o));
    let (write, read) = ("w-0123456789abcdef", "r-0123456789abcdef");
    env.set_config(&format!(
        "[api]\ntokens = [{{ name = \"app\", token = \"{write}\", role = \"write\" }}, \
         {{ name = \"dash\", token = \"{read}\", role = \"read\" }}]\n\
         [handlers.echo.grants]\nenv = [\"TASKHOST_TEST_SECRET\"]\n"
    ))
    .await;
    let served = Served::start(&env, "127.0.0.1:0");
    let task = Some(r#"{"handler": "echo"}"#);
    assert_eq!(served.call("POST", "/tasks", None, task).0, 401);
    assert_eq!(served.call("POST", "/tasks", Some("wrong-token-0123456789"), task).0, 401);
    let (status, answer) = served.call("POST", "/tasks", Some(read), task);
    assert_eq!((status, answer["error"]["code"].as_str()), (403, Some("forbidden")), "{answer}");
    let (status, added) = served.call("POST", "/tasks", Some(write), task);
    assert_eq!(status, 201, "{added}");
    assert_eq!(served.call("GET", &format!("/tasks/{}", added["id"]), Some(read), None).0, 200);
    assert_eq!(served.call("GET", "/tasks", None, None).0, 401);
    // The scheme's case aside, as HTTP has it; a refusal says which scheme it takes.
    assert_eq!(served.raw("GET", "/tasks", &format!("authorization: bearer {read}\r\n"), "").0, 200);
    let (status, head, _) = served.exchange("GET", "/api/v1/tasks", "", "");
    assert_eq!(status, 401);
    assert!(head.to_ascii_lowercase().contains("www-authenticate: bearer"), "{head}");
    assert_eq!(served.call("GET", "/health", None, None).0, 200, "health needs no token");
    // A plugin's grants are shown by name: the value of a granted variable never leaves.
    let (status, plugins) = served.call("GET", "/plugins", Some(read), None);
    let echo = &plugins["plugins"][0];
    assert_eq!((status, &echo["name"], &echo["ok"]), (200, &json!("echo"), &json!(true)), "{plugins}");
    assert_eq!(echo["grants"]["env"], json!(["TASKHOST_TEST_SECRET"]), "{plugins}");
    assert!(echo["sha256"].as_str().is_some_and(|d| d.len() == 64), "{plugins}");
    assert_eq!(echo["limits"]["fuel"], json!(taskhost::sandbox::Limits::DEFAULT_FUEL), "{plugins}");
    assert!(!plugins.to_string().contains("hunter2-value"), "{plugins}");
    // A short token is refused when the file is read.
    let file = env.config.clone().expect("the configuration file");
    std::fs::write(&file, "[api]\ntokens = [{ name = \"x\", token = \"short\", role = \"read\" }]\n").expect("write");
    let o = taskhost_command(&env).args(["serve", "--listen", "127.0.0.1:0"]).output().expect("run");
    assert!(stderr(&o).contains("[api] tokens[0] (x): a token is at least 16 characters"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_statistics_and_runners_are_read_and_controlled() {
    let env = Env::new(&["echo"]).await;
    let nightly = taskhost::schedule::NewSchedule::new("nightly", "0 3 * * *", "echo");
    env.app.client.add_schedule(&nightly).await.expect("schedule");
    let served = Served::start(&env, "127.0.0.1:0");
    let (status, list) = served.call("GET", "/schedules", None, None);
    assert_eq!((status, list["schedules"][0]["name"].as_str()), (200, Some("nightly")), "{list}");
    assert_eq!(served.call("POST", "/schedules/nightly/pause", None, None).0, 200);
    let (_, list) = served.call("GET", "/schedules", None, None);
    assert!(!list["schedules"][0]["paused_on"].is_null(), "{list}");
    let (status, answer) = served.call("POST", "/schedules/nope/pause", None, None);
    assert_eq!((status, answer["error"]["code"].as_str()), (404, Some("not-found")), "{answer}");
    let (status, answer) = served.call("POST", "/schedules/nightly/trigger", None, None);
    assert_eq!(status, 201, "{answer}");
    let task = answer["task"].as_i64().expect("the task's id");
    // A worker runs it: the runner is listed, and the statistics count the run.
    let worker = spawn_worker(&env, &[]);
    wait_until(Duration::from_secs(30), "the worker is listed", || async {
        served.call("GET", "/runners", None, None).1["runners"].as_array().is_some_and(|r| r.len() == 1)
    })
    .await;
    wait_until(Duration::from_secs(30), "the triggered task ran", || async {
        served.call("GET", &format!("/tasks/{task}"), None, None).1["task"]["last_status"] == "success"
    })
    .await;
    let (status, stats) = served.call("GET", "/stats?handler=echo", None, None);
    assert_eq!((status, &stats["stats"][0]["runs"]["succeeded"]), (200, &json!(1)), "{stats}");
    assert_eq!(served.call("GET", "/stats?colour=red", None, None).0, 400);
    // The same run in the chart's series, a minute at a time (it may have crossed a minute).
    let (status, series) = served.call("GET", "/stats/throughput?minutes=2&handler=echo", None, None);
    let minutes = series["minutes"].as_array().expect("minutes");
    let ran: i64 = minutes.iter().filter_map(|m| m["runs"]["succeeded"].as_i64()).sum();
    assert_eq!((status, minutes.len(), ran), (200, 2, 1), "{series}");
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}
