//! Snooze (issue 47): a handler ends a run with "not now", and its task is due again after the time
//! it asked for, without a failure and without using an attempt. Each SDK's webhook example turns an
//! API's 429 with `Retry-After` into a snooze in one line; the operator bounds snoozes a task.
//! Through a real worker on a SQLite file and a local server, the clock injected.

use std::time::Duration;

use crate::common;

use common::http::HttpServer;
use common::{drain_config, Env};
use serde_json::json;
use taskhost::model::{NewTask, RunStatus, TaskState};

const AFTER: i64 = 30;

/// `handler`'s webhook is answered 429 with `Retry-After: 30` `busy` times, then 200; a task with one
/// attempt allowed snoozes each time (due 30 s after its run ended), then succeeds.
async fn snoozes_while_the_api_is_busy(handler: &str, busy: usize, config: &str, dated: bool) -> (Env, i64) {
    let server = HttpServer::start("127.0.0.1").await;
    let (mut env, clock) = Env::manual(&[handler]).await;
    let grant = format!("[handlers.{handler}.grants.http]\nallow = [\"{}\"]\n", server.url("/"));
    env.set_config(&format!("{config}\n{grant}")).await;
    let url = server.url(&format!("/busy?times={busy}&after={AFTER}{}", if dated { "&dated=1" } else { "" }));
    // One attempt allowed: a snooze that used one would end the task. The bound's own test
    // allows five, so that only `too-many-snoozes` being final can end it.
    let attempts = if config.contains("max_snoozes") { 5 } else { 1 };
    let task = NewTask::new(handler, json!({ "url": url }).to_string()).with_max_attempts(attempts);
    let id = env.app.client.add(task).await.expect("add").id;
    for round in 1..=busy {
        let report = env.drain(drain_config()).await;
        assert_eq!(report.runs_finished, 1, "{handler}, round {round}: {report:?}");
        let (task, runs) = env.app.client.show(id).await.expect("show");
        if task.state != TaskState::Scheduled {
            return (env, id);
        }
        let run = runs.last().expect("a run");
        assert_eq!((run.status, run.attempt), (RunStatus::Snoozed, 1), "{handler}: {:?}", run.error_message);
        assert_eq!(task.snoozes as usize, round, "{handler}");
        let ended = run.finished_on.expect("ended");
        assert_eq!(task.scheduled_on, ended + chrono::Duration::seconds(AFTER), "{handler}: due after Retry-After");
        let again = env.drain(drain_config()).await;
        assert_eq!(again.runs_finished, 0, "{handler}: not due before its snooze ends");
        clock.advance(chrono::Duration::seconds(AFTER));
    }
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, 1, "{handler}: {report:?}");
    assert_eq!(server.seen().len(), busy + 1, "{handler}: one request a run");
    (env, id)
}

