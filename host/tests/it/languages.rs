//! Handlers written in other languages, built from source by plugins/build.sh, run end to end
//! through a worker: results, progress, logs and the handler-error path.

use crate::common;

use common::{drain_config, Env};
use taskhost::model::{BackoffSettings, NewTask, RunStatus};

async fn run_tasks(env: &Env, handler: &str, good: &str, bad: &str) -> (taskhost::model::Run, taskhost::model::Run) {
    let ok = env.app.client.add(NewTask::new(handler, good)).await.expect("add").id;
    let err = env.app.client.add(NewTask::new(handler, bad)).await.expect("add").id;
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, 2);
    let ok_run = env.app.client.show(ok).await.expect("show").1.remove(0);
    let (task, mut runs) = env.app.client.show(err).await.expect("show");
    assert!(task.gave_up_on.is_some(), "a non-retryable handler error ends the task");
    (ok_run, runs.remove(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_handler_runs_end_to_end() {
    let env = Env::new(&["py-stats"]).await;
    let (ok, err) =
        run_tasks(&env, "py-stats", r#"{"numbers": [2, 4, 4, 4, 5, 5, 7, 9]}"#, r#"{"numbers": "x"}"#).await;
    assert_eq!(ok.status, RunStatus::Success, "{:?}", ok.error_message);
    let r: serde_json::Value = serde_json::from_str(ok.results.as_deref().expect("results")).expect("json");
    assert_eq!((r["count"].as_u64(), r["mean"].as_f64(), r["stdev"].as_f64()), (Some(8), Some(5.0), Some(2.0)));
    assert_eq!(ok.percents_completed, 100);
    assert!(ok.logs.as_deref().unwrap_or("").contains("8 numbers"), "{:?}", ok.logs);
    assert_eq!(err.error_code.as_deref(), Some("invalid-input"));
    assert!(err.error_message.as_deref().unwrap_or("").contains("numbers"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_handler_runs_end_to_end() {
    let env = Env::new(&["js-words"]).await;
    let (ok, err) = run_tasks(&env, "js-words", r#"{"text": "b a b\nc b a", "top": 2}"#, r#"{"words": 1}"#).await;
    assert_eq!(ok.status, RunStatus::Success, "{:?}", ok.error_message);
    assert_eq!(ok.results.as_deref(), Some(r#"{"distinct":3,"top":[{"word":"b","count":3},{"word":"a","count":2}]}"#));
    assert_eq!(ok.percents_completed, 100);
    assert!(ok.logs.as_deref().unwrap_or("").contains("3 distinct words"), "{:?}", ok.logs);
    assert_eq!(err.error_code.as_deref(), Some("invalid-input"));
    // What docs/handlers.md says the runtime has, used by the example.
    let id = env.app.client.add(NewTask::new("js-words", r#"{"text": "héllo wörld\nzed", "extras": true}"#)).await;
    env.drain(drain_config()).await;
    let (_, runs) = env.app.client.show(id.expect("add").id).await.expect("show");
    let r: serde_json::Value = serde_json::from_str(runs[0].results.as_deref().unwrap_or("null")).expect("json");
    let x = &r["extras"];
    assert_eq!(x["utf8_bytes"], 17, "{r}");
    assert_eq!(x["by_length"], serde_json::json!({"1": ["h", "w"], "3": ["llo", "rld", "zed"]}), "{r}");
    assert_eq!(x["sorted"], serde_json::json!(["h", "llo", "rld", "w", "zed"]), "{r}");
    assert_eq!((x["query"].as_str(), x["base64"].as_str()), (Some("q=h%C3%A9llo+w%C3%B6rld"), Some("aOlsbG8=")), "{r}");
    assert_eq!(
        (&x["round_trip"], &x["big"], &x["uuid_length"], &x["year_ok"]),
        (&true.into(), &"1180591620717411303424".into(), &36.into(), &true.into())
    );
}

/// A handler's bug, in Python, JavaScript or Rust, ends the same way: `uncaught-exception`,
/// retried, its message the exception's type and text then its traceback, without the runtime's
/// noise ("unreachable instruction executed", the runtime's own panic); what it printed is in the
/// run's logs. Python and Rust trap after printing; the JavaScript example reports its `Error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncaught_exception_ends_the_same_way_in_every_language() {
    let env = Env::new(&["py-stats", "js-words", "trap"]).await;
    let mut ids = Vec::new();
    let an_hour = BackoffSettings { base_ms: Some(3_600_000), max_ms: Some(3_600_000) };
    for (handler, data) in
        [("py-stats", r#"{"crash": "py-boom"}"#), ("js-words", r#"{"crash": "js-boom"}"#), ("trap", r#""panic""#)]
    {
        // The retry is an hour away, so the drain cannot run it however slow the first runs are.
        let task = NewTask::new(handler, data).with_max_attempts(2).with_backoff(an_hour);
        ids.push(env.app.client.add(task).await.expect("add").id);
    }
    env.drain(drain_config()).await;
    let starts = [
        "RuntimeError: crash requested: py-boom\nTraceback (most recent call last):\n  File \"/0/app.py\"",
        "Error: crash requested: js-boom\n",
        "panic: no item 7 among 0\n  at trap/src/lib.rs:",
    ];
    for (id, start) in ids.into_iter().zip(starts) {
        let (task, runs) = env.app.client.show(id).await.expect("show");
        eprintln!("{}: {:?}", task.handler, runs[0].error_message);
        let message = runs[0].error_message.as_deref().unwrap_or("");
        assert_eq!(runs[0].error_code.as_deref(), Some("uncaught-exception"), "{message}");
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Scheduled, 1), "retried (max_attempts 2)");
        assert!(message.starts_with(start), "{message}");
        for noise in ["unreachable", "runtime/src/lib.rs", "RUST_BACKTRACE", "the guest's last output"] {
            assert!(!message.contains(noise), "{noise} in {message}");
        }
    }
    let (_, runs) = env.app.client.show(1).await.expect("show");
    let logs = runs[0].logs.as_deref().unwrap_or("");
    assert!(logs.contains("[stdout] about to crash\n") && logs.contains("[stderr] Traceback"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_components_compile_once_and_load_from_the_cache() {
    let env = Env::new(&["py-stats", "js-words"]).await;
    env.app.catalog.reload();
    // Another process with the same cache directory: no compilation.
    let app = env.second_app().await;
    let reports = app.catalog.reload();
    assert_eq!(reports.len(), 2);
    for r in &reports {
        assert!(r.status.is_ok(), "{}: {:?}", r.name, r.status);
        assert!(r.cached, "{} was compiled again", r.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_handler_runs_end_to_end() {
    let env = Env::new(&["c-checksum"]).await;
    let (ok, err) = run_tasks(&env, "c-checksum", r#"{"text":"Wikipedia"}"#, r#""fail""#).await;
    assert_eq!(ok.status, RunStatus::Success, "{:?}", ok.error_message);
    // Adler-32 of the 20 bytes {"text":"Wikipedia"}, as zlib computes it.
    assert_eq!(ok.results.as_deref(), Some(r#"{"bytes":20,"adler32":1234241303,"fnv1a":966831771}"#));
    assert_eq!(ok.percents_completed, 100);
    assert!(ok.logs.as_deref().unwrap_or("").contains("checksummed 20 bytes"), "{:?}", ok.logs);
    assert_eq!(err.error_code.as_deref(), Some("invalid-input"));
}
