//! A run that succeeds stays on its task's row (issue 51), seen in the tables themselves: a success
//! writes no `task_runs` row, a replay writes it there once, and a row an older version replayed
//! (which leaves the kept run's columns set) is never taken for a kept run.

use sqlx::{Connection, Row};
use taskhost::model::{ClaimedRun, NewTask, NextStep, RunEnd, RunOutcome, RunStatus};
use taskhost::sandbox::{ErrorSource, Failure, FailureKind};
use taskhost::store::{self, SharedStore, StoreOptions};

use crate::common;

const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);

/// The first column of the first row of `sql`, an integer.
async fn number(url: &str, sql: &str) -> i64 {
    let n = if url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
        sqlx::query(sql).fetch_one(&mut c).await.and_then(|r| r.try_get::<i64, _>(0))
    } else if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
        sqlx::query(sql).fetch_one(&mut c).await.and_then(|r| r.try_get::<i64, _>(0))
    } else {
        let mut c = sqlx::MySqlConnection::connect(url).await.expect("connect");
        sqlx::query(sql).fetch_one(&mut c).await.and_then(|r| r.try_get::<i64, _>(0))
    };
    n.unwrap_or_else(|e| panic!("{url}: {sql}: {e}"))
}

/// Run `sql`, a statement an older version would have written.
async fn run(url: &str, sql: &str) {
    let done = if url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
        sqlx::query(sql).execute(&mut c).await.map(|_| ())
    } else if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
        sqlx::query(sql).execute(&mut c).await.map(|_| ())
    } else {
        let mut c = sqlx::MySqlConnection::connect(url).await.expect("connect");
        sqlx::query(sql).execute(&mut c).await.map(|_| ())
    };
    done.unwrap_or_else(|e| panic!("{url}: {sql}: {e}"));
}

fn ended(c: &ClaimedRun, end: RunEnd) -> RunOutcome {
    RunOutcome {
        run_id: c.run_id,
        task_id: c.task_id,
        end,
        percents_completed: None,
        finished_on: chrono::Utc::now(),
        duration_ms: 4,
        component_digest: None,
        fuel_used: Some(10),
        logs: Some("log\n".into()),
        fuel_key: None,
        delete_on_success: false,
    }
}

fn success(c: &ClaimedRun) -> RunOutcome {
    ended(c, RunEnd::Success { results: Some(format!("[{}]", c.attempt)), children: Default::default() })
}

fn give_up(c: &ClaimedRun) -> RunOutcome {
    let failure = Failure {
        code: "boom".into(),
        message: "it broke".into(),
        retryable: false,
        source: ErrorSource::Guest,
        kind: FailureKind::Error,
    };
    ended(c, RunEnd::Failure { failure, partial_results: None, next: NextStep::GiveUp })
}

async fn claim_one(store: &SharedStore, runner: i64) -> ClaimedRun {
    let c = store.claim(runner, &["default".into()], 1, chrono::Utc::now(), DAY).await.expect("claim");
    c.into_iter().next().expect("a task due")
}

async fn the_tables_hold_each_run_once(url: &str) {
    let store = store::open(url, &StoreOptions::default()).await.expect("open");
    let runner = store.register_runner(1, "test", chrono::Utc::now(), 10).await.expect("runner");
    let id = store.add_tasks(&[NewTask::new("h", "{}")], chrono::Utc::now()).await.expect("add")[0].id;
    let rows = "SELECT count(*) FROM task_runs";
    let first = claim_one(&store, runner).await;
    store.finish_runs(&[success(&first)]).await.expect("finish");
    assert_eq!(number(url, rows).await, 0, "{url}: a success writes no run row");
    store.retry_task(id, None, chrono::Utc::now()).await.expect("replay");
    assert_eq!(number(url, rows).await, 1, "{url}: the replay wrote it");
    let kept = "SELECT count(*) FROM task_queue WHERE run_duration_ms IS NOT NULL";
    assert_eq!(number(url, kept).await, 0, "{url}: and let it go");

    // As an older version's replay leaves it: scheduled again, the kept run's columns still set.
    let second = claim_one(&store, runner).await;
    store.finish_runs(&[success(&second)]).await.expect("finish");
    run(url, "UPDATE task_queue SET last_status = 'scheduled', finished_on = NULL").await;
    let third = claim_one(&store, runner).await;
    assert_eq!(number(url, kept).await, 0, "{url}: the claim let the stale run go");
    store.finish_runs(&[give_up(&third)]).await.expect("fail");
    store.retry_task(id, None, chrono::Utc::now()).await.expect("a dead letter replayed, nothing written twice");
    let runs = store.runs_of(id).await.expect("runs");
    let seen: Vec<_> = runs.iter().map(|r| (r.attempt, r.status)).collect();
    // The second run is lost, as docs/databases.md says of an older version's replay.
    assert_eq!(seen, [(1, RunStatus::Success), (3, RunStatus::Error)], "{url}");
    assert_eq!(runs[0].results.as_deref(), Some("[1]"), "{url}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_writes_no_run_row_and_a_replay_writes_it_once_on_every_database() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = format!("sqlite://{}?mode=rwc", dir.path().join("queue.db").display());
    let (pg, my) = (common::postgres_scratch().await, common::mysql_scratch().await);
    for url in [sqlite.as_str(), &*pg, &*my] {
        the_tables_hold_each_run_once(url).await;
    }
}
