//! The trust model, tested with hostile plugins and guests of our own: a plugin's author cannot
//! grant itself anything or raise its limits, the plugins directory is never followed through a
//! link, a guest cannot make the host copy more than its limits allow, cannot take another run's
//! share of the pools, and cannot impersonate the host.

use crate::common;

use common::{drain_config, Env};
use taskhost::model::{NewTask, RunStatus};
use taskhost::sandbox::{Limits, RunControl};

/// Queue one `flood` task with `data`, drain, and return its only run.
async fn flood(env: &Env, data: serde_json::Value) -> taskhost::model::Run {
    let id = env.app.client.add(NewTask::new("flood", data.to_string()).with_max_attempts(1)).await.expect("add").id;
    env.drain(drain_config()).await;
    env.app.client.show(id).await.expect("show").1.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_cannot_grant_anything() {
    let env = Env::new(&["probe"]).await;
    env.write_manifest("probe", "[grants]\nenv = [\"TASKHOST_DATABASE_URL\"]\n");
    let err = env.app.client.add(NewTask::new("probe", "{}")).await.expect_err("refused");
    assert!(err.to_string().contains("only the operator grants"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_can_lower_limits_but_never_raise_them() {
    let env = Env::new(&["echo", "spin"]).await;
    env.write_manifest(
        "echo",
        "[limits]\nfuel = 1_000_000_000_000_000\nmemory_mb = 4096\ndeadline = \"9223372036854775807s\"\n\
         max_results_bytes = 67108864\nmax_log_bytes = 16777216\ntable_elements = 10000000\n",
    );
    let echo = env.app.catalog.load("echo").expect("load");
    assert_eq!(echo.limits, Limits::default(), "every raise is lowered to the operator's limit");
    env.write_manifest("spin", "[limits]\nfuel = 1000\ndeadline = \"2s\"\n");
    let spin = env.app.catalog.load("spin").expect("load");
    assert_eq!((spin.limits.fuel, spin.limits.deadline.as_secs()), (1000, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absurd_deadline_in_a_manifest_runs_normally() {
    // Once accepted as it was, this deadline overflowed inside the run and panicked the worker.
    let env = Env::new(&["echo"]).await;
    env.write_manifest("echo", "[limits]\ndeadline = \"9223372036854775807s\"\n");
    let id = env.app.client.add(NewTask::new("echo", r#"{"ok": 1}"#)).await.expect("add").id;
    env.drain(drain_config()).await;
    assert_eq!(env.app.client.show(id).await.expect("show").0.last_status, RunStatus::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_limit_in_a_manifest_is_one_clear_error() {
    let env = Env::new(&["echo"]).await;
    env.write_manifest("echo", "[limits]\ndeadline = \"0s\"\n");
    let err = env.app.client.add(NewTask::new("echo", "{}")).await.expect_err("refused");
    assert!(err.to_string().contains("deadline") && err.to_string().contains("out of range"), "{err}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_linked_to_a_secret_is_refused_without_quoting_it() {
    let env = Env::new(&["echo"]).await;
    let secret = env.dir.path().join("shadow");
    std::fs::write(&secret, "root:$6$the-hash:19000:0:99999:7:::\n").expect("secret");
    std::os::unix::fs::symlink(&secret, env.plugins.join("echo.toml")).expect("link");
    let err = env.app.client.add(NewTask::new("echo", "{}")).await.expect_err("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(!err.to_string().contains("the-hash"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_manifest_is_reported_without_its_values() {
    let env = Env::new(&["echo"]).await;
    env.write_manifest("echo", "[limits]\nfuel = \"root:$6$the-hash\"\n");
    let err = env.app.client.add(NewTask::new("echo", "{}")).await.expect_err("refused");
    assert!(err.to_string().contains("line 2"), "{err}");
    assert!(!err.to_string().contains("the-hash"), "{err}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_linked_from_elsewhere_is_refused() {
    let env = Env::new(&[]).await;
    std::os::unix::fs::symlink(common::component("echo"), env.plugins.join("echo.wasm")).expect("link");
    let err = env.app.client.add(NewTask::new("echo", "{}")).await.expect_err("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let reports = env.app.catalog.reload();
    assert!(reports[0].status.as_ref().is_err_and(|e| e.contains("symbolic link")), "{reports:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_over_the_size_limit_is_refused_before_it_is_read() {
    let mut env = Env::new(&[]).await;
    env.set_config("[plugins]\nmax_component_mb = 1\n").await;
    let file = std::fs::File::create(env.plugins.join("huge.wasm")).expect("create");
    file.set_len(3 << 30).expect("a 3 GiB sparse file");
    let err = env.app.client.add(NewTask::new("huge", "{}")).await.expect_err("refused");
    assert!(err.to_string().contains("over the limit of 1048576 bytes"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_pinned_to_a_digest_hold_only_for_that_component() {
    let mut env = Env::new(&["probe"]).await;
    let digest = env.app.catalog.load("probe").expect("load").digest.clone();
    env.set_config(&format!("[handlers.probe]\ndigest = \"{digest}\"\n[handlers.probe.grants]\nenv = [\"HOME\"]\n"))
        .await;
    assert_eq!(env.app.catalog.load("probe").expect("pinned digest matches").grants.env.len(), 1);
    env.copy_plugin("echo", "probe");
    let err = env.app.catalog.load("probe").expect_err("another component is refused");
    assert!(err.to_string().contains("pins probe"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_configuration_out_of_range_is_one_clear_error() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("operator.toml");
    std::fs::write(&path, "[limits]\nmemory_mb = 0\n").expect("write");
    let err = taskhost::config::Policy::load(&path).expect_err("refused");
    assert!(err.to_string().contains("memory_mb") && err.to_string().contains("out of range"), "{err}");
    std::fs::write(&path, "[[handlers.probe.grants.dirs]]\nhost = \"/no/such/dir\"\nguest = \"/data\"\n").expect("w");
    let err = taskhost::config::Policy::load(&path).expect_err("refused");
    assert!(err.to_string().contains("/no/such/dir"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_log_line_is_refused_before_the_host_copies_it() {
    let env = Env::new(&["flood"]).await;
    let run = flood(&env, serde_json::json!({"log_bytes": 50 << 20})).await;
    assert_eq!((run.status, run.error_code.as_deref()), (RunStatus::Error, Some("transfer-too-large")));
    assert_eq!(run.error_source(), Some(taskhost::sandbox::ErrorSource::Host));
    assert!(run.error_message.as_deref().unwrap_or("").contains("refused before copying"), "{:?}", run.error_message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_results_are_refused_before_the_host_copies_them() {
    let env = Env::new(&["flood"]).await;
    let run = flood(&env, serde_json::json!({"return_bytes": 50 << 20})).await;
    assert_eq!(run.error_code.as_deref(), Some("transfer-too-large"), "{:?}", run.error_message);
    let run = flood(&env, serde_json::json!({"results_bytes": 50 << 20})).await;
    assert_eq!(run.error_code.as_deref(), Some("transfer-too-large"), "{:?}", run.error_message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_error_code_and_message_are_capped() {
    let env = Env::new(&["flood"]).await;
    let run = flood(&env, serde_json::json!({"code_bytes": 10_000, "message_bytes": 500_000})).await;
    let (code, message) = (run.error_code.expect("code"), run.error_message.expect("message"));
    assert!(code.len() <= 128 && code.ends_with('…'), "{} bytes", code.len());
    assert!(message.len() <= 8 << 10, "{} bytes", message.len());
    assert!(message.ends_with("[cut: 500000 bytes in all]"), "{}", &message[message.len() - 60..]);
    // A message past what one call may carry is refused as a whole.
    let run = flood(&env, serde_json::json!({"message_bytes": 50 << 20})).await;
    assert_eq!(run.error_code.as_deref(), Some("transfer-too-large"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_cannot_return_a_host_error_code() {
    let env = Env::new(&["flood"]).await;
    let run = flood(&env, serde_json::json!({"code": "deadline", "message": "I timed out, honest"})).await;
    assert_eq!((run.status, run.error_code.as_deref()), (RunStatus::Error, Some("guest-deadline")));
    assert!(run.error_message.as_deref().unwrap_or("").contains("reserved for the host"), "{:?}", run.error_message);
    assert_eq!(run.error_source(), Some(taskhost::sandbox::ErrorSource::Guest));
    // `show` says who produced the error, in words and in JSON.
    let shown = common::taskhost_command(&env).args(["show", &run.task_id.to_string()]).output().expect("show");
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("guest-deadline (from the handler)"), "{text}");
    let json =
        common::taskhost_command(&env).args(["show", &run.task_id.to_string(), "--json"]).output().expect("show");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["runs"][0]["error_source"], "guest", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_cannot_write_a_host_log_line() {
    let env = Env::new(&["flood"]).await;
    let run = flood(&env, serde_json::json!({"log": "fine\n[host] denied network access (forged)\r\nmore"})).await;
    let logs = run.logs.expect("logs");
    assert!(logs.lines().all(|l| !l.starts_with("[host]")), "{logs}");
    assert!(logs.starts_with("[info] fine\\n[host] denied"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_bytes_from_a_guest_are_stored_as_replacement_characters() {
    let env = Env::new(&["flood"]).await;
    let run = flood(&env, serde_json::json!({"nul": true})).await;
    assert_eq!(run.error_code.as_deref(), Some("nul_code"), "codes keep to identifier characters");
    assert_eq!(run.error_message.as_deref(), Some("nul\u{FFFD}message"));
    assert!(run.logs.as_deref().unwrap_or("").contains("a\u{FFFD}line"), "{:?}", run.logs);
}

/// A component made of `n` instances of an empty core module, in the component text format.
fn many_instances(n: usize) -> Vec<u8> {
    let mut wat = String::from("(component (core module $m)");
    for _ in 0..n {
        wat.push_str(" (core instance (instantiate $m))");
    }
    wat.push(')');
    let dir = tempfile::tempdir().expect("dir");
    let (src, out) = (dir.path().join("c.wat"), dir.path().join("c.wasm"));
    std::fs::write(&src, wat).expect("write");
    let status = std::process::Command::new(common::wasm_tools()).arg("parse").arg(&src).arg("-o").arg(&out).status();
    assert!(status.expect("wasm-tools").success());
    std::fs::read(out).expect("component")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_holding_more_than_one_runs_share_of_the_pools_is_refused_at_load() {
    let env = Env::new(&[]).await;
    env.write_plugin_bytes("greedy", &many_instances(400));
    let catalog = env.app.catalog.clone();
    let err = tokio::task::spawn_blocking(move || catalog.load("greedy")).await.expect("join").expect_err("refused");
    assert!(matches!(err, taskhost::Error::BrokenHandler { .. }), "{err}");
    let text = err.to_string();
    let bound = format!("maximum of {}", taskhost::sandbox::SandboxConfig::DEFAULT_MAX_CORE_INSTANCES_PER_RUN);
    assert!(
        text.contains("400 core module instances") && text.contains(&bound),
        "names the count and the bound: {text}"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_artifact_others_could_write_is_never_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new(&["noop"]).await;
    let cache = env.dir.path().join("cache");
    let mut config = common::app_config(&env.db_url, &env.plugins);
    config.cache_dir = Some(cache.clone());
    let first = taskhost::App::open(&config).await.expect("open").catalog.reload();
    assert!(!first[0].cached && first[0].status.is_ok(), "{first:?}");
    let again = taskhost::App::open(&config).await.expect("open").catalog.reload();
    assert!(again[0].cached, "a private artifact is loaded from the cache");
    for entry in std::fs::read_dir(&cache).expect("cache") {
        let path = entry.expect("entry").path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    }
    let planted = taskhost::App::open(&config).await.expect("open").catalog.reload();
    assert!(!planted[0].cached && planted[0].status.is_ok(), "compiled again instead: {planted:?}");
}

/// Load the Python example (an 18 MB component that takes seconds and hundreds of MiB to compile)
/// with an empty cache and these compile bounds.
async fn compile_python_within(bounds: &str) -> Result<(), String> {
    let env = Env::new(&["py-stats"]).await;
    let path = env.dir.path().join("operator.toml");
    std::fs::write(&path, format!("[plugins]\n{bounds}\n")).expect("write");
    let mut config = common::app_config(&env.db_url, &env.plugins);
    config.policy = taskhost::config::Policy::load(&path).expect("config");
    config.policy.compile.program = Some(common::compiler());
    config.cache_dir = Some(env.dir.path().join("empty-cache"));
    let app = taskhost::App::open(&config).await.expect("open");
    let catalog = app.catalog.clone();
    tokio::task::spawn_blocking(move || catalog.load("py-stats").map(|_| ()).map_err(|e| e.to_string()))
        .await
        .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_past_its_time_bound_is_refused_naming_the_bound() {
    let err = compile_python_within("compile_timeout = \"1s\"").await.expect_err("too slow");
    assert!(err.contains("handler-broken") || err.contains("cannot be used"), "{err}");
    assert!(err.contains("longer than the bound of 1s"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_past_its_memory_bound_is_refused_naming_the_bound() {
    let err = compile_python_within("compile_memory_mb = 256").await.expect_err("too big");
    assert!(err.contains("memory bound of 256 MiB"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_holding_too_many_handles_is_stopped() {
    let env = Env::new(&["probe"]).await;
    let run = |n: u64| {
        let data = serde_json::json!({ "pollables": n }).to_string();
        let env = &env;
        async move {
            let id = env.app.client.add(NewTask::new("probe", data).with_max_attempts(1)).await.expect("add").id;
            env.drain(drain_config()).await;
            env.app.client.show(id).await.expect("show").1.remove(0)
        }
    };
    let fine = run(500).await;
    assert_eq!(fine.status, RunStatus::Success, "{:?}", fine.error_message);
    let greedy = run(100_000).await;
    assert_eq!((greedy.status, greedy.error_code.as_deref()), (RunStatus::Error, Some("handle-limit")));
    assert!(greedy.error_message.as_deref().unwrap_or("").contains("1024 handles"), "{:?}", greedy.error_message);
}

/// A worker starting with a cold cache claims for the handlers it has ready while a slow one
/// compiles: the Python example (seconds to compile) holds up neither `echo`'s tasks nor the
/// worker's exit on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_compile_holds_up_neither_ready_handlers_nor_the_exit() {
    use common::process::{signal, stderr, wait_exit};
    use std::time::Duration;
    let env = Env::new(&["py-stats", "echo"]).await;
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let worker = common::process::Killed::from(
        std::process::Command::new(env!("CARGO_BIN_EXE_taskhost"))
            .arg("--database-url")
            .arg(&env.db_url)
            .arg("--plugins")
            .arg(&env.plugins)
            .arg("--cache-dir")
            .arg(env.dir.path().join("cold-cache"))
            .args(["--log", "info", "worker", "--shutdown-grace", "2s"])
            .env_remove("TASKHOST_CONFIG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn worker"),
    );
    let store = env.app.store.clone();
    common::wait_until(Duration::from_secs(120), "the echo task ran", || async {
        store.get_task(id).await.expect("get").is_some_and(|t| t.last_status == RunStatus::Success)
    })
    .await;
    let asked = std::time::Instant::now();
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(2 + 10)).await;
    eprintln!("stopped {:?} after SIGTERM", asked.elapsed());
    let log = stderr(&out);
    assert!(out.status.success(), "{log}");
    let ready = |name: &str| log.lines().any(|l| l.contains("plugin ready") && l.contains(&format!("plugin={name}")));
    assert!(ready("echo"), "{log}");
    assert!(!ready("py-stats"), "the Python handler was still compiling when echo's task had run: {log}");
}

/// Run `probe` holding the sandbox's pool for `ms`; returns once the guest runs.
async fn hold_the_pool(
    sandbox: std::sync::Arc<taskhost::sandbox::Sandbox>,
    probe: std::sync::Arc<taskhost::plugins::Plugin>,
    ms: u64,
) -> tokio::task::JoinHandle<taskhost::sandbox::RunResult> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let input = taskhost::sandbox::RunInput {
        task_id: 0,
        run_id: 0,
        attempt: 1,
        handler: "probe".into(),
        data: format!(r#"{{"hold_ms": {ms}}}"#),
        queued_by: None,
        queueing: Default::default(),
    };
    let held = tokio::spawn(async move {
        sandbox
            .run(
                &probe.pre,
                probe.limits,
                &probe.grants,
                input,
                RunControl { progress: Some(tx), ..Default::default() },
            )
            .await
    });
    rx.recv().await.expect("the holder reports progress once it runs: the pool is full");
    held
}

/// A run that cannot start because its sandbox's pool is full (here a run the test holds in the
/// worker's own sandbox, as a library user sharing one may) is put back in the queue without
/// counting as a failure, and runs once there is room; put back longer than the worker's limit,
/// it fails with its own code, `host-busy`, and is retried as any failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_start_is_put_back_uncounted_and_says_so_if_it_waits_too_long() {
    use std::time::Duration;
    let env = Env::new(&["probe", "echo"]).await;
    let mut config = common::app_config(&env.db_url, &env.plugins);
    config.sandbox.pool_instances = 1;
    let app = taskhost::App::open(&config).await.expect("open");
    let probe = app.catalog.get_or_load("probe").expect("probe");
    let sandbox = app.catalog.sandbox().clone();
    let hold = |ms: u64| hold_the_pool(sandbox.clone(), probe.clone(), ms);
    // Put back, then run once the holder is done: one run, attempt 1, no failure counted.
    let held = hold(1500).await;
    let id = app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let cfg = taskhost::runner::WorkerConfig { drain_horizon: Duration::from_secs(60), ..drain_config() };
    common::drain_app(&app, cfg).await;
    assert!(matches!(held.await.expect("holder").outcome, taskhost::sandbox::GuestOutcome::Success(_)));
    let (task, runs) = app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.task_runs_failed, runs.len()), (RunStatus::Success, 0, 1), "{runs:?}");

    // With no time to wait, it fails as host-busy, retryable.
    let held = hold(60_000).await;
    let id = app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let cfg = taskhost::runner::WorkerConfig { put_back_limit: Duration::ZERO, ..drain_config() };
    common::drain_app(&app, cfg).await;
    held.abort();
    let (task, runs) = app.client.show(id).await.expect("show");
    assert_eq!((runs[0].status, runs[0].error_code.as_deref()), (RunStatus::Error, Some("host-busy")), "{runs:?}");
    assert!(runs[0].error_message.as_deref().unwrap_or("").contains("could not start"), "{runs:?}");
    assert_eq!(task.task_runs_failed, 1);
    assert!(task.gave_up_on.is_none(), "retried as any failure");
}
