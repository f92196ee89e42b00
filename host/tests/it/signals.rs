//! Signals (issue 47, `await-signal`): a handler in each SDK waits for a person's go-ahead, its run
//! ending `snoozed` and its task due at the wait's timeout; `taskhost signal` (here the client it
//! calls, and the CLI itself) makes it due at once, and its next run reads the signal's data. A wait
//! that times out answers so; a signal sent first is kept for the wait. Through a real worker on a
//! SQLite file, the clock injected.

use crate::common;

use common::{drain_config, Env};
use serde_json::{json, Value};
use taskhost::model::{RunStatus, TaskState};

fn results(runs: &[taskhost::model::Run]) -> Value {
    let last = runs.last().and_then(|r| r.results.as_deref()).expect("results");
    serde_json::from_str(last).expect("JSON")
}

/// Each SDK's fan-out waits for `go` before fanning out: its first run ends waiting, a second drain
/// runs nothing, the signal wakes it and the next run fans out with the signal's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_in_each_sdk_waits_for_a_signal_and_runs_again_with_its_data_when_sent() {
    let (env, _clock) = Env::manual(&["fan-out", "py-fan-out", "js-fan-out", "c-fan-out", "echo"]).await;
    for handler in ["fan-out", "py-fan-out", "js-fan-out", "c-fan-out"] {
        let data = json!({"items": [1, 2], "approval": "go", "approval_timeout": 3600});
        let id = env.app.client.add(taskhost::NewTask::new(handler, data.to_string())).await.expect("add").id;
        let report = env.drain(drain_config()).await;
        assert_eq!(report.runs_finished, 1, "{handler}: {report:?}");
        let (task, runs) = env.app.client.show(id).await.expect("show");
        let ended = runs[0].finished_on.expect("ended");
        assert_eq!(
            (task.state, runs[0].status, runs[0].attempt),
            (TaskState::Scheduled, RunStatus::Snoozed, 1),
            "{handler}: {:?}",
            runs[0].error_message
        );
        assert_eq!(task.awaiting_signal.as_deref(), Some("go"), "{handler}");
        assert_eq!(task.scheduled_on, ended + chrono::Duration::seconds(3600), "{handler}: due at the timeout");
        assert_eq!(env.drain(drain_config()).await.runs_finished, 0, "{handler}: not due before the signal");

        let sent = env.app.client.signal(id, "go", r#"{"by":"ann"}"#).await.expect("signal");
        assert!(sent.woke, "{handler}: it awaited the signal");
        let report = env.drain(drain_config()).await;
        assert_eq!(report.runs_finished, 3, "{handler}: the fan-out and its two parts: {report:?}");
        let (task, runs) = env.app.client.show(id).await.expect("show");
        assert_eq!(
            (task.state, runs.len(), runs[1].attempt),
            (TaskState::Succeeded, 2, 1),
            "{handler}: no attempt used"
        );
        let got = results(&runs);
        assert_eq!(
            (got["queued"].clone(), got["approval"].clone()),
            (json!(2), json!({"by": "ann"})),
            "{handler}: {got}"
        );
        let signals = env.app.client.signals(id).await.expect("signals");
        assert_eq!(signals.iter().map(|s| s.read_by_run).collect::<Vec<_>>(), vec![Some(runs[1].id)], "{handler}");
    }
}

/// A wait that times out: the task is due at the timeout and its next run finds it timed out (the
/// example then fails `not-approved`, for good). A signal sent before the wait is kept for it: the
/// first run reads it and does not wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_times_out_at_its_time_and_a_signal_sent_first_is_kept_for_the_wait() {
    let (env, clock) = Env::manual(&["fan-out", "echo"]).await;
    let data = json!({"items": [1], "approval": "go", "approval_timeout": 60});
    let late = env.app.client.add(taskhost::NewTask::new("fan-out", data.to_string())).await.expect("add").id;
    assert_eq!(env.drain(drain_config()).await.runs_finished, 1);
    clock.advance(chrono::Duration::seconds(60));
    assert_eq!(env.drain(drain_config()).await.runs_finished, 1, "due at the timeout");
    let (task, runs) = env.app.client.show(late).await.expect("show");
    let failed = (task.state, runs.len(), runs[1].error_code.as_deref());
    assert_eq!(failed, (TaskState::Dead, 2, Some("not-approved")), "{:?}", runs[1].error_message);

    let early = env.app.client.add(taskhost::NewTask::new("fan-out", data.to_string())).await.expect("add").id;
    let sent = env.app.client.signal(early, "go", r#"{"by":"bo"}"#).await.expect("signal");
    assert!(!sent.woke, "it awaited nothing yet");
    assert_eq!(env.drain(drain_config()).await.runs_finished, 2, "the fan-out and its part");
    let (task, runs) = env.app.client.show(early).await.expect("show");
    assert_eq!((task.state, runs.len()), (TaskState::Succeeded, 1), "it never waited");
    assert_eq!(results(&runs)["approval"], json!({"by": "bo"}));
}

/// `taskhost signal` sends one (its data from --data), says whether the task awaited it, and refuses
/// bad input with one line: a finished task, invalid JSON, an empty name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signal_command_sends_one_and_refuses_bad_input_with_one_line() {
    let env = Env::new(&["fan-out", "echo"]).await;
    let data = json!({"items": [], "approval": "go"});
    let id = env.app.client.add(taskhost::NewTask::new("fan-out", data.to_string())).await.expect("add").id;
    env.drain(drain_config()).await;
    let cli = |args: &[&str]| common::taskhost_command(&env).args(args).output().expect("run taskhost");
    let out = cli(&["signal", &id.to_string(), "go", "--data", r#"{"ok":true}"#]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("due now"), "{out:?}");
    env.drain(drain_config()).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.state, results(&runs)["approval"].clone()), (TaskState::Succeeded, json!({"ok": true})));

    let show = cli(&["show", &id.to_string()]);
    assert!(String::from_utf8_lossy(&show.stdout).contains("\"go\" sent"), "{show:?}");
    for (args, says) in [
        (vec!["signal", &*id.to_string(), "go"], "it is succeeded"),
        (vec!["signal", "999999", "go"], "not found"),
        (vec!["signal", &*id.to_string(), "go", "--data", "{nope"], "the signal's data is not valid JSON"),
        (vec!["signal", &*id.to_string(), ""], "empty"),
    ] {
        let out = cli(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    }
}
