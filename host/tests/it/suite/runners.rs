//! The store suite's cases for runners and leases: timed-out runners, the runner limit, concurrent
//! claims, leases, put-backs; and rotation.

use super::*;

pub async fn timed_out_runners_take_their_runs_with_them(store: SharedStore) {
    store
        .add_tasks(&[NewTask::new("h", "{}"), NewTask::new("h", "{}"), NewTask::new("h", "{}")], t0())
        .await
        .expect("add");
    let dead = runner(&store, t0()).await;
    let alive = runner(&store, t0()).await;
    let a = store.claim(dead, &["default".into()], 2, t0(), DAY).await.expect("claim");
    let b = store.claim(alive, &["default".into()], 1, t0(), DAY).await.expect("claim");
    assert_eq!(store.time_out_runners(&[dead], t0() + secs(60)).await.expect("timeout"), 2);
    assert!(!store.heartbeat(dead, t0() + secs(61)).await.expect("heartbeat"), "a timed-out runner learns it");
    assert!(store.heartbeat(alive, t0() + secs(61)).await.expect("heartbeat"));
    let live: Vec<_> = store.live_runners().await.expect("live").iter().map(|r| r.id).collect();
    assert_eq!(live, vec![alive]);
    for c in &a {
        let runs = store.runs_of(c.task_id).await.expect("runs");
        assert_eq!(runs[0].status, RunStatus::Timeout);
        assert_eq!(runs[0].error_code.as_deref(), Some("runner-lost"));
        assert_eq!(runs[0].duration_ms, Some(60_000), "from its start to its runner's loss");
    }
    let runs = store.runs_of(b[0].task_id).await.expect("runs");
    assert_eq!(runs[0].status, RunStatus::Running);
    // The retries service's view: two candidates, each with one failure.
    let cands = store.retry_candidates(100).await.expect("candidates");
    assert_eq!(cands.len(), 2);
    let plans: Vec<_> =
        cands.iter().map(|c| RetryPlan { task_id: c.task_id, next: NextStep::RetryAt(t0() + secs(61)) }).collect();
    assert!(cands.iter().all(|c| c.failures == 1));
    store.apply_retry_plans(&plans, t0() + secs(60)).await.expect("plans");
    assert!(store.retry_candidates(100).await.expect("candidates").is_empty());
    // Its claims (one sent before it was timed out and delayed, say) take nothing.
    let late = store.claim(dead, &["default".into()], 10, t0() + secs(61), DAY).await.expect("claim");
    assert!(late.is_empty(), "a timed-out runner claimed {late:?}");
    let again = store.claim(alive, &["default".into()], 10, t0() + secs(61), DAY).await.expect("claim");
    assert_eq!(again.len(), 2);
    assert!(again.iter().all(|c| c.attempt == 2));
}

pub async fn the_runner_limit_is_enforced(store: SharedStore) {
    let a = store.register_runner(1, "h", t0(), 2).await.expect("first");
    store.register_runner(2, "h", t0(), 2).await.expect("second");
    assert!(matches!(
        store.register_runner(3, "h", t0(), 2).await,
        Err(taskhost::Error::RunnerLimit { live: 2, limit: 2 })
    ));
    store.finish_runner(a, RunnerStatus::Success, t0()).await.expect("finish");
    store.register_runner(3, "h", t0(), 2).await.expect("a slot is free again");
}

pub async fn rotation_deletes_only_old_successes_in_batches(store: SharedStore) {
    let tasks: Vec<_> = (0..5).map(|_| NewTask::new("h", "{}")).collect();
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 5, t0(), DAY).await.expect("claim");
    let mut outcomes: Vec<_> = c[..3].iter().map(|c| success(c, t0(), "{}")).collect();
    outcomes.push(failure(&c[3], t0(), NextStep::GiveUp));
    store.finish_runs(&outcomes).await.expect("finish");
    store.finish_runs(&[success(&c[4], t0() + secs(100), "{}")]).await.expect("finish");
    let cutoff = t0() + secs(50);
    assert_eq!(store.rotate(cutoff, 2).await.expect("rotate"), 2);
    assert_eq!(store.rotate(cutoff, 2).await.expect("rotate"), 1);
    assert_eq!(store.rotate(cutoff, 2).await.expect("rotate"), 0);
    let left = store.list_tasks(&TaskFilter::default()).await.expect("list");
    assert_eq!(left.len(), 2, "the dead letter and the recent success stay");
    assert!(store.runs_of(c[0].task_id).await.expect("runs").is_empty(), "runs go with their task");
}