async fn ends_well_after_two_snoozes(handler: &str, dated: bool) {
    let (env, id) = snoozes_while_the_api_is_busy(handler, 2, "", dated).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.state, task.snoozes, task.task_runs_failed), (TaskState::Succeeded, 2, 0), "{handler}");
    let seen: Vec<_> = runs.iter().map(|r| (r.attempt, r.status)).collect();
    let snoozed = (1, RunStatus::Snoozed);
    assert_eq!(seen, vec![snoozed, snoozed, (1, RunStatus::Success)], "{handler}: no attempt used");
    assert!(runs.iter().all(|r| r.error_code.is_none()), "{handler}: a snooze is no failure");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_sdk_snoozes_on_429_until_retry_after_using_no_attempt() {
    ends_well_after_two_snoozes("webhook", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_snoozes_on_429_until_retry_after_using_no_attempt() {
    ends_well_after_two_snoozes("py-webhook", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_sdk_snoozes_on_429_until_retry_after_using_no_attempt() {
    ends_well_after_two_snoozes("js-webhook", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_c_sdk_snoozes_on_429_until_retry_after_using_no_attempt() {
    ends_well_after_two_snoozes("c-webhook", false).await;
}

/// A C handler has no wall clock (without WASI preview 1): it counts a Retry-After given as an HTTP
/// date from the answer's own `Date`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_c_sdk_counts_a_retry_after_date_from_the_answers_date() {
    ends_well_after_two_snoozes("c-webhook", true).await;
}

/// Past `[tasks] max_snoozes` the run that snoozes once more fails as `too-many-snoozes`, and the
/// task is dead: it is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_snoozes_past_the_operators_bound_is_a_dead_letter() {
    let (env, id) = snoozes_while_the_api_is_busy("webhook", 5, "[tasks]\nmax_snoozes = 2", false).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.state, task.snoozes), (TaskState::Dead, 2));
    let last = runs.last().expect("runs");
    assert_eq!((runs.len(), last.status, last.error_code.as_deref()), (3, RunStatus::Error, Some("too-many-snoozes")));
    let message = last.error_message.as_deref().unwrap_or("");
    assert!(message.contains("snoozed 2 times") && message.contains("max_snoozes"), "{message}");
}

/// A snooze longer than 30 days is refused by the host, and the SDK ends the run
/// `invalid-snooze`; an API's `Retry-After` past 30 days is cut to 30 days by the SDK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snooze_over_thirty_days_is_refused_by_name_and_a_longer_retry_after_is_cut_to_thirty_days() {
    let server = HttpServer::start("127.0.0.1").await;
    let (mut env, _clock) = Env::manual(&["fan-out", "webhook"]).await;
    env.set_config(&format!("[handlers.webhook.grants.http]\nallow = [\"{}\"]\n", server.url("/"))).await;
    let too_long = Duration::from_secs(31 * 24 * 3600);
    let data = json!({ "items": [], "snooze_ms": too_long.as_millis() as u64 }).to_string();
    let refused = env.app.client.add(NewTask::new("fan-out", data)).await.expect("add").id;
    let url = server.url(&format!("/busy?times=1&after={}", too_long.as_secs()));
    let cut = env.app.client.add(NewTask::new("webhook", json!({ "url": url }).to_string())).await.expect("add").id;
    env.drain(drain_config()).await;
    let (task, runs) = env.app.client.show(refused).await.expect("show");
    assert_eq!((task.state, runs[0].error_code.as_deref()), (TaskState::Dead, Some("invalid-snooze")));
    let message = runs[0].error_message.as_deref().unwrap_or("");
    assert!(message.contains("30 days"), "{message}");
    let (task, runs) = env.app.client.show(cut).await.expect("show");
    assert_eq!((task.state, runs[0].status), (TaskState::Scheduled, RunStatus::Snoozed));
    let ended = runs[0].finished_on.expect("ended");
    assert_eq!(task.scheduled_on - ended, chrono::Duration::days(30));
}

/// The host interface a component imports, as `wasm-tools component wit` prints it.
fn imports_of(name: &str) -> String {
    let out = std::process::Command::new(common::wasm_tools())
        .args(["component", "wit"])
        .arg(common::component(name))
        .output()
        .expect("wasm-tools runs");
    let wit = String::from_utf8_lossy(&out.stdout).into_owned();
    wit.lines().filter(|l| l.contains("import taskhost:plugin/host@")).collect()
}

/// `echo` is built against `taskhost:plugin@0.1.0`, `webhook` against 0.2.0: one worker runs both,
/// 0.1.0's task and host calls as before (its partial results checked against its limit by the host).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_built_against_0_1_0_runs_beside_one_built_against_0_2_0() {
    assert!(imports_of("echo").contains("host@0.1.0"), "{}", imports_of("echo"));
    assert!(imports_of("webhook").contains("host@0.2.0"), "{}", imports_of("webhook"));
    let server = HttpServer::start("127.0.0.1").await;
    let mut env = Env::new(&["echo", "webhook"]).await;
    let grant = format!("[handlers.webhook.grants.http]\nallow = [\"{}\"]\n", server.url("/"));
    env.set_config(&format!("[handlers.echo]\nlimits = {{ max_results_bytes = 96 }}\n{grant}")).await;
    let add = |handler: &str, data: serde_json::Value| NewTask::new(handler, data.to_string());
    let client = &env.app.client;
    let told = client.add(add("echo", json!({"attempt_echo": true}))).await.expect("add").id;
    let refused = client.add(add("echo", json!({"partial": "x".repeat(200)}))).await.expect("add").id;
    let new = client.add(add("webhook", json!({ "url": server.url("/ok") }))).await.expect("add").id;
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, 3, "{report:?}");
    let (_, runs) = client.show(told).await.expect("show");
    let results: serde_json::Value = serde_json::from_str(runs[0].results.as_deref().unwrap_or("")).expect("JSON");
    assert_eq!((results["task_id"].as_i64(), results["attempt"].as_u64()), (Some(told), Some(1)), "{results}");
    let (_, runs) = client.show(refused).await.expect("show");
    let message = runs[0].error_message.as_deref().unwrap_or("");
    assert_eq!(runs[0].error_code.as_deref(), Some("partial-refused"), "{message}");
    assert!(message.contains("over this handler's limit of 96 bytes"), "{message}");
    let (task, runs) = client.show(new).await.expect("show");
    assert_eq!(task.state, TaskState::Succeeded, "{:?}", runs[0].error_message);
}
