//! The store suite on a real MariaDB/MySQL server (`scripts/test-services.sh` starts one; `make test`
//! runs it). A missing server fails these tests: it is never skipped.
//!
//! Each test gets its own database, so tests run in parallel on one server.

mod suite;

use taskhost::store::{self, SharedStore, StoreOptions};

mod common;

async fn open() -> (SharedStore, common::ScratchDb) {
    let scratch = common::mysql_scratch().await;
    (open_same(&scratch).await, scratch)
}

async fn open_same(url: &str) -> SharedStore {
    store::open(url, &StoreOptions::default()).await.expect("open mysql store")
}

store_suite!(open(), open_same);

#[tokio::test]
async fn migrating_twice_is_harmless() {
    let (store, _url) = open().await;
    store.migrate().await.expect("second migration");
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() {
    let err = store::open("mysql://taskhost@127.0.0.1:1/test", &StoreOptions::default())
        .await
        .expect_err("nothing listens on port 1")
        .to_string();
    assert!(err.contains("cannot connect"), "{err}");
}

#[tokio::test]
async fn tasks_can_be_queued_inside_the_callers_own_transaction() {
    use taskhost::model::NewTask;
    use taskhost::store::mysql::MySqlStore;
    let scratch = common::mysql_scratch().await;
    let store = MySqlStore::connect(&scratch, &StoreOptions::default()).await.expect("connect");
    taskhost::store::Store::migrate(&store).await.expect("migrate");
    let shared: SharedStore = std::sync::Arc::new(store.clone());
    suite::tasks_queued_in_the_callers_transaction_share_its_fate(shared, |commit| {
        let store = store.clone();
        async move {
            let mut tx = store.pool().begin().await.expect("begin");
            let added = MySqlStore::add_tasks_in(&mut tx, &[NewTask::new("mail", "{}")], chrono::Utc::now())
                .await
                .expect("add");
            if commit {
                tx.commit().await.expect("commit")
            } else {
                tx.rollback().await.expect("rollback")
            }
            added[0].id
        }
    })
    .await;
}
