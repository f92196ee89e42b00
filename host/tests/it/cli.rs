//! The `taskhost` command as a user runs it: real processes, real signals, a real SQLite file.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::process::{add, run, signal, spawn_worker, stderr, stdout, wait_exit};
use common::{wait_until, Env};
use taskhost::model::RunStatus;
use taskhost::store::{self, SharedStore, StoreOptions};

async fn open(env: &Env) -> SharedStore {
    store::open(&env.db_url, &StoreOptions::default()).await.expect("open")
}

async fn run_status(store: &SharedStore, task: i64) -> Option<RunStatus> {
    store.runs_of(task).await.expect("runs").last().map(|r| r.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_prints_the_id_and_a_draining_worker_runs_the_tasks() {
    let env = Env::new(&["word-count", "echo"]).await;
    let a = add(&env, &["word-count", "--data", r#"{"text": "a b c"}"#, "--queued-by", "cli-test"]);
    let b = add(&env, &["echo", "--priority", "-3", "--max-attempts", "2"]);
    assert_eq!(b, a + 1);
    let o = run(&env, &["worker", "--drain", "--concurrency", "2", "--log", "info"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("Drained") && err.contains("2 runs finished (2 succeeded, 0 failed)"), "{err}");
    let per_run: Vec<_> = err.lines().filter(|l| l.contains("run ended")).collect();
    assert_eq!(per_run.len(), 2, "one line a run: {err}");
    assert!(per_run.iter().all(|l| l.contains("outcome=\"success\"") && l.contains("fuel=")), "{err}");
    assert!(!err.contains('\u{1b}'), "no colours when stderr is not a terminal: {err}");
    let c = add(&env, &["echo"]);
    let o = run(&env, &["worker", "--drain", "--log", "info", "--log-format", "json"]);
    let lines: Vec<serde_json::Value> =
        stderr(&o).lines().map(|l| serde_json::from_str(l).expect("every log line is JSON")).collect();
    let ended: Vec<_> = lines.iter().filter(|l| l["fields"]["message"] == "run ended").collect();
    assert_eq!(ended.len(), 1, "{lines:?}");
    assert_eq!(
        (ended[0]["fields"]["handler"].as_str(), ended[0]["fields"]["outcome"].as_str()),
        (Some("echo"), Some("success"))
    );
    let o = run(&env, &["show", &a.to_string(), "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).expect("show --json");
    assert_eq!(shown["task"]["last_status"], "success");
    assert_eq!(
        shown["allows"],
        serde_json::json!(["replay", "delete"]),
        "a succeeded task runs again or is deleted: {shown}"
    );
    assert_eq!(shown["task"]["queued_by"], "cli-test");
    assert_eq!(shown["runs"][0]["results"], serde_json::json!({"words": 3, "lines": 1, "chars": 5}));
    assert_eq!(shown["task"]["data"], serde_json::json!({"text": "a b c"}), "data is a JSON value");
    assert!(shown["runs"][0]["logs"].is_array(), "logs are an array of lines: {shown}");
    let o = run(&env, &["list", "--status", "success"]);
    let text = stdout(&o);
    assert!(text.contains("word-count") && text.contains("echo"), "{text}");
    assert!(text.lines().next().is_some_and(|h| h.contains("PRIO") && h.contains("DUE (UTC)")), "{text}");
    let first_id = |args: &[&str]| -> Option<i64> {
        let o = run(&env, args);
        stdout(&o).lines().nth(1).and_then(|l| l.split_whitespace().next()).and_then(|id| id.parse().ok())
    };
    assert_eq!(first_id(&["list"]), Some(c), "newest first");
    assert_eq!(first_id(&["list", "--oldest-first"]), Some(a));
    assert_eq!(first_id(&["list", "--offset", "1"]), Some(b));
    assert_eq!(first_id(&["list", "--contains", "a b c"]), Some(a), "text in the data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_one_clear_line_and_a_failing_exit() {
    let env = Env::new(&["echo"]).await;
    for (args, needle) in [
        (vec!["add", "echo", "--data", "{nope"], "task data is not valid JSON"),
        (vec!["add", "missing"], "unknown handler \"missing\""),
        (vec!["show", "12345"], "task 12345 not found"),
        (vec!["retry", "12345"], "task 12345 not found"),
        (
            vec!["list", "--status", "sleeping"],
            "[possible values: waiting, scheduled, running, success, error, timeout, cancelled]",
        ),
    ] {
        let o = run(&env, &args);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .args(["--database-url", "mysql2://x", "list"])
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unknown scheme"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "one line: {}", stderr(&o));
}

/// Each of these once said too little, or too much: now one line says what is wrong and where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_errors_say_what_is_wrong_once() {
    let env = Env::new(&["echo"]).await;
    let lines = env.dir.path().join("at.jsonl");
    std::fs::write(&lines, "{\"handler\": \"echo\"}\n{\"handler\": \"echo\", \"at\": \"tomorrow\"}\n").expect("write");
    let lines = lines.to_str().expect("utf-8");
    for (args, said, code) in [
        (
            vec!["delete-finished", "--older-than", "banana"],
            "error: invalid value 'banana' for '--older-than <OLDER_THAN>': \"banana\" is not a duration (a number is \
             expected first): write a number and a unit, such as 90s, 5m, 2h or 30days",
            2,
        ),
        (
            vec!["add", "--many", lines],
            &*format!("error: {lines}, line 2: \"at\": \"tomorrow\": expected an RFC 3339 time with a zone, e.g. 2026-01-02T03:04:05Z"),
            1,
        ),
        (vec!["schedule", "trigger", "nightly"], "error: no schedule named \"nightly\"", 1),
        (vec!["schedule", "remove", "nightly"], "error: no schedule named \"nightly\"", 1),
    ] {
        let o = run(&env, &args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().next(), Some(said), "{args:?}");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .args(["--database-url", "sqlite:///no/such/dir/q.db", "list"])
        .output()
        .expect("run");
    let said = "error: cannot connect to sqlite:///no/such/dir/q.db: cannot open /no/such/dir/q.db: the directory \
                /no/such/dir does not exist\n";
    assert_eq!((o.status.code(), stderr(&o).as_str()), (Some(1), said));
    assert_eq!(open(&env).await.counts().await.expect("counts").scheduled, 0, "nothing was queued");
    // A pause of a queue no task uses is done, with a note; counts agree with their nouns.
    let o = run(&env, &["pause", "emails"]);
    assert!(o.status.success());
    assert_eq!(
        stderr(&o),
        "note: queue emails holds no unfinished task (`taskhost queues` lists those that do): is the name right?\n"
    );
    add(&env, &["echo"]);
    let o = run(&env, &["cancel", "--queue", "default"]);
    assert_eq!(stdout(&o), "1 task cancelled (0 were running: their workers stop them)\n", "{}", stderr(&o));
    let o = run(&env, &["retry", "--all-cancelled"]);
    assert_eq!(stdout(&o), "1 cancelled task scheduled again\n", "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonsense_values_are_usage_errors_with_exit_status_2() {
    let env = Env::new(&["echo"]).await;
    for (args, needle) in [
        (vec!["worker", "--concurrency", "0"], "must be at least 1"),
        (vec!["worker", "--claim-batch", "0"], "must be at least 1"),
        (vec!["worker", "--queues", ""], "the queue name is empty"),
        (vec!["worker", "--queues", "a,,b"], "the queue name is empty"),
        (vec!["worker", "--poll-interval", "0s"], "longer than zero"),
        (vec!["worker", "--runner-limit", "0"], "--runner-limit"),
        (vec!["add", "echo", "--queue", " "], "must not be empty"),
        (vec!["add", "echo", "--at", "2026-01-02T03:04:05"], "add Z (UTC) or an offset"),
        (vec!["add", "echo", "--at", "tomorrow"], "RFC 3339"),
        (
            vec!["list", "--status", "sleeping"],
            "[possible values: waiting, scheduled, running, success, error, timeout, cancelled]",
        ),
        (vec!["list", "--limit", "0"], "--limit"),
        (vec!["list", "--log", "taskhost=loud"], "not a log filter"),
    ] {
        let o = run(&env, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    // Filters that cannot both hold, refused rather than listing nothing.
    let o = run(&env, &["list", "--dead", "--state", "succeeded"]);
    assert!(!o.status.success() && stderr(&o).contains("--dead lists dead letters"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(run(&env, &["list", "--dead", "--state", "dead"]).status.success());
    let store = open(&env).await;
    assert_eq!(store.counts().await.expect("counts").scheduled, 0, "nothing was queued");
    let o = run(&env, &["add", "echo", "--at", "2026-01-02T03:04:05+01:00"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_says_what_it_applied_and_missing_tables_are_one_line() {
    let env = Env::new(&["echo"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("fresh.db").display());
    let at = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_taskhost"));
        c.arg("--database-url").arg(&url).arg("--plugins").arg(&env.plugins).args(args).output().expect("run")
    };
    let o = at(&["--no-migrate", "list"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no taskhost tables: create them with `taskhost migrate`"), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    let o = at(&["migrate"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("applied 0001 tables\n") && stdout(&o).contains("applied 0012 runs without task key")
    );
    assert_eq!(stdout(&at(&["migrate"])), "database is up to date\n");
    let o = at(&["--no-migrate", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_can_come_from_a_file_or_standard_input() {
    use std::io::Write;
    let env = Env::new(&["echo"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("data.json");
    std::fs::write(&file, r#"{"from": "file"}"#).expect("write");
    let from_file = add(&env, &["echo", "--data", &format!("@{}", file.display())]);
    let mut child = common::taskhost_command(&env)
        .args(["add", "echo", "--data", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(br#"{"from": "stdin"}"#).expect("write stdin");
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", stderr(&o));
    let from_stdin: i64 = stdout(&o).trim().parse().expect("an id");
    let store = open(&env).await;
    for (id, want) in [(from_file, r#"{"from": "file"}"#), (from_stdin, r#"{"from": "stdin"}"#)] {
        assert_eq!(store.get_task(id).await.expect("get").expect("task").data, want);
    }
    let o = run(&env, &["add", "echo", "--data", "@/nonexistent/data.json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("reading the task's data from /nonexistent/data.json"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_many_checks_every_line_before_queueing_any() {
    let env = Env::new(&["echo", "noop"]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };
    let store = open(&env).await;
    for (text, needle) in [
        ("{\"handler\": \"echo\"}\n{\"handler\": \"echo\", \"data\": oops}\n", "line 2: not a task"),
        ("{\"handler\": \"echo\"}\n\n{\"handler\": \"missing\"}\n", "line 3: unknown handler \"missing\""),
        ("{\"handler\": \"echo\", \"colour\": \"red\"}\n", "line 1: not a task"),
        // A field's error names the field, as the API's does.
        ("{\"handler\": \"echo\", \"at\": 123}\n", "line 1: not a task: \"at\": invalid type: integer `123`"),
        ("{\"handler\": \"echo\"} x\n", "line 1: not a task: trailing characters"),
    ] {
        let o = run(&env, &["add", "--many", &write("bad.jsonl", text)]);
        assert_eq!(o.status.code(), Some(1), "{text}");
        assert!(stderr(&o).contains(needle), "{text}: {}", stderr(&o));
        assert_eq!(store.counts().await.expect("counts").scheduled, 0, "nothing queued: {text}");
    }
    let mut text = String::new();
    for i in 0..25 {
        text.push_str(&format!("{{\"handler\": \"noop\", \"data\": {{\"i\": {i}}}, \"priority\": {i}}}\n"));
    }
    text.push_str("{\"handler\": \"echo\", \"queue\": \"mail\", \"unique_key\": \"k\"}\n");
    text.push_str("{\"handler\": \"echo\", \"queue\": \"mail\", \"unique_key\": \"k\"}\n");
    let o = run(&env, &["add", "--many", &write("good.jsonl", &text)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "queued 26 tasks (1 already queued under their unique keys)\n");
    assert_eq!(store.counts().await.expect("counts").scheduled, 26);
    let o = run(&env, &["add", "echo", "--many", "x"]);
    assert_eq!(o.status.code(), Some(2), "a handler and --many conflict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_status_values_and_groups_global_options() {
    let env = Env::new(&["echo"]).await;
    let help = stdout(&run(&env, &["list", "--help"]));
    assert!(
        help.contains("[possible values: waiting, scheduled, running, success, error, timeout, cancelled]"),
        "{help}"
    );
    let (own, global) = help.split_once("Global options:").unwrap_or((&help, ""));
    assert!(own.contains("--dead") && !own.contains("--database-url"), "{help}");
    assert!(global.contains("--database-url") && global.contains("--plugins"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_lists_each_plugin_with_its_digest_and_status() {
    let env = Env::new(&["echo", "noop"]).await;
    env.write_plugin_bytes("broken", b"nope");
    let o = run(&env, &["plugins", "--json"]);
    assert!(!o.status.success(), "a broken plugin makes the command fail");
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let names: Vec<_> = list.as_array().expect("array").iter().map(|p| (p["name"].clone(), p["ok"].clone())).collect();
    assert_eq!(
        names,
        vec![("broken".into(), false.into()), ("echo".into(), true.into()), ("noop".into(), true.into())]
    );
    assert_eq!(list[1]["sha256"].as_str().expect("digest").len(), 64);
    // A handler's max_running from the operator's file is shown.
    let file = env.dir.path().join("limits.toml");
    std::fs::write(&file, "[handlers.echo]\nmax_running = 3\n").expect("write");
    let o = run(&env, &["--config", file.to_str().expect("utf-8"), "plugins"]);
    let table = stdout(&o);
    assert!(table.starts_with("PLUGIN") && table.contains("MAX RUNNING"), "{table}");
    let echo = table.lines().find(|l| l.starts_with("echo ")).unwrap_or_default();
    assert!(echo.contains(" 3  ok"), "{table}");
    let o = run(&env, &["--config", file.to_str().expect("utf-8"), "plugins", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!((list[1]["max_running"].clone(), list[2]["max_running"].clone()), (3.into(), serde_json::Value::Null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_and_plugins_run_without_a_database() {
    let env = Env::new(&["word-count", "fail"]).await;
    // Nothing listens there: a command that opened the database would fail.
    let run_nodb = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_taskhost"));
        c.args(["--database-url", "postgres://nobody@127.0.0.1:1/none", "--plugins"]).arg(&env.plugins);
        c.arg("--cache-dir").arg(common::cache_dir()).args(args).output().expect("run taskhost")
    };
    let o = run_nodb(&["run-once", "word-count", "--data", r#"{"text": "x y"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(r#"success: {"words":2,"lines":1,"chars":3}"#), "{}", stdout(&o));
    let o = run_nodb(&["run-once", "fail"]);
    assert_eq!(o.status.code(), Some(1));
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(all.matches("demo-failure").count(), 1, "the failure is printed once: {all}");
    let o = run_nodb(&["plugins"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("word-count"), "{}", stdout(&o));
    for shell in ["bash", "zsh", "fish"] {
        let o = run_nodb(&["completions", shell]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains("database-url") && stdout(&o).contains("run-once"), "{shell}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_in_flight_run_finish_then_the_runner_ends_cleanly() {
    let mut env = Env::new(&["spin"]).await;
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"1500ms\"\n").await;
    let id = add(&env, &["spin", "--max-attempts", "1"]);
    let store = open(&env).await;
    let worker = spawn_worker(&env, &["--shutdown-grace", "30s"]);
    wait_until(Duration::from_secs(30), "the run is running", || async {
        run_status(&store, id).await == Some(RunStatus::Running)
    })
    .await;
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(30)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs[0].status, RunStatus::Timeout, "it ran to its own deadline");
    assert_eq!(runs[0].error_code.as_deref(), Some("deadline"));
    let runner = runs[0].runner_id.expect("runner");
    assert!(store.live_runners().await.expect("live").iter().all(|r| r.id != runner));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_longer_than_the_grace_period_is_timed_out_at_shutdown() {
    let mut env = Env::new(&["spin"]).await;
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"60s\"\n").await;
    let id = add(&env, &["spin"]);
    let store = open(&env).await;
    let worker = spawn_worker(&env, &["--shutdown-grace", "2s"]);
    wait_until(Duration::from_secs(30), "the run is running", || async {
        run_status(&store, id).await == Some(RunStatus::Running)
    })
    .await;
    signal(&worker, "INT");
    let out = wait_exit(worker, Duration::from_secs(20)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("1 abandoned"), "{}", stderr(&out));
    let task = store.get_task(id).await.expect("get").expect("task");
    assert_eq!(task.last_status, RunStatus::Timeout);
    assert_eq!(task.task_runs_failed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_found_dead_and_its_task_runs_again() {
    let mut env = Env::new(&["spin", "echo"]).await;
    env.set_config(common::process::KILLED_CONFIG).await;
    let id = add(&env, &["spin"]);
    let store = open(&env).await;
    let mut worker = spawn_worker(&env, &[]);
    wait_until(Duration::from_secs(30), "the run is running", || async {
        run_status(&store, id).await == Some(RunStatus::Running)
    })
    .await;
    signal(&worker, "KILL");
    worker.wait().expect("reaped");
    // Swap the handler for one that finishes, then let a new worker (with its overseer) clean up.
    env.remove_plugin("spin");
    env.copy_plugin("echo", "spin");
    let o = run(&env, &["worker", "--drain", "--drain-horizon", "10s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].status, RunStatus::Timeout);
    assert_eq!(runs[0].error_code.as_deref(), Some("runner-lost"));
    assert_eq!(runs[1].status, RunStatus::Success);
    // Failures counted in a row, as the count is: none after the success, beside a timed-out run.
    let shown = stdout(&run(&env, &["show", &id.to_string()]));
    assert!(shown.contains("(last run success, 0 failed in a row of "), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_a_replaced_plugin() {
    let env = Env::new(&["echo", "noop"]).await;
    let store = open(&env).await;
    let worker = spawn_worker(&env, &["--poll-interval", "20ms", "--watch-plugins", "0s"]);
    let first = add(&env, &["echo"]);
    wait_until(Duration::from_secs(30), "the first task ran", || async {
        run_status(&store, first).await == Some(RunStatus::Success)
    })
    .await;
    let old = store.runs_of(first).await.expect("runs")[0].component_digest.clone();
    env.copy_plugin("noop", "echo");
    signal(&worker, "HUP");
    // Runs claimed after the reload use the new component.
    let mut digest = old.clone();
    let mut tries = 0;
    while digest == old {
        tries += 1;
        assert!(tries < 50, "the new component was never used");
        let id = add(&env, &["echo"]);
        wait_until(Duration::from_secs(30), "the task ran", || async {
            run_status(&store, id).await == Some(RunStatus::Success)
        })
        .await;
        digest = store.runs_of(id).await.expect("runs")[0].component_digest.clone();
    }
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(30)).await;
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_over_its_memory_cap_finishes_and_exits() {
    let env = Env::new(&["echo"]).await;
    let o = run(&env, &["worker", "--rss-cap-mb", "1", "--heartbeat-interval", "50ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("MemoryCap"), "{}", stderr(&o));
    let store = open(&env).await;
    assert!(store.live_runners().await.expect("live").is_empty(), "the runner ended itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guests_leave_the_worker_up_with_bounded_memory() {
    let env = Env::new(&["memory-hog", "spin", "stack-overflow", "trap", "probe", "echo"]).await;
    env.write_manifest("memory-hog", "[limits]\nmemory_mb = 64\n");
    env.write_manifest("spin", "[limits]\nfuel = 50_000_000\n");
    let mut hostile = Vec::new();
    for _ in 0..8 {
        hostile.push(add(&env, &["memory-hog", "--max-attempts", "1"]));
    }
    for name in ["spin", "stack-overflow", "trap", "spin", "stack-overflow", "trap"] {
        hostile.push(add(&env, &[name, "--max-attempts", "1"]));
    }
    hostile.push(add(&env, &["probe", "--data", r#"{"log_lines": 50000}"#]));
    let good: Vec<i64> =
        (0..10).map(|i| add(&env, &["echo", "--data", &format!(r#"{{"i": {i}}}"#), "--priority", "1"])).collect();
    // A memory cap well under 8 hogs × 64 MiB: passing it would end the worker early.
    let o =
        run(&env, &["worker", "--drain", "--concurrency", "2", "--rss-cap-mb", "250", "--heartbeat-interval", "20ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("Drained"), "the worker drained rather than hit its memory cap: {}", stderr(&o));
    let store = open(&env).await;
    for id in good {
        assert_eq!(run_status(&store, id).await, Some(RunStatus::Success));
    }
    for id in hostile.iter().take(8) {
        let runs = store.runs_of(*id).await.expect("runs");
        assert_eq!(runs[0].error_code.as_deref(), Some("memory-limit"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugins_directory_is_watched_for_replaced_components() {
    let env = Env::new(&["echo", "noop"]).await;
    let store = open(&env).await;
    let worker = spawn_worker(&env, &["--poll-interval", "20ms", "--watch-plugins", "50ms"]);
    let first = add(&env, &["echo"]);
    wait_until(Duration::from_secs(30), "the first task ran", || async {
        run_status(&store, first).await == Some(RunStatus::Success)
    })
    .await;
    let old = store.runs_of(first).await.expect("runs")[0].component_digest.clone();
    // Replace it the safe way: write beside, then rename over.
    std::fs::copy(common::component("noop"), env.plugins.join("echo.wasm.new")).expect("copy");
    std::fs::rename(env.plugins.join("echo.wasm.new"), env.plugins.join("echo.wasm")).expect("rename");
    let mut tries = 0;
    loop {
        tries += 1;
        assert!(tries < 200, "the replaced component was never used");
        let id = add(&env, &["echo"]);
        wait_until(Duration::from_secs(30), "the task ran", || async {
            run_status(&store, id).await == Some(RunStatus::Success)
        })
        .await;
        if store.runs_of(id).await.expect("runs")[0].component_digest != old {
            break;
        }
    }
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(30)).await;
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_early_ends_a_printing_command_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let env = Env::new(&["echo"]).await;
    let tasks: Vec<String> =
        (0..3000).map(|i| format!("{{\"handler\": \"echo\", \"data\": {{\"n\": {i}}}}}")).collect();
    let file = env.dir.path().join("many.jsonl");
    std::fs::write(&file, tasks.join("\n")).expect("write");
    let o = run(&env, &["add", "--many", file.to_str().expect("path")]);
    assert!(o.status.success(), "{}", stderr(&o));
    // `taskhost completions bash | head -c 16` and `taskhost list | head -c 16`: more than a
    // pipe holds, its reader gone after a few bytes.
    for args in [&["completions", "bash"][..], &["list", "--limit", "3000"][..]] {
        let mut child = common::taskhost_command(&env)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut first = [0u8; 16];
        child.stdout.take().expect("stdout").read_exact(&mut first).expect("the first bytes");
        let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.expect("join").expect("wait");
        let quiet = out.status.success() || out.status.signal() == Some(13); // SIGPIPE, as for git or ls
        assert!(quiet && !stderr(&out).contains("panicked"), "{args:?}: {:?} {}", out.status, stderr(&out));
    }
}

/// A first compile is never a silent wait: on a terminal a spinner names the plugin, its size and
/// the time so far, then the time it took; in the logs one line at its start and one at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_compile_says_what_it_compiles_and_how_long_it_took() {
    let env = Env::new(&["echo"]).await;
    let cache = env.dir.path().join("fresh-cache");
    let o = common::taskhost_command_caching_in(&env, &cache).args(["--log", "info", "run-once", "echo"]).output();
    let err = stderr(&o.expect("run"));
    let start =
        err.lines().position(|l| l.contains("compiling echo (0.") && l.contains("MB), once: the result is cached"));
    let end = err.lines().position(|l| l.contains("compiled echo in ") && l.contains("took_ms="));
    assert!(start.is_some() && start < end, "{err}");
    // On a terminal (a pseudo-terminal from `script`), a spinner and the time it took.
    let cache = env.dir.path().join("fresh-cache-2");
    let command = format!(
        "{} --database-url {} --plugins {} --cache-dir {} run-once echo",
        env!("CARGO_BIN_EXE_taskhost"),
        env.db_url,
        env.plugins.display(),
        cache.display()
    );
    let o = Command::new("script").args(["-qec", &command, "/dev/null"]).output().expect("script (util-linux)");
    let shown = stdout(&o);
    // The first frame's time is the machine's: 0.0s alone, 0.1s or more under load.
    assert!(shown.contains("⠋ compiling echo (0.") && shown.contains("MB; once, then cached) "), "{shown:?}");
    assert!(shown.contains("\r\u{1b}[2Kcompiled echo in "), "{shown:?}");
    // Cached: nothing to say.
    let o = Command::new("script").args(["-qec", &command, "/dev/null"]).output().expect("script");
    assert!(!stdout(&o).contains("compil"), "{:?}", stdout(&o));
}
