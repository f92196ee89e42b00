//! The handler SDKs (`sdk/`), through a real worker on a SQLite file, under an HTTP grant against a
//! local server: GET, POST JSON and read JSON back, a non-2xx answer, a timeout, a body over the
//! grant's limit, a destination not granted and a bug in the handler, each a clear error in the
//! handler's own terms; progress and log lines reach the run.

use crate::common;

use common::http::HttpServer;
use common::{drain_config, Env};
use serde_json::{json, Value};
use taskhost::model::{BackoffSettings, NewTask, RunStatus, TaskState};

/// What one task's only run must end with: its results, or its error code and a part of its
/// message, and whether the task is then retried.
enum Expect {
    Results(Value),
    Failed { code: &'static str, retried: bool, says: String },
}

fn failed(code: &'static str, retried: bool, says: impl Into<String>) -> Expect {
    Expect::Failed { code, retried, says: says.into() }
}

/// Queue each case for `handler` (two attempts, the retry an hour away), drain, and check each.
async fn check(env: &Env, handler: &str, cases: Vec<(Value, Expect)>) {
    let an_hour = BackoffSettings { base_ms: Some(3_600_000), max_ms: Some(3_600_000) };
    let mut ids = Vec::new();
    for (data, _) in &cases {
        let task = NewTask::new(handler, data.to_string()).with_max_attempts(2).with_backoff(an_hour);
        ids.push(env.app.client.add(task).await.expect("add").id);
    }
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, cases.len() as u64, "{report:?}");
    for (id, (data, expect)) in ids.into_iter().zip(cases) {
        let (task, runs) = env.app.client.show(id).await.expect("show");
        let run = &runs[0];
        let message = run.error_message.as_deref().unwrap_or("");
        match expect {
            Expect::Results(results) => {
                assert_eq!(run.status, RunStatus::Success, "{handler} {data}: {message}");
                let got: Value = serde_json::from_str(run.results.as_deref().unwrap_or("null")).expect("JSON");
                assert_eq!(got, results, "{handler} {data}");
                assert_eq!(run.percents_completed, 100, "{handler} {data}: progress reached the run");
                let logs = run.logs.as_deref().unwrap_or("");
                assert!(logs.contains("[info] calling "), "{handler} {data}: the log line reached the run: {logs}");
            }
            Expect::Failed { code, retried, says } => {
                assert_eq!(run.error_code.as_deref(), Some(code), "{handler} {data}: {message}");
                assert!(message.contains(&says), "{handler} {data}: {says:?} not in {message:?}");
                let then = if retried { TaskState::Scheduled } else { TaskState::Dead };
                assert_eq!(task.state, then, "{handler} {data}: retried: {retried}");
            }
        }
    }
}

/// The same webhook in `handler`'s language on the same answers; `own` is what differs: the handler's
/// words for a response over the limit and for a failed request, and a bug's data and report.
async fn webhook_cases(handler: &str, own: Own) {
    let server = HttpServer::start("127.0.0.1").await;
    let elsewhere = HttpServer::start("127.0.0.1").await;
    let mut env = Env::new(&[handler]).await;
    let grant = format!("allow = [\"{}\"]\nmax_response_bytes = 1000", server.url("/"));
    env.set_config(&format!("[handlers.{handler}.grants.http]\n{grant}\n")).await;
    let url = |path: &str| server.url(path);
    let cases = vec![
        (json!({"url": url("/hooks/x")}), Expect::Results(json!({"status": 200, "response": "ok"}))),
        (
            json!({"url": url("/echo"), "payload": {"order": 7, "items": ["é"]}}),
            Expect::Results(json!({"status": 200, "json": {"order": 7, "items": ["é"]}})),
        ),
        (json!({"url": url("/status?code=502")}), failed("http-5xx", true, "answered 502: status 502")),
        (json!({"url": url("/status?code=404")}), failed("http-4xx", false, "answered 404: status 404")),
        (
            json!({"url": url("/hang"), "timeout": 0.5}),
            failed("request-timeout", true, format!("GET {}", url("/hang"))),
        ),
        (json!({"url": url("/trickle"), "timeout": 0.5}), failed("request-timeout", true, own.reading_timeout)),
        // The host's refusal names the run's code; the handler's own words follow it.
        (json!({"url": url("/big?bytes=5000")}), failed("http-limit", false, own.too_large)),
        (json!({"url": elsewhere.url("/x")}), failed("denied", false, own.denied)),
        (json!({"url": "ftp://files"}), failed("request-failed", false, "not an http:// or https:// URL")),
        (own.bug, own.bug_ends),
    ];
    check(&env, handler, cases).await;
    let seen: Vec<_> = server.seen().into_iter().map(|s| (s.method, s.target)).collect();
    let get = |t: &str| ("GET".to_string(), t.to_string());
    let expected = [get("/hooks/x"), ("POST".into(), "/echo".into()), get("/status?code=502"), get("/status?code=404")];
    for request in expected {
        assert!(seen.contains(&request), "{handler}: {request:?} reached the server: {seen:?}");
    }
    assert!(elsewhere.seen().is_empty(), "{handler}: nothing reached the destination not granted");
}

