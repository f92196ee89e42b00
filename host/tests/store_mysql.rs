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
