//! A database server stopped and started under a running worker: the worker logs, backs off,
//! reconnects and drains the queue; nothing is lost and it does not crash.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::process::Killed;
use crate::common::{self, own_server, wait_until, Db, Env};
use taskhost::model::{NewTask, RunStatus};

/// Whether `db`'s own server answers.
fn up(db: Db) -> bool {
    let (program, args): (&str, &[&str]) = match db {
        Db::Postgres => ("pg_isready", &["-q", "-h", "127.0.0.1", "-p", "5433"]),
        _ => ("mariadb-admin", &["--socket=/run/mysqld/restarts.sock", "ping"]),
    };
    Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn spawn_worker(env: &Env) -> Killed {
    Killed::from(
        common::taskhost_command(env)
            .args(["worker", "--concurrency", "8", "--poll-interval", "20ms", "--shutdown-grace", "2s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker"),
    )
}

/// Counts the worker's warnings of a failed attempt (a claim, a check for due work) as they come;
/// reading its stderr also keeps a full pipe from ever blocking it.
fn failed_attempts(worker: &mut Child) -> Arc<AtomicUsize> {
    let err = worker.stderr.take().expect("stderr");
    let failed = Arc::new(AtomicUsize::new(0));
    let seen = failed.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("WARN") && line.contains("failed") {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    failed
}

pub async fn survives_a_restart(db: Db) {
    let mut env = Env::on_own_server(db, &["echo", "spin"]).await;
    // The slow run below must still be running when the server goes: fuel and deadline far beyond.
    env.set_config("[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"1h\"\n").await;
    let mut worker = spawn_worker(&env);
    let failed = failed_attempts(&mut worker);
    let first: Vec<i64> = env
        .app
        .client
        .add_many((0..200).map(|_| NewTask::new("echo", "{}")).collect())
        .await
        .expect("add")
        .iter()
        .map(|a| a.id)
        .collect();
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(60), "the first tasks ran", || async {
        store.counts().await.map(|c| c.success == 200).unwrap_or(false)
    })
    .await;
    own_server(db, "stop");
    assert!(!up(db), "the server is down");
    // Down for a while: the worker keeps failing to claim (three more times) and must not exit.
    let before = failed.load(Ordering::SeqCst);
    wait_until(Duration::from_secs(60), "the worker tried three more times", || async {
        failed.load(Ordering::SeqCst) >= before + 3
    })
    .await;
    assert!(worker.try_wait().expect("try_wait").is_none(), "the worker is still up while the database is down");
    own_server(db, "start");
    wait_until(Duration::from_secs(60), "the server is back", || async { up(db) }).await;
    let more = env.app.client.add_many((0..200).map(|_| NewTask::new("echo", "{}")).collect()).await.expect("add");
    wait_until(Duration::from_secs(120), "the worker drained the queue after the restart", || async {
        store.counts().await.map(|c| c.success == 400).unwrap_or(false)
    })
    .await;
    for id in first.iter().chain(more.iter().map(|a| &a.id)).step_by(37) {
        assert_eq!(store.runs_of(*id).await.expect("runs")[0].status, RunStatus::Success);
    }
    // A run in flight whose outcome cannot be written: the database goes away under it, and the
    // worker is asked to stop. Its grace (2 s) bounds the shutdown all the same.
    let slow = env.app.client.add(NewTask::new("spin", "{}")).await.expect("add").id;
    wait_until(Duration::from_secs(60), "the slow run started", || async {
        store.runs_of(slow).await.is_ok_and(|r| r.first().is_some_and(|r| r.status == RunStatus::Running))
    })
    .await;
    own_server(db, "stop");
    let asked = std::time::Instant::now();
    Command::new("kill").args(["-TERM", &worker.id().to_string()]).status().expect("kill");
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    while worker.try_wait().expect("try_wait").is_none() {
        assert!(asked.elapsed() < Duration::from_secs(4), "the worker stops within its grace (and two seconds)");
        tick.tick().await;
    }
    let stopped_after = asked.elapsed();
    let status = worker.wait().expect("wait");
    assert!(status.success(), "the worker exits cleanly though the database is down");
    eprintln!("stopped {stopped_after:?} after SIGTERM with the database down");
    own_server(db, "start");
    wait_until(Duration::from_secs(60), "the server is back", || async { up(db) }).await;
    // Nothing lost: the run is left to the overseer (still running, its runner found dead later).
    assert_eq!(store.runs_of(slow).await.expect("runs")[0].status, RunStatus::Running);
}
