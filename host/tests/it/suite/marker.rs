//! The database's change marker, by which readers (waits, the event stream) skip their reads
//! while nothing is written.

use super::*;

/// Each database tested has a marker (SQLite: its log's stat; PostgreSQL: the current snapshot;
/// MariaDB and MySQL: the redo log's position), and a commit moves it. (That it stands still while nothing
/// is written cannot be checked here: the servers' markers are the whole server's, shared with
/// the tests running beside.)
pub async fn a_commit_moves_the_change_marker(store: SharedStore) {
    let marker = || async { store.change_marker().await.expect("the marker is read").expect("a marker") };
    // MySQL's status shows the redo log's position a moment after the commit: readers then read
    // at their next look, so a marker may move late, never not at all.
    let moves_from = |from: u64, what: &'static str| {
        crate::common::wait_until(Duration::from_secs(10), what, move || async move { marker().await != from })
    };
    let before = marker().await;
    store.add_tasks(&[NewTask::new("a", "{}")], t0()).await.expect("add");
    moves_from(before, "an add moves the marker").await;
    let added = marker().await;
    let r = runner(&store, t0()).await;
    store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    moves_from(added, "a claim moves the marker").await;
}
