//! Unit tests of the parent module.

use super::*;

/// Two `Writers` of one file lock as two processes do: each has its own open files.
fn two(dir: &Path) -> (Writers, Writers) {
    let db = dir.join("tasks.db");
    let open = || Writers::open(Some(&db), Duration::from_secs(30)).expect("open");
    (open(), open())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_writing_back_to_back_lets_a_waiting_one_take_the_next_turn() {
    let dir = tempfile::tempdir().expect("dir");
    let (mut a, b) = two(dir.path());
    // Time enough for b's thread to be woken on a loaded machine.
    a.defer_most = Duration::from_secs(10);
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let first = a.turn().await.expect("a's turn");
    let waiter = {
        let (b, order) = (b.clone(), order.clone());
        tokio::spawn(async move {
            let turn = b.turn().await.expect("b's turn");
            order.lock().expect("order").push("b");
            drop(turn);
        })
    };
    // Until b has said it waits (a condition with a deadline, not a sleep). Not `others_wait`
    // from a: b's own probe before it says so can look like a waiter for a moment, and a
    // that saw it could take the turn back before b ever waited.
    let said = b.files.clone().expect("files");
    let until = Instant::now() + Duration::from_secs(10);
    while said.said_waiting.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < until, "b never waited");
        tokio::task::yield_now().await;
    }
    assert!(a.files.as_ref().expect("files").others_wait().expect("look"), "a sees b wait");
    drop(first);
    let again = a.turn().await.expect("a's next turn");
    order.lock().expect("order").push("a");
    drop(again);
    waiter.await.expect("b");
    assert_eq!(*order.lock().expect("order"), ["b", "a"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_waits_too_long_fails_as_busy_and_the_turn_stays_usable() {
    let dir = tempfile::tempdir().expect("dir");
    let (a, mut b) = two(dir.path());
    b.wait_most = Duration::from_millis(50);
    let held = a.turn().await.expect("a's turn");
    let e = b.turn().await.expect_err("busy");
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains("tasks.db"), "{e}");
    drop(held);
    // The abandoned wait takes the turn and gives it back; then b's next wait succeeds.
    b.wait_most = Duration::from_secs(30);
    drop(b.turn().await.expect("b's turn"));
    drop(a.turn().await.expect("a's turn again"));
}

#[tokio::test]
async fn a_database_in_memory_needs_no_files() {
    let w = Writers::open(None, Duration::from_secs(1)).expect("open");
    let turn = w.turn().await.expect("turn");
    drop(turn);
    drop(w.turn().await.expect("next"));
}
