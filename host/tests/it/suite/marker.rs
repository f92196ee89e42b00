//! The database's change marker, by which readers (waits, the event stream) skip their reads
//! while nothing is written.

use super::*;

/// Each database tested has a marker (SQLite: its log's stat; PostgreSQL: the current snapshot;
/// MariaDB: the redo log's position), and a commit moves it. (That it stands still while nothing
/// is written cannot be checked here: the servers' markers are the whole server's, shared with
/// the tests running beside.)
pub async fn a_commit_moves_the_change_marker(store: SharedStore) {
    let marker = || async { store.change_marker().await.expect("the marker is read").expect("a marker") };
    let before = marker().await;
    store.add_tasks(&[NewTask::new("a", "{}")], t0()).await.expect("add");
    let added = marker().await;
    assert_ne!(before, added, "an add moved no marker");
    let r = runner(&store, t0()).await;
    store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    assert_ne!(added, marker().await, "a claim moved no marker");
}
