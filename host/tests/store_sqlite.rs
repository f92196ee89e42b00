//! The store suite on SQLite files.

mod suite;

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
