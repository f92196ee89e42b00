use super::*;

#[test]
fn a_held_run_is_never_disowned_and_a_disowned_run_is_never_held() {
    let claims = Arc::new(Claims::default());
    let held = claims.hold(7).expect("not orphaned");
    assert!(claims.disown(7).is_none(), "held");
    drop(held);
    let orphan = claims.disown(7).expect("its outcome is written: no longer held");
    assert!(claims.hold(7).is_none(), "an answer arriving while the orphan goes back is dropped");
    drop(orphan);
    assert!(claims.hold(7).is_none(), "an answer arriving late for an orphan put back is dropped");
    assert!(claims.hold(8).is_some());
}

#[test]
fn orphans_remembered_are_bounded() {
    let claims = Arc::new(Claims::default());
    for run in 0..(REMEMBERED_ORPHANS as i64 + 10) {
        drop(claims.disown(run).expect("no entry"));
    }
    assert_eq!(claims.lock().orphaned.len(), REMEMBERED_ORPHANS);
    assert!(claims.is_empty(), "each orphan's entry ended with its put-back");
}

#[test]
fn a_run_the_fence_stopped_stays_claimed_until_heartbeats_are_back_and_then_goes_back_once() {
    let claims = Arc::new(Claims::default());
    let (running, waiting) = (claims.hold(1).expect("held"), claims.hold(2).expect("held"));
    let stop = claims.start(1);
    assert_eq!(claims.executing(), vec![1]);
    assert_eq!(claims.fence_all(), 1, "only the run executing is stopped");
    assert!(futures::FutureExt::now_or_never(stop.notified()).is_some(), "its guest was told to stop");
    assert!(claims.fenced(1) && !claims.fenced(2));
    // Its guest is still stopping: nothing to put back yet.
    assert!(claims.unpark().is_empty());
    claims.done(1);
    claims.park(running);
    claims.park(waiting);
    assert_eq!(claims.len(), 2, "parked runs outlive their Held");
    let mut back: Vec<RunId> = claims.unpark().iter().map(Held::run).collect();
    back.sort_unstable();
    assert_eq!(back, vec![1, 2]);
    assert!(!claims.fenced(1), "held again, as any run to put back");
    assert!(claims.unpark().is_empty(), "each goes back once");
}

#[tokio::test]
async fn a_stopping_worker_waits_until_every_claimed_run_is_released_or_the_time_is_up() {
    let claims = Arc::new(Claims::default());
    let (a, b) = (claims.hold(1).expect("held"), claims.hold(2).expect("held"));
    drop(a);
    assert_eq!(claims.settle(Duration::ZERO).await, 1, "one left when the time is up");
    let release = tokio::spawn(async move {
        tokio::task::yield_now().await;
        drop(b);
    });
    assert_eq!(claims.settle(Duration::from_secs(60)).await, 0);
    release.await.expect("released");
}
