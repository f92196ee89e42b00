//! End to end on the database servers: workers, real components, PostgreSQL and MariaDB.

use crate::common;

use std::time::Duration;

use common::{drain_config, Env};
use taskhost::model::{BackoffSettings, NewTask, RunStatus, RunnerStatus, TaskFilter};
use taskhost::runner::WorkerConfig;

async fn runs_tasks_with_results_errors_and_retries(env: Env) {
    let ok = env.app.client.add(NewTask::new("word-count", r#"{"text": "one two three"}"#)).await.expect("add").id;
    let bad = env.app.client.add(NewTask::new("word-count", r#"{"text": 1}"#)).await.expect("add").id;
    let quick = BackoffSettings { base_ms: Some(1), max_ms: Some(1) };
    let retried = env
        .app
        .client
        .add(NewTask::new("fail-until", r#"{"succeed_on_attempt": 2}"#).with_backoff(quick))
        .await
        .expect("add")
        .id;
    let cfg = WorkerConfig { drain_horizon: std::time::Duration::from_secs(5), ..drain_config() };
    env.drain(cfg).await;
    let (task, runs) = env.app.client.show(ok).await.expect("show");
    assert_eq!(task.last_status, RunStatus::Success);
    assert_eq!(runs[0].results.as_deref(), Some(r#"{"words":3,"lines":1,"chars":13}"#));
    let (task, runs) = env.app.client.show(bad).await.expect("show");
    assert_eq!((task.last_status, task.gave_up_on.is_some()), (RunStatus::Error, true));
    assert_eq!(runs[0].error_code.as_deref(), Some("invalid-input"));
    let (task, runs) = env.app.client.show(retried).await.expect("show");
    assert_eq!((task.last_status, runs.len()), (RunStatus::Success, 2));
}

async fn two_workers_never_run_the_same_run(env: Env) {
    let tasks: Vec<_> =
        (0..1000).map(|i| NewTask::new("echo", format!(r#"{{"attempt_echo": true, "i": {i}}}"#))).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let other = env.second_app().await;
    let cfg = WorkerConfig { concurrency: 8, claim_batch: 16, ..drain_config() };
    let (a, b) = tokio::join!(common::drain_app(&env.app, cfg.clone()), common::drain_app(&other, cfg));
    assert_eq!(a.runs_finished + b.runs_finished, 1000);
    let tasks = env.app.client.list(&TaskFilter { limit: Some(10_000), ..Default::default() }).await.expect("list");
    assert_eq!(tasks.len(), 1000);
    for t in tasks {
        assert_eq!(t.last_status, RunStatus::Success);
        let runs = env.app.store.runs_of(t.id).await.expect("runs");
        assert_eq!(runs.len(), 1, "task {} has exactly one run", t.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_tasks_with_results_errors_and_retries_on_postgres() {
    runs_tasks_with_results_errors_and_retries(Env::postgres(&["word-count", "fail-until"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_tasks_with_results_errors_and_retries_on_mysql() {
    runs_tasks_with_results_errors_and_retries(Env::mysql(&["word-count", "fail-until"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_postgres_never_run_the_same_run() {
    two_workers_never_run_the_same_run(Env::postgres(&["echo"]).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_mysql_never_run_the_same_run() {
    two_workers_never_run_the_same_run(Env::mysql(&["echo"]).await).await;
}

/// Queued by another process (here another store on the same database, whose adds do not wake
/// this process's workers in-process): LISTEN/NOTIFY wakes an idle worker, not its poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_is_woken_by_notify_rather_than_its_poll_on_postgres() {
    let env = Env::postgres(&["echo"]).await;
    let other = env.second_app().await;
    common::wakeups::an_idle_worker_runs_what_is_queued_without_a_poll(&env, &other).await;
}

/// A worker asked to stop while its claim waits on another session's lock (here on the rows of
/// the concurrency limits): the claim finishes once the lock goes, within the grace period, and
/// what it claimed goes back to the queue unrun. No failure is counted, the runner ends cleanly
/// (not timed out as lost), and another worker runs the task once. (SQLite shows no lock waits
/// to watch for: only the server databases apply.)
///
/// `locks`: the statements that lock and unlock; `whoami`, which reads the locking session's id
/// (`{locker}` in the next); `waiting`, which counts the sessions waiting on the lock.
async fn a_stop_during_a_claim_puts_what_it_claimed_back<C>(env: Env, locks: [&str; 4])
where
    C: sqlx::Connection,
    for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
    for<'r> i64: sqlx::Decode<'r, C::Database> + sqlx::Type<C::Database>,
    usize: sqlx::ColumnIndex<<C::Database as sqlx::Database>::Row>,
{
    use sqlx::{Executor, Row};
    let [lock, unlock, whoami, waiting] = locks;
    // Set live, not by the worker's file: its start would wait on the lock, not its claim.
    let change = taskhost::model::LimitChange { max_running: Some(Some(5)), ..Default::default() };
    env.app.client.set_limit("queue:default", &change).await.expect("set the limit");
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let mut locker = C::connect(&env.db_url).await.expect("connect");
    let pid: i64 = locker.fetch_one(whoami).await.expect("whoami").try_get(0).expect("an id");
    let waiting = waiting.replace("{locker}", &pid.to_string());
    for statement in lock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("lock");
    }
    let since = chrono::Utc::now() - chrono::Duration::seconds(1);
    let cfg = WorkerConfig { drain: false, shutdown_grace: Duration::from_secs(20), ..drain_config() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(env.app.worker(cfg).run(async move {
        let _ = stopped.await;
    }));
    let mut watcher = C::connect(&env.db_url).await.expect("connect");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        let row = watcher.fetch_one(waiting.as_str()).await.expect("waiting");
        if row.try_get::<i64, _>(0).expect("a count") > 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the claim never waited on the lock");
        tick.tick().await;
    }
    let _ = stop.send(());
    for statement in unlock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("unlock");
    }
    let report = tokio::time::timeout(Duration::from_secs(60), worker).await.expect("stops").expect("join");
    let report = report.expect("worker");
    assert_eq!((report.runs_finished, report.runs_abandoned), (0, 0), "{report:?}");
    let store = &env.app.store;
    let runner = store.runners_seen_since(since).await.expect("runners");
    let runner = runner.iter().find(|r| r.id == report.runner_id).expect("the runner");
    assert_eq!(runner.status, RunnerStatus::Success, "ended by itself, not found lost: {runner:?}");
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, runs.len()), (RunStatus::Scheduled, 0), "put back, its run gone: {runs:?}");
    env.drain(drain_config()).await;
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!((task.last_status, task.task_runs_failed, runs.len()), (RunStatus::Success, 0, 1), "{runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_a_claim_puts_what_it_claimed_back_on_postgres() {
    let env = Env::postgres(&["echo"]).await;
    // The limit's row: a claim locks it, while reading the limits does not wait on it.
    let lock = "BEGIN; SELECT name FROM task_run_limits WHERE name = 'queue:default' FOR UPDATE";
    let whoami = "SELECT pg_backend_pid()::bigint";
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE {locker} = ANY(pg_blocking_pids(pid))";
    let locks = [lock, "COMMIT", whoami, waiting];
    a_stop_during_a_claim_puts_what_it_claimed_back::<sqlx::PgConnection>(env, locks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_a_claim_puts_what_it_claimed_back_on_mysql() {
    let env = Env::mysql(&["echo"]).await;
    let waiting = "SELECT count(*) FROM information_schema.processlist
                   WHERE id <> connection_id() AND db = database() AND info LIKE '%task_run_limits%FOR UPDATE%'";
    let lock = "START TRANSACTION; SELECT name FROM task_run_limits WHERE name = 'queue:default' FOR UPDATE";
    let unlock = "COMMIT";
    let locks = [lock, unlock, "SELECT CAST(connection_id() AS SIGNED)", waiting];
    a_stop_during_a_claim_puts_what_it_claimed_back::<sqlx::MySqlConnection>(env, locks).await;
}

/// A capped worker claims its next run when its last is written, not at its poll (ten minutes
/// here), on each database.
mod a_capped_worker_claims_again_once_its_runs_are_written {
    use super::*;

    async fn case(db: common::Db) {
        let env = Env::on(db, &["echo"]).await;
        common::wakeups::a_capped_worker_claims_again_once_its_runs_are_written(&env).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_sqlite() {
        case(common::Db::Sqlite).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_postgres() {
        case(common::Db::Postgres).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_mysql() {
        case(common::Db::MySql).await
    }
}
