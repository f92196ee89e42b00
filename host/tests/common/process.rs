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

/// An operator's file for a worker the test kills mid-run: runs of `spin` that last a minute,
/// and an overseer lease of 3 s, which lapses soon after the kill (at the default 30 s, the next
/// worker's overseer waited that long before it could find the dead runner).
pub const KILLED_CONFIG: &str =
    "[overseer]\nlease_ttl = \"3s\"\n[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"60s\"\n";

/// Start `taskhost worker ARGS`, its output captured; killed if the test ends first (a test that
/// failed before its worker's end had left it polling the database for good).
pub fn spawn_worker(env: &Env, args: &[&str]) -> Killed {
    let worker = taskhost_command(env).arg("worker").args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    Killed(Some(worker.expect("spawn worker")))
}

/// Whether the tests run as root (they do in CI).
pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// Send `sig` (e.g. "TERM") to the process.
pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").arg(format!("-{sig}")).arg(child.id().to_string()).status().expect("kill");
    assert!(ok.success(), "kill -{sig} failed");
}

/// Wait for the process to exit, at most `within`; its output. (Killed if it does not.)
pub async fn wait_exit(child: impl Into<Killed>, within: Duration) -> Output {
    let mut child = child.into();
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tick.tick().await;
        if child.try_wait().expect("try_wait").is_some() {
            return child.take().wait_with_output().expect("output");
        }
        assert!(start.elapsed() < within, "the process did not exit within {within:?}");
    }
}

/// `cmd` run with its wall clock moved by `offset` (`+1h`, `-2m`) by Debian's libfaketime,
/// loaded into the process itself (the `faketime` command would stand between the test and
/// it); its monotonic clock, which no machine's time setting moves, is left alone.
pub fn skewed(offset: &str, mut cmd: Command) -> Command {
    let lib = format!("/usr/lib/{}-linux-gnu/faketime/libfaketimeMT.so.1", std::env::consts::ARCH);
    assert!(std::path::Path::new(&lib).exists(), "{lib} is missing: apt-get install faketime");
    cmd.env("LD_PRELOAD", lib).env("FAKETIME", offset).env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    cmd
}

/// A process killed if the test ends before it does (a failing assertion must not leave a
/// worker holding locks on the scratch database, which is dropped next).
pub struct Killed(pub Option<std::process::Child>);

impl Killed {
    pub fn take(mut self) -> std::process::Child {
        self.0.take().expect("taken once")
    }
}

impl From<Child> for Killed {
    fn from(child: Child) -> Killed {
        Killed(Some(child))
    }
}

impl std::ops::Deref for Killed {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("not taken")
    }
}

impl std::ops::DerefMut for Killed {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("not taken")
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
