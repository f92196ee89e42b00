//! The store suite on SQLite files.

use crate::suite;

use taskhost::store::{self, SharedStore, StoreOptions};
use tempfile::TempDir;

async fn open() -> (SharedStore, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_same(&dir).await;
    (store, dir)
}

async fn open_same(dir: &TempDir) -> SharedStore {
    let url = format!("sqlite://{}", dir.path().join("queue.db").display());
    store::open(&url, &StoreOptions::default()).await.expect("open sqlite store")
}

store_suite!(open(), open_same);

#[tokio::test]
async fn migrating_twice_is_harmless() {
    let (store, _dir) = open().await;
    store.migrate().await.expect("second migration");
}

#[tokio::test]
async fn a_bad_url_is_a_clear_error() {
    for (url, needle) in [
        ("ftp://x", "unknown scheme"),
        ("just-a-name", "expected a URL"),
        ("sqlite:///nonexistent-dir/deeper/q.db", "cannot open"),
    ] {
        let err = store::open(url, &StoreOptions::default()).await.expect_err(url).to_string();
        assert!(err.contains(needle), "{url}: {err}");
    }
}

#[tokio::test]
async fn tasks_can_be_queued_inside_the_callers_own_transaction() {
    use taskhost::model::NewTask;
    use taskhost::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("queue.db").display());
    let store = SqliteStore::connect(&url, &StoreOptions::default()).await.expect("connect");
    taskhost::store::Store::migrate(&store).await.expect("migrate");
    sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)").execute(store.pool()).await.expect("table");
    let now = chrono::Utc::now();
    // Rolled back: neither the order nor its task exist.
    let mut tx = store.pool().begin().await.expect("begin");
    sqlx::query("INSERT INTO orders (item) VALUES ('book')").execute(&mut *tx).await.expect("order");
    SqliteStore::add_tasks_in(&mut tx, &[NewTask::new("mail", r#"{"order": 1}"#)], now).await.expect("add");
    tx.rollback().await.expect("rollback");
    let store_dyn: SharedStore = store.shared();
    assert_eq!(store_dyn.counts().await.expect("counts").scheduled, 0);
    // Committed: both.
    let mut tx = store.pool().begin().await.expect("begin");
    sqlx::query("INSERT INTO orders (item) VALUES ('book')").execute(&mut *tx).await.expect("order");
    let added = SqliteStore::add_tasks_in(&mut tx, &[NewTask::new("mail", r#"{"order": 1}"#)], now).await.expect("add");
    tx.commit().await.expect("commit");
    assert_eq!(store_dyn.counts().await.expect("counts").scheduled, 1);
    assert_eq!(store_dyn.get_task(added[0].id).await.expect("get").expect("task").handler, "mail");
}

/// sqlx can lose the acknowledgement of a BEGIN whose caller was cancelled (a worker's claim cut
/// short by a signal): the connection then holds SQLite's write lock with no `Transaction` to end
/// it. Forgetting a transaction leaves a connection in that state on purpose.
#[tokio::test]
async fn a_connection_returned_inside_a_transaction_is_not_reused() {
    use taskhost::model::NewTask;
    use taskhost::store::sqlite::SqliteStore;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("queue.db").display());
    let options = StoreOptions { max_connections: 1, ..StoreOptions::default() };
    let store = SqliteStore::connect(&url, &options).await.expect("connect");
    taskhost::store::Store::migrate(&store).await.expect("migrate");
    let mut conn = store.pool().acquire().await.expect("acquire");
    let tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await.expect("begin");
    std::mem::forget(tx);
    drop(conn);
    let shared: SharedStore = store.shared();
    let added = shared.add_tasks(&[NewTask::new("noop", "{}")], chrono::Utc::now()).await.expect("add after");
    assert_eq!(added.len(), 1);
    assert_eq!(shared.counts().await.expect("counts").scheduled, 1);
}