struct Own {
    reading_timeout: &'static str,
    too_large: &'static str,
    denied: &'static str,
    /// Data that makes the handler fail on its own, and how that ends.
    bug: Value,
    bug_ends: Expect,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_requests_under_a_grant_and_names_each_failure_in_the_handlers_terms() {
    let own = Own {
        reading_timeout: "reading the response: ",
        too_large: "response-too-large: GET ",
        denied: "request-denied: GET ",
        bug: json!({"no-url": true}),
        bug_ends: failed("uncaught-exception", true, "KeyError: 'url'\nTraceback (most recent call last):\n  File \"app.py\", line 10, in handle\n    url, payload = task.data[\"url\"]"),
    };
    webhook_cases("py-webhook", own).await;
}

/// The Rust and C SDKs: one blocking request over wasi:http, and a missing url the handler's own error.
fn blocking_client() -> Own {
    Own {
        reading_timeout: "reading the response: connection read timeout",
        too_large: "response-too-large: GET ",
        denied: "request-denied: GET ",
        bug: json!({"no-url": true}),
        bug_ends: failed("invalid-input", false, "data has no \"url\""),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_sdk_requests_under_a_grant_and_names_each_failure_in_the_handlers_terms() {
    webhook_cases("webhook", blocking_client()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_c_sdk_requests_under_a_grant_and_names_each_failure_in_the_handlers_terms() {
    webhook_cases("c-webhook", blocking_client()).await;
}

/// fetch's errors carry no reason (a TypeError, "NetworkError when attempting to fetch resource"):
/// the host's refusal gives the run its code; the SDK's timeout covers the answer and its body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_sdk_requests_under_a_grant_and_names_each_failure_in_the_handlers_terms() {
    let own = Own {
        reading_timeout: "no answer within 0.5 s",
        too_large: "request-failed: GET ",
        denied: "request-failed: GET ",
        bug: json!(null),
        bug_ends: failed("uncaught-exception", true, "TypeError: "),
    };
    webhook_cases("js-webhook", own).await;
}

/// A Python handler imports where it likes: a module named only inside its function was imported
/// when the component was made (none can be found at run time); `sys.exit()` is a failure that says
/// where it was called, not a trap, and is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_handler_imports_inside_its_function_and_its_sys_exit_fails_saying_where() {
    let env = Env::new(&["py-fan-out"]).await;
    let add = |data: Value| env.app.client.add(NewTask::new("py-fan-out", data.to_string()).with_max_attempts(2));
    let median = add(json!({"median_of": [3, 1, 2]})).await.expect("add").id;
    let exit = add(json!({"exit": 3})).await.expect("add").id;
    env.drain(drain_config()).await;
    let (_, runs) = env.app.client.show(median).await.expect("show");
    assert_eq!(runs[0].status, RunStatus::Success, "{:?}", runs[0].error_message);
    assert_eq!(runs[0].results.as_deref(), Some(r#"{"median":2}"#));
    let (task, runs) = env.app.client.show(exit).await.expect("show");
    let message = runs[0].error_message.as_deref().unwrap_or("");
    assert_eq!(runs[0].error_code.as_deref(), Some("exit"), "{message}");
    assert!(message.starts_with("the handler called sys.exit(3)\nTraceback"), "{message}");
    assert!(message.contains("in handle\n    sys.exit(task.data[\"exit\"])"), "where it was called: {message}");
    assert_eq!(task.state, TaskState::Dead, "not retried");
}
