//! The real binary at its limits: memory under guests that use all they may, a worker that has
//! nothing to run, database URLs with passwords, servers that are not there.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{add, run, stderr};
use common::{wait_until, Env};
use taskhost::model::RunStatus;

/// The peak resident memory of a running process, from /proc, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

/// Run hogs (each grows to the default 256 MiB limit) and good tasks through one worker with
/// `args`; returns its peak resident memory and its stderr once the tasks are done.
async fn hogs_through_a_worker(env: &Env, hogs: usize, args: &[&str]) -> (u64, String) {
    let mut ids: Vec<i64> = (0..hogs).map(|_| add(env, &["memory-hog", "--max-attempts", "1"])).collect();
    ids.extend((0..5).map(|i| add(env, &["echo", "--data", &format!(r#"{{"i": {i}}}"#)])));
    let mut child = common::process::Killed::from(
        common::taskhost_command(env)
            .arg("worker")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker"),
    );
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(300), "every task ran", || async {
        let mut done = 0;
        for id in &ids {
            let t = store.get_task(*id).await.expect("task").expect("exists");
            done += usize::from(t.last_status == RunStatus::Success || t.gave_up_on.is_some());
        }
        done == ids.len()
    })
    .await;
    assert!(child.try_wait().expect("wait").is_none(), "the worker is still running");
    let peak = peak_rss(child.id());
    eprintln!("peak RSS {} MiB with {hogs} hogs and {args:?}", peak >> 20);
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let out = child.take().wait_with_output().expect("exit");
    for id in ids.iter().take(hogs) {
        let runs = store.runs_of(*id).await.expect("runs");
        assert_eq!(runs[0].error_code.as_deref(), Some("memory-limit"), "{:?}", runs[0].error_message);
    }
    (peak, stderr(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_at_default_settings_keeps_running_while_guests_use_all_their_memory() {
    let env = Env::new(&["memory-hog", "echo"]).await;
    // Default concurrency (16), memory limit (256 MiB), budget and cap: 16 hogs at once.
    let (peak, err) = hogs_through_a_worker(&env, 24, &[]).await;
    let promise = 16 * (256u64 << 20) + (512 << 20);
    assert!(peak <= promise, "peak RSS {} MiB over the promised {} MiB", peak >> 20, promise >> 20);
    assert!(err.contains("Shutdown") && !err.contains("MemoryCap"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_budget_bounds_how_many_hungry_guests_run_at_once() {
    let env = Env::new(&["memory-hog", "echo"]).await;
    // 512 MiB of guest memory: two 256 MiB hogs at a time, whatever the concurrency.
    let (peak, err) = hogs_through_a_worker(&env, 8, &["--memory-budget-mb", "512"]).await;
    let promise = (512u64 << 20) + (512 << 20);
    assert!(peak <= promise, "peak RSS {} MiB over the promised {} MiB", peak >> 20, promise >> 20);
    assert!(err.contains("Shutdown"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_nothing_to_run_refuses_to_start_and_a_missing_plugins_directory_is_named() {
    let env = Env::new(&[]).await;
    let o = run(&env, &["worker", "--drain"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no usable plugin"), "{}", stderr(&o));
    for args in [&["worker", "--drain"][..], &["plugins"], &["add", "echo"], &["run-once", "echo"]] {
        let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
            .args([&["--database-url", &env.db_url, "--plugins", "/no/such/plugins"][..], args].concat())
            .env_remove("TASKHOST_PLUGINS")
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err, "error: cannot read the plugins directory /no/such/plugins: it does not exist\n", "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_appear_in_messages() {
    for url in [
        "mysql://taskhost:sekrit-pw@127.0.0.1:3306/no_such_db",
        "postgres://postgres:sekrit-pw@127.0.0.1:5432/no_such_db",
        "postgres://u:sekrit-pw@127.0.0.1:1/db",
        "foo://u:sekrit-pw@host/db",
        "postgres://u:sekrit-pw@[::1",
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
            .args(["--database-url", url, "--connect-timeout", "3s", "list"])
            .env_remove("TASKHOST_DATABASE_URL")
            .output()
            .expect("run");
        let err = stderr(&o);
        assert!(!o.status.success(), "{url}");
        assert!(!err.contains("sekrit"), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_there_is_told_apart_quickly() {
    let started = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .args(["--database-url", "postgres://u@127.0.0.1:1/db", "list"])
        .output()
        .expect("run");
    assert!(stderr(&o).contains("connection refused"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("invalid database URL"), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(5), "not the old 10 s wait");
    let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .args(["--database-url", "mysql://u@no-such-host.invalid:3306/db", "list"])
        .output()
        .expect("run");
    assert!(stderr(&o).contains("unknown host"), "{}", stderr(&o));
    let o = Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .args(["--database-url", "postgres://no_such_user@127.0.0.1:5432/test", "list"])
        .output()
        .expect("run");
    assert!(stderr(&o).contains("authentication failed"), "{}", stderr(&o));
}
