//! Guests that misbehave: each run ends with a clear error code, the task follows its retry
//! rules, and the worker carries on with the next task.

use crate::common;

use common::{drain_config, Env};
use taskhost::model::{NewTask, RunStatus};
use taskhost::sandbox::{GuestOutcome, RunControl, RunInput};

async fn run_one(env: &Env, handler: &str, data: &str) -> taskhost::model::Run {
    let id = env.app.client.add(NewTask::new(handler, data).with_max_attempts(1)).await.expect("add").id;
    // A good task after the bad one: the worker must still run it.
    let next = env.app.client.add(NewTask::new("echo", r#"{"after": true}"#)).await.expect("add").id;
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, 2);
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert!(task.gave_up_on.is_some(), "max retries 1: given up after one run");
    let (after, _) = env.app.client.show(next).await.expect("show");
    assert_eq!(after.last_status, RunStatus::Success, "the worker ran the next task");
    runs.into_iter().next().expect("one run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_runs_out_of_fuel() {
    let env = Env::new(&["spin", "echo"]).await;
    env.write_manifest("spin", "[limits]\nfuel = 20_000_000\ndeadline = \"60s\"\n");
    let run = run_one(&env, "spin", "{}").await;
    assert_eq!(run.status, RunStatus::Error);
    assert_eq!(run.error_code.as_deref(), Some("fuel-exhausted"));
    assert_eq!(run.fuel_used, Some(20_000_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_hits_its_deadline() {
    let env = Env::new(&["spin", "echo"]).await;
    env.write_manifest("spin", "[limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"300ms\"\n");
    let run = run_one(&env, "spin", "{}").await;
    assert_eq!(run.status, RunStatus::Timeout);
    assert_eq!(run.error_code.as_deref(), Some("deadline"));
    assert!(run.duration_ms.expect("duration") >= 300);
    // 300 ms of a tight loop burn far more than this; a run stopped for time reports what it burnt.
    assert!(run.fuel_used.unwrap_or(0) > 10_000_000, "fuel used: {:?}", run.fuel_used);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_hog_hits_the_memory_limit() {
    let env = Env::new(&["memory-hog", "echo"]).await;
    env.write_manifest("memory-hog", "[limits]\nmemory_mb = 32\n");
    let run = run_one(&env, "memory-hog", "{}").await;
    assert_eq!(run.status, RunStatus::Error);
    assert_eq!(run.error_code.as_deref(), Some("memory-limit"), "{:?}", run.error_message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbounded_recursion_is_a_stack_overflow() {
    let env = Env::new(&["stack-overflow", "echo"]).await;
    let run = run_one(&env, "stack-overflow", "{}").await;
    assert_eq!(run.error_code.as_deref(), Some("stack-overflow"), "{:?}", run.error_message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_is_reported_as_a_trap() {
    let env = Env::new(&["trap", "echo"]).await;
    let run = run_one(&env, "trap", "{}").await;
    assert_eq!(run.error_code.as_deref(), Some("trap"));
    assert!(run.error_message.as_deref().unwrap_or("").contains("unreachable"), "{:?}", run.error_message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_over_the_limit_are_refused() {
    let env = Env::new(&["echo"]).await;
    env.write_manifest("echo", "[limits]\nmax_results_bytes = 64\n");
    let big = format!(r#"{{"blob": "{}"}}"#, "x".repeat(200));
    let run = run_one(&env, "echo", &big).await;
    assert_eq!(run.error_code.as_deref(), Some("output-too-large"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_with_an_unknown_key_is_refused() {
    let env = Env::new(&["echo"]).await;
    env.write_manifest("echo", "[limits]\nfuel_units = 5\n");
    let err = env.app.client.add(NewTask::new("echo", "{}")).await.expect_err("bad manifest");
    assert!(err.to_string().contains("fuel_units"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_partial_results_are_forwarded_while_the_guest_runs() {
    let env = Env::new(&["echo"]).await;
    let plugin = env.app.catalog.load("echo").expect("load");
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let input = RunInput {
        task_id: 1,
        run_id: 9,
        attempt: 1,
        handler: "echo".into(),
        data: r#"{"progress": [25, 50, 75], "partial": {"step": "halfway"}}"#.into(),
        queued_by: None,
        queueing: Default::default(),
    };
    let r = env
        .app
        .catalog
        .sandbox()
        .run(&plugin.pre, plugin.limits, &plugin.grants, input, RunControl { progress: Some(tx), ..Default::default() })
        .await;
    assert!(matches!(r.outcome, GuestOutcome::Success(_)), "{:?}", r.outcome);
    let mut updates = Vec::new();
    while let Ok(u) = rx.try_recv() {
        assert_eq!(u.run_id, 9);
        updates.push((u.percent, u.results));
    }
    assert!(updates.contains(&(Some(25), None)));
    assert!(updates.contains(&(Some(75), None)));
    assert!(updates.contains(&(None, Some(r#"{"step":"halfway"}"#.to_string()))), "{updates:?}");
    assert!(r.fuel_used > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_components_are_cached_by_digest() {
    let env = Env::new(&["noop"]).await;
    let first = env.app.catalog.reload();
    assert!(first[0].status.is_ok());
    // A second process with the same cache directory loads without compiling.
    let app = env.second_app().await;
    let second = app.catalog.reload();
    assert!(second[0].cached, "loaded from the cache");
    assert_eq!(first[0].digest, second[0].digest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_replacement_keeps_the_previous_good_version() {
    let env = Env::new(&["echo"]).await;
    let good = env.app.catalog.load("echo").expect("load").digest.clone();
    env.write_plugin_bytes("echo", b"\0asm garbage");
    let reports = env.app.catalog.reload();
    assert!(reports[0].status.is_err());
    assert_eq!(env.app.catalog.get("echo").expect("still loaded").digest, good);
    env.copy_plugin("noop", "echo");
    env.app.catalog.reload();
    assert_ne!(env.app.catalog.get("echo").expect("loaded").digest, good, "a good replacement is used");
}

/// Run one probe task to its end and return its only run.
async fn probe(env: &Env, data: serde_json::Value) -> taskhost::model::Run {
    let id = env.app.client.add(NewTask::new("probe", data.to_string()).with_max_attempts(1)).await.expect("add").id;
    env.drain(drain_config()).await;
    env.app.client.show(id).await.expect("show").1.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_file_is_denied_until_the_operator_grants_its_directory() {
    let mut env = Env::new(&["probe"]).await;
    let data_dir = env.dir.path().join("data");
    std::fs::create_dir_all(&data_dir).expect("dir");
    std::fs::write(data_dir.join("secret.txt"), "the secret").expect("file");
    let run = probe(&env, serde_json::json!({"read": "/data/secret.txt"})).await;
    assert_eq!((run.status, run.error_code.as_deref()), (RunStatus::Error, Some("refused")), "{:?}", run.error_message);
    // The host's own files are no closer.
    let host_file = data_dir.join("secret.txt").display().to_string();
    let run = probe(&env, serde_json::json!({"read": host_file})).await;
    assert_eq!(run.error_code.as_deref(), Some("refused"));

    let dir = data_dir.display().to_string();
    env.set_config(&format!("[[handlers.probe.grants.dirs]]\nhost = {dir:?}\nguest = \"/data\"\n")).await;
    let run = probe(&env, serde_json::json!({"read": "/data/secret.txt"})).await;
    assert_eq!(run.status, RunStatus::Success, "{:?}", run.error_message);
    assert_eq!(run.results.as_deref(), Some(r#"{"read":"the secret"}"#));
    // Read-only by default; "rw" allows writing.
    let run = probe(&env, serde_json::json!({"write": "/data/out.txt"})).await;
    assert_eq!(run.error_code.as_deref(), Some("refused"));
    assert!(!data_dir.join("out.txt").exists());
    env.set_config(&format!("[[handlers.probe.grants.dirs]]\nhost = {dir:?}\nguest = \"/data\"\nmode = \"rw\"\n"))
        .await;
    let run = probe(&env, serde_json::json!({"write": "/data/out.txt"})).await;
    assert_eq!(run.status, RunStatus::Success, "{:?}", run.error_message);
    assert_eq!(std::fs::read_to_string(data_dir.join("out.txt")).expect("written"), "written by a guest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_an_environment_variable_is_denied_until_the_operator_grants_it() {
    let mut env = Env::new(&["probe"]).await;
    let home = std::env::var("HOME").expect("HOME is set for the tests");
    let run = probe(&env, serde_json::json!({"env": "HOME"})).await;
    assert_eq!(run.error_code.as_deref(), Some("refused"), "{:?}", run.results);
    env.set_config("[handlers.probe.grants]\nenv = [\"HOME\"]\n").await;
    let run = probe(&env, serde_json::json!({"env": "HOME"})).await;
    assert_eq!(run.status, RunStatus::Success, "{:?}", run.error_message);
    assert_eq!(run.results, Some(serde_json::json!({"env": home}).to_string()));
    let run = probe(&env, serde_json::json!({"env": "PATH"})).await;
    assert_eq!(run.error_code.as_deref(), Some("refused"), "only the granted variable is visible");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_is_refused_before_any_socket_exists() {
    let env = Env::new(&["probe"]).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let addr = listener.local_addr().expect("addr").to_string();
    let run = probe(&env, serde_json::json!({"connect": addr})).await;
    // The handler's own error follows the host's refusal, which is the run's error and log line.
    assert_eq!(run.error_code.as_deref(), Some("denied"), "{:?}", run.error_message);
    let why = "a TCP socket is not granted to handler probe; grants are set in the operator's configuration";
    let message = run.error_message.as_deref().unwrap_or("");
    assert!(message.starts_with(why) && message.contains("refused: connecting to"), "{message}");
    let logs = run.logs.as_deref().unwrap_or("");
    assert!(logs.contains(&format!("[host] socket refused, denied: {why}")), "{logs}");
    listener.set_nonblocking(true).expect("nonblocking");
    assert!(listener.accept().is_err(), "nothing reached the listener");
    // A name is not even looked up: the guest's lookup is refused, and the run says so.
    let port = addr.rsplit(':').next().unwrap_or("1");
    let run = probe(&env, serde_json::json!({"connect": format!("localhost:{port}")})).await;
    assert_eq!(run.error_code.as_deref(), Some("denied"), "{:?}", run.error_message);
    let message = run.error_message.as_deref().unwrap_or("");
    assert!(message.starts_with("name lookup of \"localhost\" is not granted to handler probe"), "{message}");
    // A guest cannot even create a socket: it holds no file descriptor of the worker.
    let run = probe(&env, serde_json::json!({"sockets": 500})).await;
    assert_eq!(run.status, RunStatus::Success, "{:?}", run.error_message);
    let got: serde_json::Value = serde_json::from_str(run.results.as_deref().expect("results")).expect("json");
    assert_eq!(got["sockets"], 0, "{got}");
    let error = got["error"].as_str().unwrap_or("").to_lowercase();
    assert!(error.contains("access"), "refused as access denied: {got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_blocked_in_a_host_call_is_stopped_at_its_deadline() {
    let env = Env::new(&["probe"]).await;
    env.write_manifest("probe", "[limits]\ndeadline = \"300ms\"\n");
    let run = probe(&env, serde_json::json!({"sleep_ms": 3_600_000})).await;
    assert_eq!((run.status, run.error_code.as_deref()), (RunStatus::Timeout, Some("deadline")));
    assert!(run.error_message.as_deref().unwrap_or("").contains("host call"), "{:?}", run.error_message);
    assert!(run.duration_ms.expect("duration") < 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_is_capped() {
    let env = Env::new(&["probe"]).await;
    let run = probe(&env, serde_json::json!({"log_lines": 100_000})).await;
    assert_eq!(run.status, RunStatus::Success);
    let logs = run.logs.expect("logs");
    assert!(logs.len() <= 64 * 1024 + 200, "{} bytes kept", logs.len());
    assert!(logs.lines().all(|l| l.starts_with("[info] ") || l.starts_with("[host] ")), "every line marked");
    assert!(logs.contains("more log lines dropped"), "{}", &logs[logs.len().saturating_sub(200)..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_importing_an_interface_the_host_lacks_is_refused() {
    let env = Env::new(&[]).await;
    env.copy_plugin("greedy-import", "greedy");
    let err = env.app.client.add(NewTask::new("greedy", "{}")).await.expect_err("refused");
    assert!(matches!(err, taskhost::Error::BrokenHandler { .. }), "{err}");
    assert!(err.to_string().contains("test:greedy/backdoor"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_growth_past_the_limit_is_stopped() {
    let env = Env::new(&["table-hog", "echo"]).await;
    env.write_manifest("table-hog", "[limits]\ntable_elements = 5000\n");
    let run = run_one(&env, "table-hog", "{}").await;
    assert_eq!(
        (run.status, run.error_code.as_deref()),
        (RunStatus::Error, Some("table-limit")),
        "{:?}",
        run.error_message
    );
}

/// The pool resets a reused slot's memory by copying back what runs wrote (up to 512 regions:
/// vendor/README.md) and decommitting the rest; whichever way, a run sees none of an earlier one's
/// writes, in the image's pages or in zeroed ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sees_none_of_the_memory_an_earlier_run_wrote() {
    let env = Env::new(&["probe"]).await;
    // 40 image pages written each run, then 40, 300 (under 512 regions), 600 (over) zeroed ones.
    for zeroed in [40, 300, 600, 300, 40] {
        let run = probe(&env, serde_json::json!({ "scatter": zeroed })).await;
        assert_eq!(run.status, RunStatus::Success, "{:?}", run.error_message);
        let results: serde_json::Value = serde_json::from_str(run.results.as_deref().expect("results")).expect("json");
        assert_eq!(results, serde_json::json!({ "stale": 0, "written": 40 + zeroed }), "after {zeroed}");
    }
}
