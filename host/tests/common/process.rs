//! The `taskhost` binary as a user runs it: commands, worker processes, signals, exits.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{taskhost_command, Env};

/// Run `taskhost ARGS` to its end.
pub fn run(env: &Env, args: &[&str]) -> Output {
    taskhost_command(env).args(args).output().expect("run taskhost")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `taskhost add ARGS`; the new task's id.
pub fn add(env: &Env, args: &[&str]) -> i64 {
    let o = run(env, &[&["add"], args].concat());
    assert!(o.status.success(), "add failed: {}", stderr(&o));
    stdout(&o).trim().parse().expect("add prints the new id")
}

/// Start `taskhost worker ARGS`, its output captured.
pub fn spawn_worker(env: &Env, args: &[&str]) -> Child {
    taskhost_command(env)
        .arg("worker")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn worker")
}

/// Send `sig` (e.g. "TERM") to the process.
pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").arg(format!("-{sig}")).arg(child.id().to_string()).status().expect("kill");
    assert!(ok.success(), "kill -{sig} failed");
}

/// Wait for the process to exit, at most `within`; its output.
pub async fn wait_exit(mut child: Child, within: Duration) -> Output {
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tick.tick().await;
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        assert!(start.elapsed() < within, "the process did not exit within {within:?}");
    }
}
