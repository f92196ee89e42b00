//! The store suite on a real MariaDB/MySQL server (`scripts/test-services.sh` starts one; `make test`
//! runs it). A missing server fails these tests: it is never skipped.
//!
//! Each test gets its own database, so tests run in parallel on one server.

use crate::suite;

use taskhost::store::{self, SharedStore, StoreOptions};

use crate::common;

server_store_suite!(
    common::mysql_scratch(),
    taskhost::store::mysql::MySqlStore,
    "mysql://taskhost@127.0.0.1:1/test",
    // The claim's read of its runner's row, executing for a second in this test's database (`time`:
    // MySQL has no `time_ms`, which MariaDB adds): it waits
    // on the row's lock. Not `innodb_trx`/`innodb_lock_waits`: when the optimizer reads the row
    // (a primary-key lookup, in the "Statistics" state) MariaDB shows neither the wait nor the
    // transaction, and such a claim went unseen for 30 s under load.
    "SELECT count(*) FROM information_schema.processlist
     WHERE db = DATABASE() AND info LIKE '%FROM task_runners%LOCK IN SHARE MODE' AND time >= 1"
);

/// MySQL's errors are told apart by their numbers: sqlx's `code()` there is the SQLSTATE, under
/// which a lock wait timeout is the same `HY000` as many a permanent error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_timeout_is_contention_and_a_missing_table_is_named() {
    use sqlx::Connection;
    let db = common::mysql_scratch().await;
    let mut holder = sqlx::MySqlConnection::connect(&db).await.expect("connect");
    let mut waiter = sqlx::MySqlConnection::connect(&db).await.expect("connect");
    sqlx::query("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(3))").execute(&mut holder).await.expect("create");
    sqlx::query("INSERT INTO t VALUES (1, 'a')").execute(&mut holder).await.expect("insert");
    let mut tx = holder.begin().await.expect("begin");
    sqlx::query("SELECT * FROM t WHERE id = 1 FOR UPDATE").fetch_all(&mut *tx).await.expect("lock");
    sqlx::query("SET SESSION innodb_lock_wait_timeout = 1").execute(&mut waiter).await.expect("set");
    let e =
        sqlx::query("UPDATE t SET s = 'b' WHERE id = 1").execute(&mut waiter).await.expect_err("it waits, then fails");
    let e = taskhost::Error::from(e);
    assert!(e.is_contention() && e.is_retryable() && !e.is_data_error(), "a lock wait timeout (1205): {e}");
    tx.rollback().await.expect("rollback");
    let e =
        taskhost::Error::from(sqlx::query("SELECT * FROM nope").fetch_all(&mut waiter).await.expect_err("no table"));
    assert!(e.is_missing_table() && !e.is_retryable(), "{e}");
    let e = taskhost::Error::from(
        sqlx::query("INSERT INTO t VALUES (2, 'abcd')").execute(&mut waiter).await.expect_err("too long"),
    );
    assert!(e.is_data_error() && !e.is_retryable(), "data too long (1406): {e}");
}

/// A batch of successes in a queue that deletes them locks every task of the batch in id order
/// and holds each until it commits, as an add locks the tasks it runs after: a task kept (a unique
/// key) of a lower id stays locked while the batch waits for one of a higher id it would delete.
/// (The lock read took only the deletable ones: the kept one, read and let go, was updated after
/// the higher one was deleted, which could deadlock with an add locking both in id order.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_successes_holds_its_tasks_in_id_order_before_it_deletes_any() {
    use sqlx::Connection;
    use taskhost::model::{Limit, LimitScope, NewTask, OnSuccess, RunOutcome, TaskState};
    use taskhost::store::{LimitEdit, LimitSetBy};
    let db = common::mysql_scratch().await;
    let store = store::open(&db, &StoreOptions::default()).await.expect("open");
    let now = chrono::Utc::now();
    let delete = Limit { on_success: OnSuccess::Delete, ..Limit::default() };
    store
        .set_limit(LimitScope::Queue, "default", LimitEdit::Set(delete), LimitSetBy::Operator, now)
        .await
        .expect("set");
    let tasks = [NewTask::new("h", "{}").with_unique_key("u"), NewTask::new("h", "{}")];
    let added = store.add_tasks(&tasks, now).await.expect("add");
    let (kept, deleted) = (added[0].id, added[1].id);
    let runner = store.register_runner(4242, "test-host", now, 100).await.expect("runner");
    let claimed = store.claim(runner, &["default".into()], 2, now, std::time::Duration::from_secs(60)).await;
    let outcomes: Vec<RunOutcome> = claimed
        .expect("claim")
        .iter()
        .map(|c| RunOutcome { delete_on_success: true, ..suite::success(c, now, "{}") })
        .collect();
    assert_eq!(outcomes.len(), 2);
    let mut holder = sqlx::MySqlConnection::connect(&db).await.expect("connect");
    let mut held = holder.begin().await.expect("begin");
    let lock = |id: i64| format!("SELECT id FROM task_queue WHERE id = {id} FOR UPDATE");
    sqlx::query(&lock(deleted)).fetch_all(&mut *held).await.expect("lock the higher one");
    let writer = store.clone();
    let batch = tokio::spawn(async move { writer.finish_runs(&outcomes).await });
    let waiting = "SELECT count(*) FROM information_schema.processlist
                   WHERE db = DATABASE() AND info LIKE '%task_handler_class, queue%FOR UPDATE%' AND time >= 1";
    common::wait_until(std::time::Duration::from_secs(30), "the batch waits for the higher task", || async {
        let mut c = sqlx::MySqlConnection::connect(&db).await.expect("connect");
        // MySQL fails the read while another connection's statement is not utf8mb3 text (its
        // processlist's): not seen yet, read again.
        sqlx::query_scalar::<_, i64>(waiting).fetch_one(&mut c).await.is_ok_and(|n| n > 0)
    })
    .await;
    let mut prober = sqlx::MySqlConnection::connect(&db).await.expect("connect");
    let mut probe = prober.begin().await.expect("begin");
    let nowait = format!("{} NOWAIT", lock(kept));
    let e = sqlx::query(&nowait).fetch_all(&mut *probe).await.expect_err("the batch holds the lower one");
    assert!(taskhost::Error::from(e).is_contention(), "a lock held, not another error");
    probe.rollback().await.expect("rollback");
    held.rollback().await.expect("let the higher one go");
    batch.await.expect("join").expect("the batch is written");
    assert_eq!(store.get_task(kept).await.expect("get").map(|t| t.state), Some(TaskState::Succeeded));
    assert!(store.get_task(deleted).await.expect("get").is_none(), "its success deleted it");
}
