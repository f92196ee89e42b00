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
    // The claim's read of its runner's row, executing for 200 ms in this test's database: it waits
    // on the row's lock. Not `innodb_trx`/`innodb_lock_waits`: when the optimizer reads the row
    // (a primary-key lookup, in the "Statistics" state) MariaDB shows neither the wait nor the
    // transaction, and such a claim went unseen for 30 s under load.
    "SELECT count(*) FROM information_schema.processlist
     WHERE db = DATABASE() AND info LIKE '%FROM task_runners%LOCK IN SHARE MODE' AND time_ms > 200"
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