pub async fn concurrent_claims_never_share_a_run(a: SharedStore, b: SharedStore) {
    let tasks: Vec<_> = (0..600).map(|_| NewTask::new("h", "{}")).collect();
    a.add_tasks(&tasks, t0()).await.expect("add");
    let ra = runner(&a, t0()).await;
    let rb = runner(&b, t0()).await;
    let claim_all = |s: SharedStore, r: RunnerId| async move {
        let mut mine = Vec::new();
        loop {
            let got = s.claim(r, &["default".into()], 7, t0(), DAY).await.expect("claim");
            if got.is_empty() {
                return mine;
            }
            mine.extend(got.into_iter().map(|c| c.run_id));
        }
    };
    let (x, y) = tokio::join!(tokio::spawn(claim_all(a.clone(), ra)), tokio::spawn(claim_all(b.clone(), rb)));
    let (x, y) = (x.expect("join"), y.expect("join"));
    let mut all: Vec<_> = x.iter().chain(y.iter()).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 600, "every run claimed exactly once");
    assert_eq!(x.len() + y.len(), 600);
}

pub async fn a_lease_has_one_holder_until_it_expires(store: SharedStore) {
    let ttl = Duration::from_secs(10);
    assert!(store.try_lease("overseer", "a", t0(), ttl).await.expect("lease"), "free: a takes it");
    assert!(!store.try_lease("overseer", "b", t0() + secs(1), ttl).await.expect("lease"), "held by a");
    assert!(store.try_lease("overseer", "a", t0() + secs(5), ttl).await.expect("lease"), "a renews");
    assert!(!store.try_lease("overseer", "b", t0() + secs(14), ttl).await.expect("lease"), "renewed until 15 s");
    assert!(store.try_lease("other", "b", t0() + secs(14), ttl).await.expect("lease"), "leases are by name");
    assert!(store.try_lease("overseer", "b", t0() + secs(16), ttl).await.expect("lease"), "expired: b takes over");
    assert!(!store.try_lease("overseer", "a", t0() + secs(17), ttl).await.expect("lease"), "a lost it");
}

pub async fn a_lease_handed_back_is_free_at_once_and_only_by_its_holder(store: SharedStore) {
    let ttl = Duration::from_secs(10);
    assert!(store.try_lease("overseer", "a", t0(), ttl).await.expect("lease"), "free: a takes it");
    assert!(store.try_lease("other", "a", t0(), ttl).await.expect("lease"), "and another lease");
    assert!(!store.release_lease("overseer", "b", t0() + secs(1)).await.expect("release"), "not b's to hand back");
    assert!(!store.try_lease("overseer", "b", t0() + secs(2), ttl).await.expect("lease"), "still a's");
    assert!(store.release_lease("overseer", "a", t0() + secs(3)).await.expect("release"), "a hands it back");
    let taken = store.try_lease("overseer", "b", t0() + secs(4), ttl).await.expect("lease");
    assert!(taken, "b takes it 6 s before it would have expired");
    assert!(!store.try_lease("other", "b", t0() + secs(4), ttl).await.expect("lease"), "leases are by name");
    let again = store.release_lease("overseer", "a", t0() + secs(5)).await.expect("release");
    assert!(!again, "a's second release leaves b's lease alone");
    assert!(!store.try_lease("overseer", "a", t0() + secs(6), ttl).await.expect("lease"), "b holds it");
}

pub async fn a_run_put_back_is_scheduled_again_uncounted(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let added = store.add_tasks(&[NewTask::new("h", "{}"), NewTask::new("h", "{}")], t0()).await.expect("add");
    let queues = [DEFAULT_QUEUE.to_string()];
    let claimed = store.claim(r, &queues, 10, t0(), DAY).await.expect("claim");
    let (run, other) = (claimed[0].run_id, claimed[1].run_id);
    // Both at once, each due at its own time.
    let back = store.put_back(&[(run, t0() + secs(5)), (other, t0() + secs(50))]).await.expect("put back");
    assert_eq!(back, [run, other]);
    let again = store.put_back(&[(run, t0() + secs(5))]).await.expect("again");
    assert!(again.is_empty(), "no longer running");
    assert!(store.put_back(&[]).await.expect("none").is_empty());
    // The run ran no guest to its end: it is gone, and the next claim makes it anew.
    assert!(store.runs_of(added[0].id).await.expect("runs").is_empty());
    let task = store.get_task(added[0].id).await.expect("get").expect("task");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Scheduled, 0));
    assert!(store.running_runs_of(r).await.expect("running").is_empty());
    assert!(store.claim(r, &queues, 10, t0() + secs(4), DAY).await.expect("claim").is_empty(), "not due yet");
    let again = store.claim(r, &queues, 10, t0() + secs(5), DAY).await.expect("claim");
    assert_eq!(again.len(), 1, "only the first is due: {again:?}");
    assert_eq!((again[0].task_id, again[0].attempt), (added[0].id, claimed[0].attempt), "a put back is uncounted");
    let runs = store.runs_of(added[0].id).await.expect("runs");
    assert_eq!((runs.len(), runs[0].id, runs[0].status), (1, again[0].run_id, RunStatus::Running));
}
