//! Many machines, one clock: worker processes whose clocks are set apart with libfaketime (from
//! Debian's `faketime`; `make test` installs it) judge what is due and who is alive on the database server's
//! time, on PostgreSQL and MariaDB. (SQLite serves one machine: its clock is the machine's.)

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::process::{add, signal, skewed, stderr, wait_exit, Killed};
use common::{taskhost_command, wait_until, Db, Env};
use taskhost::model::RunStatus;

fn skewed_worker(env: &Env, offset: &str, args: &[&str]) -> std::process::Child {
    let mut cmd = taskhost_command(env);
    cmd.arg("worker").args(args);
    skewed(offset, cmd).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn faketime worker")
}

/// Queued on a correct clock `--in 30m`, a task is not due for a worker whose clock is an hour
/// fast (its claim asked on its own clock would have taken it); one due now runs, and its run is
/// stamped with the database's time. The worker says how far off its clock is.
async fn a_worker_an_hour_fast_runs_nothing_before_it_is_due(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let later = add(&env, &["echo", "--data", "{}", "--in", "30m"]);
    let now = add(&env, &["echo", "--data", "{}"]);
    let worker = Killed(Some(skewed_worker(&env, "+1h", &["--drain", "--no-overseer"])));
    let out = wait_exit(worker.take(), Duration::from_secs(60)).await;
    let log = stderr(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("this machine's clock is 1h ahead of the database's"), "the skew is told: {log}");
    let store = &env.app.store;
    let waiting = store.get_task(later).await.expect("get").expect("exists");
    assert_eq!(waiting.last_status, RunStatus::Scheduled, "a task due in 30 minutes waits: {waiting:?}");
    let runs = store.runs_of(later).await.expect("runs");
    assert!(runs.is_empty(), "never claimed, so no run yet: {runs:?}");
    let ran = store.runs_of(now).await.expect("runs");
    assert_eq!(ran[0].status, RunStatus::Success, "{ran:?}");
    let started = ran[0].started_on.expect("started");
    let server = store.server_time().await.expect("server time").expect("a server has a clock");
    assert!((server - started).num_seconds().abs() < 60, "started {started}, the server says {server}: not +1h");
}

/// A live worker whose clock is two minutes slow, heartbeating every second, is not declared
/// dead by an overseer on a correct clock with a 4 s horizon (its heartbeats would look two
/// minutes old): its run ends on its own deadline, and the worker stays registered.
async fn a_live_worker_two_minutes_slow_is_not_declared_dead(db: Db) {
    let mut env = Env::on(db, &["spin"]).await;
    env.set_config(
        "[handlers.spin.limits]\nfuel = 1_000_000_000_000_000\ndeadline = \"6s\"\n\
         [overseer.liveness]\ninterval = \"1s\"\nheartbeat_horizon = \"4s\"\n",
    )
    .await;
    let id = add(&env, &["spin", "--data", "{}", "--max-attempts", "1"]);
    let args = ["--no-overseer", "--heartbeat-interval", "1s", "--heartbeat-horizon", "4s", "--log", "info"];
    let worker = Killed(Some(skewed_worker(&env, "-2m", &args)));
    let overseer =
        Killed(Some(taskhost_command(&env).arg("overseer").stderr(Stdio::piped()).spawn().expect("overseer")));
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(60), "the run has ended", || async {
        store.runs_of(id).await.expect("runs").last().is_some_and(|r| r.finished_on.is_some())
    })
    .await;
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].error_code.as_deref(), Some("deadline"), "its own deadline, not runner-lost: {runs:?}");
    let runner = runs[0].runner_id.expect("a runner ran it");
    let live = store.live_runners().await.expect("runners");
    assert!(live.iter().any(|r| r.id == runner), "the worker is alive: {live:?}");
    let (worker, overseer) = (worker.take(), overseer.take());
    signal(&overseer, "TERM");
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(60)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let o = wait_exit(overseer, Duration::from_secs(60)).await;
    assert!(o.status.success(), "{}", stderr(&o));
}

on_every_database!(@db postgres, Postgres, a_worker_an_hour_fast_runs_nothing_before_it_is_due, a_live_worker_two_minutes_slow_is_not_declared_dead);
on_every_database!(@db mysql, MySql, a_worker_an_hour_fast_runs_nothing_before_it_is_due, a_live_worker_two_minutes_slow_is_not_declared_dead);
