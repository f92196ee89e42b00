//! The store suite: every backend must pass these, unchanged. A backend's test file calls
//! `store_suite!(open_expression)` with an async expression that opens a fresh, empty store.
#![allow(dead_code)]

mod control;
mod dependencies;
mod lifecycle;
mod queues;
mod reads_and_upkeep;
mod release;
mod signals;
mod unique;
mod workflows;
pub use control::*;
pub use dependencies::*;
pub use lifecycle::*;
pub use queues::*;
pub use reads_and_upkeep::*;
pub use release::*;
pub use signals::*;
pub use unique::*;
pub use workflows::*;

use std::time::Duration;

use chrono::{DateTime, Utc};
use taskhost::model::*;
use taskhost::sandbox::{ErrorSource, Failure, FailureKind};
use taskhost::store::{RetryPlan, SharedStore};

const DAY: Duration = Duration::from_secs(86_400);

fn t0() -> DateTime<Utc> {
    // Whole microseconds: every backend stores them exactly.
    DateTime::from_timestamp(1_790_000_000, 123_456_000).expect("valid time")
}

fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

async fn runner(store: &SharedStore, now: DateTime<Utc>) -> RunnerId {
    store.register_runner(4242, "test-host", now, 100).await.expect("register runner")
}

fn success(c: &ClaimedRun, now: DateTime<Utc>, results: &str) -> RunOutcome {
    RunOutcome {
        run_id: c.run_id,
        task_id: c.task_id,
        end: RunEnd::Success { results: Some(results.into()), children: Default::default() },
        percents_completed: Some(100),
        finished_on: now,
        duration_ms: 3,
        component_digest: Some("ab".repeat(32)),
        fuel_used: Some(1234),
        logs: None,
    }
}

fn failure(c: &ClaimedRun, now: DateTime<Utc>, next: NextStep) -> RunOutcome {
    let failure = Failure {
        code: "boom".into(),
        message: "it broke".into(),
        retryable: true,
        source: ErrorSource::Guest,
        kind: FailureKind::Error,
    };
    RunOutcome {
        end: RunEnd::Failure { failure, partial_results: None, next },
        percents_completed: Some(40),
        ..success(c, now, "")
    }
}

pub async fn adds_a_task_whose_first_run_is_made_by_its_claim(store: SharedStore) {
    let added = store
        .add_tasks(&[NewTask::new("echo", r#"{"a":1}"#).with_queued_by("alice").with_max_attempts(3)], t0())
        .await
        .expect("add");
    assert_eq!(added.len(), 1);
    assert!(added[0].created);
    let task = store.get_task(added[0].id).await.expect("get").expect("exists");
    assert_eq!(task.handler, "echo");
    assert_eq!(task.data, r#"{"a":1}"#);
    assert_eq!(task.queued_by.as_deref(), Some("alice"));
    assert_eq!(task.last_status, RunStatus::Scheduled);
    assert_eq!(task.max_attempts, 3);
    assert_eq!(task.task_runs_failed, 0);
    assert_eq!(task.queue, "default");
    assert_eq!(task.queued_on, t0());
    assert_eq!(task.scheduled_on, t0());
    assert!(store.runs_of(task.id).await.expect("runs").is_empty(), "no run before its claim");
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &["default".into()], 10, t0() + secs(1), DAY).await.expect("claim");
    assert_eq!(claimed.iter().map(|c| (c.task_id, c.attempt)).collect::<Vec<_>>(), [(task.id, 1)]);
    let runs = store.runs_of(task.id).await.expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].id, runs[0].status, runs[0].attempt), (claimed[0].run_id, RunStatus::Running, 1));
    assert_eq!(
        (runs[0].created_on, runs[0].started_on, runs[0].runner_id),
        (t0() + secs(1), Some(t0() + secs(1)), Some(r))
    );
    assert_eq!(claimed[0].timeout_on, t0() + secs(1) + chrono::Duration::from_std(DAY).expect("a day"));
    assert_eq!(runs[0].percents_completed, 0);
}

/// Several bulk statements' worth (each database caps the tasks of one), every field varying.
pub async fn adds_many_tasks_in_order(store: SharedStore) {
    let n = 6_000;
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let t = NewTask::new(format!("h{}", i % 3), format!("{{\"i\":{i}}}"))
                .with_queue(format!("q{}", i % 2))
                .with_priority(i as i32 % 5 - 2)
                .with_max_attempts(i as u32 % 4);
            match i % 3 {
                0 => t.with_queued_by(format!("by{i}")).with_scheduled_on(t0() + secs(i as i64)),
                1 => t
                    .with_run_timeout(Duration::from_secs(1 + i as u64))
                    .with_backoff(BackoffSettings { base_ms: Some(i as i64), max_ms: Some(2 * i as i64) }),
                _ => t,
            }
        })
        .collect();
    let added = store.add_tasks(&tasks, t0()).await.expect("add");
    assert_eq!(added.len(), n);
    for w in added.windows(2) {
        assert!(w[0].id < w[1].id, "ids follow input order");
    }
    for (i, (t, a)) in tasks.iter().zip(&added).enumerate().filter(|(i, _)| i % 997 < 3) {
        let got = store.get_task(a.id).await.expect("get").expect("exists");
        let what = format!("task {i}");
        assert_eq!(
            (&got.handler, &got.data, &got.queue, got.priority),
            (&t.handler, &t.data, &t.queue, t.priority),
            "{what}"
        );
        assert_eq!((got.max_attempts, &got.queued_by, got.queued_on), (t.max_attempts, &t.queued_by, t0()), "{what}");
        assert_eq!(got.scheduled_on, t.scheduled_on.unwrap_or(t0()), "{what}");
        assert_eq!(got.run_timeout_secs, t.run_timeout.map(|d| d.as_secs() as i64), "{what}");
        assert_eq!((got.backoff.base_ms, got.backoff.max_ms), (t.backoff.base_ms, t.backoff.max_ms), "{what}");
        assert!(store.runs_of(a.id).await.expect("runs").is_empty(), "{what}: no run before its claim");
    }
    assert_eq!(store.counts().await.expect("counts").scheduled, n as u64);
}

pub async fn claims_in_priority_then_fifo_order(store: SharedStore) {
    let tasks = vec![
        NewTask::new("h", "{}").with_priority(5),
        NewTask::new("h", "{}"),
        NewTask::new("h", "{}").with_priority(-1),
        NewTask::new("h", "{}"),
    ];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &["default".into()], 10, t0() + secs(1), DAY).await.expect("claim");
    let order: Vec<_> = claimed.iter().map(|c| c.task_id).collect();
    assert_eq!(order, vec![ids[2], ids[1], ids[3], ids[0]]);
    for c in &claimed {
        assert_eq!(c.attempt, 1);
        let task = store.get_task(c.task_id).await.expect("get").expect("exists");
        assert_eq!(task.last_status, RunStatus::Running);
        let runs = store.runs_of(c.task_id).await.expect("runs");
        assert_eq!(runs[0].status, RunStatus::Running);
        assert_eq!(runs[0].runner_id, Some(r));
        assert_eq!(runs[0].started_on, Some(t0() + secs(1)));
    }
    assert!(store.claim(r, &["default".into()], 10, t0() + secs(1), DAY).await.expect("claim").is_empty());
}

pub async fn claims_only_due_tasks_of_the_given_queues(store: SharedStore) {
    let tasks = vec![
        NewTask::new("h", "{}").with_scheduled_on(t0() + secs(60)),
        NewTask::new("h", "{}").with_queue("mail"),
        NewTask::new("h", "{}").with_queue("other"),
    ];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let r = runner(&store, t0()).await;
    let got = store.claim(r, &["default".into()], 10, t0(), DAY).await.expect("claim");
    assert!(got.is_empty(), "the default-queue task is not due yet");
    let got = store.claim(r, &["mail".into(), "default".into()], 10, t0(), DAY).await.expect("claim");
    assert_eq!(got.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![ids[1]]);
    let got = store.claim(r, &["default".into()], 10, t0() + secs(60), DAY).await.expect("claim");
    assert_eq!(got.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![ids[0]]);
    assert!(store.has_due_work(&["other".into()], t0()).await.expect("due"));
    assert!(store.has_due_work(&["default".into()], t0() + secs(60)).await.expect("due"), "running counts");
    assert!(!store.has_due_work(&["empty".into()], t0() + secs(60)).await.expect("due"));
}

pub async fn respects_the_claim_limit(store: SharedStore) {
    let tasks: Vec<_> = (0..10).map(|_| NewTask::new("h", "{}")).collect();
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    assert_eq!(store.claim(r, &["default".into()], 3, t0(), DAY).await.expect("claim").len(), 3);
    assert_eq!(store.claim(r, &["default".into()], 0, t0(), DAY).await.expect("claim").len(), 0);
    assert_eq!(store.claim(r, &["default".into()], 100, t0(), DAY).await.expect("claim").len(), 7);
}

pub async fn a_large_claim_takes_each_task_once_with_its_own_run(store: SharedStore) {
    // Large claims may be split across connections (PostgreSQL): still each task once, in full.
    let tasks: Vec<_> = (0..700).map(|i| NewTask::new("h", format!(r#"{{"i":{i}}}"#))).collect();
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let mut all = store.claim(r, &["default".into()], 512, t0(), DAY).await.expect("claim");
    assert_eq!(all.len(), 512);
    all.extend(store.claim(r, &["default".into()], 512, t0(), DAY).await.expect("claim"));
    assert_eq!(all.len(), 700);
    let tasks: std::collections::HashSet<_> = all.iter().map(|c| c.task_id).collect();
    let runs: std::collections::HashSet<_> = all.iter().map(|c| c.run_id).collect();
    assert_eq!((tasks.len(), runs.len()), (700, 700));
    for c in all.iter().step_by(97) {
        let runs = store.runs_of(c.task_id).await.expect("runs");
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].id, runs[0].status, runs[0].attempt), (c.run_id, RunStatus::Running, 1));
        let task = store.get_task(c.task_id).await.expect("get").expect("task");
        assert_eq!(task.last_status, RunStatus::Running);
        assert_eq!(c.data, task.data);
    }
    assert_eq!(store.counts().await.expect("counts").running, 700);
}

pub async fn unique_key_returns_the_unfinished_task(store: SharedStore) {
    let first = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("k1")], t0()).await.expect("add")[0];
    assert!(first.created);
    let dup =
        store.add_tasks(&[NewTask::new("h", r#"{"other":true}"#).with_unique_key("k1")], t0()).await.expect("add")[0];
    assert_eq!(dup, Added { id: first.id, created: false });
    assert_eq!(store.counts().await.expect("counts").scheduled, 1);
    // Once finished, the key is free again.
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    store.finish_runs(&[success(&c[0], t0(), "{}")]).await.expect("finish");
    let again = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("k1")], t0()).await.expect("add")[0];
    assert!(again.created);
    assert_ne!(again.id, first.id);
}

pub async fn success_updates_the_run_and_the_task(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    store
        .record_progress(&[ProgressUpdate {
            task_id: c[0].task_id,
            run_id: c[0].run_id,
            percent: Some(40),
            results: Some(r#"{"partial":1}"#.into()),
        }])
        .await
        .expect("progress");
    let run = &store.runs_of(id).await.expect("runs")[0];
    assert_eq!(run.percents_completed, 40);
    assert_eq!(run.results.as_deref(), Some(r#"{"partial":1}"#));
    store.finish_runs(&[success(&c[0], t0() + secs(2), r#"{"n":3}"#)]).await.expect("finish");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(task.last_status, RunStatus::Success);
    assert_eq!(task.task_runs_failed, 0);
    assert!(task.gave_up_on.is_none());
    let run = &store.runs_of(id).await.expect("runs")[0];
    assert_eq!(run.status, RunStatus::Success);
    assert_eq!(run.results.as_deref(), Some(r#"{"n":3}"#));
    assert_eq!(run.percents_completed, 100);
    assert_eq!(run.finished_on, Some(t0() + secs(2)));
    assert_eq!(run.duration_ms, Some(3));
    assert_eq!(run.fuel_used, Some(1234));
    assert_eq!(run.component_digest.as_deref(), Some("ab".repeat(32).as_str()));
}

pub async fn a_failure_with_retry_schedules_the_next_attempt(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}").with_max_attempts(3)], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    store.finish_runs(&[failure(&c[0], t0(), NextStep::RetryAt(t0() + secs(2)))]).await.expect("finish");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(task.last_status, RunStatus::Scheduled);
    assert_eq!(task.task_runs_failed, 1);
    assert_eq!(task.scheduled_on, t0() + secs(2));
    // The failed run alone: the next is made by the claim that starts it.
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, RunStatus::Error);
    assert_eq!(runs[0].error_code.as_deref(), Some("boom"));
    assert_eq!(runs[0].percents_completed, 40);
    assert!(store.claim(r, &["default".into()], 1, t0() + secs(1), DAY).await.expect("claim").is_empty());
    let c = store.claim(r, &["default".into()], 1, t0() + secs(2), DAY).await.expect("claim");
    assert_eq!((c[0].attempt, c[0].task_runs_failed), (2, 1));
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!((runs.len(), runs[1].id, runs[1].status, runs[1].attempt), (2, c[0].run_id, RunStatus::Running, 2));
    store.finish_runs(&[success(&c[0], t0() + secs(3), "{}")]).await.expect("finish");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Success, 0));
}

pub async fn giving_up_makes_a_dead_letter_that_can_be_replayed(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("u")], t0()).await.expect("add")[0].id;
    assert!(matches!(store.retry_task(id, None, t0()).await, Err(taskhost::Error::CannotRetry { .. })));
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    store.finish_runs(&[failure(&c[0], t0(), NextStep::GiveUp)]).await.expect("finish");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Error, 1));
    assert_eq!(task.gave_up_on, Some(t0()));
    let dead = store.list_tasks(&TaskFilter { dead: true, ..Default::default() }).await.expect("list");
    assert_eq!(dead.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
    assert_eq!(dead[0].last_error.as_deref(), Some("boom: it broke"), "a list of dead letters says their last error");
    assert!(!store.has_due_work(&["default".into()], t0() + secs(3600)).await.expect("due"));
    // The unique key is free while the task is dead...
    let other = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("u")], t0()).await.expect("add")[0];
    assert!(other.created);
    // ...so replaying it now would break uniqueness.
    assert!(matches!(store.retry_task(id, None, t0()).await, Err(taskhost::Error::CannotRetry { .. })));
    let c2 = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    store.finish_runs(&[success(&c2[0], t0(), "{}")]).await.expect("finish");
    let attempt = store.retry_task(id, None, t0() + secs(5)).await.expect("replay");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!((task.last_status, task.task_runs_failed, task.gave_up_on), (RunStatus::Scheduled, 0, None));
    assert_eq!(attempt, 2);
    assert_eq!(store.runs_of(id).await.expect("runs").len(), 1, "no run until a claim starts one");
    let c = store.claim(r, &["default".into()], 1, t0() + secs(5), DAY).await.expect("claim");
    assert_eq!((c.len(), c[0].task_id, c[0].attempt), (1, id, 2));
    assert!(matches!(store.retry_task(999_999, None, t0()).await, Err(taskhost::Error::TaskNotFound(999_999))));
}

pub async fn a_late_outcome_does_not_override_a_timeout(store: SharedStore) {
    let id =
        store.add_tasks(&[NewTask::new("h", "{}").with_run_timeout(Duration::from_secs(10))], t0()).await.expect("add")
            [0]
        .id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    assert_eq!(store.time_out_overdue_runs(t0() + secs(9), t0() + secs(9), 100).await.expect("timeout"), 0);
    assert_eq!(store.time_out_overdue_runs(t0() + secs(10), t0() + secs(10), 100).await.expect("timeout"), 1);
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Timeout, 1));
    store.finish_runs(&[success(&c[0], t0() + secs(11), "{}")]).await.expect("finish");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(task.last_status, RunStatus::Timeout, "the late success is ignored");
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs[0].status, RunStatus::Timeout);
    assert_eq!(runs[0].error_code.as_deref(), Some("run-timeout"));
    assert_eq!(runs[0].duration_ms, Some(10_000), "from its start to its timeout");
}

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

/// Generates one test per suite function for a backend. `$open` is an async expression that
/// yields a fresh, empty `SharedStore`; `$open2` one on the same database (for concurrency).
#[macro_export]
macro_rules! store_suite {
    ($open:expr, $open_same:expr) => {
        macro_rules! case {
            ($name:ident) => {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (store, _guard) = $open.await;
                    suite::$name(store).await;
                }
            };
        }
        case!(adds_a_task_whose_first_run_is_made_by_its_claim);
        case!(adds_many_tasks_in_order);
        case!(the_newest_task_id_follows_every_add);
        case!(claims_in_priority_then_fifo_order);
        case!(claims_only_due_tasks_of_the_given_queues);
        case!(respects_the_claim_limit);
        case!(a_large_claim_takes_each_task_once_with_its_own_run);
        case!(unique_key_returns_the_unfinished_task);
        case!(success_updates_the_run_and_the_task);
        case!(a_large_finish_writes_each_run_and_task_with_its_own_values);
        case!(a_finish_of_runs_in_as_many_queues_counts_each_queue);
        case!(a_failure_with_retry_schedules_the_next_attempt);
        case!(giving_up_makes_a_dead_letter_that_can_be_replayed);
        case!(a_succeeded_task_runs_again_as_a_new_attempt_keeping_its_runs);
        case!(a_snoozed_run_schedules_its_task_again_using_no_attempt);
        case!(a_runs_children_are_written_with_its_end_and_only_if_it_ended_well);
        case!(a_runs_join_waits_for_the_tasks_it_queued_before_it);
        case!(a_task_waits_unclaimed_until_each_task_it_runs_after_has_succeeded);
        case!(a_dependency_that_ends_badly_cancels_the_tasks_waiting_for_it_unless_they_run_anyway);
        case!(a_task_after_a_missing_or_dead_task_is_refused_and_nothing_is_added);
        case!(a_join_reads_the_results_of_the_tasks_it_runs_after_within_its_bytes);
        case!(a_signal_makes_the_task_awaiting_it_due_at_once_and_is_read_once);
        case!(a_signal_sent_before_the_wait_is_kept_and_a_failed_run_leaves_it_unread);
        case!(a_signal_to_a_finished_or_unknown_task_is_refused);
        case!(cancelling_with_children_reaches_every_unfinished_task_under_it);
        case!(a_late_outcome_does_not_override_a_timeout);
        case!(timed_out_runners_take_their_runs_with_them);
        case!(the_runner_limit_is_enforced);
        case!(rotation_deletes_only_old_successes_in_batches);
        case!(a_lease_has_one_holder_until_it_expires);
        case!(a_lease_handed_back_is_free_at_once_and_only_by_its_holder);
        case!(a_run_put_back_is_scheduled_again_uncounted);
        case!(one_release_call_ends_puts_back_and_keeps_a_stopped_runs_record);
        case!(tasks_are_listed_by_status_queue_handler_and_death_oldest_first);
        case!(progress_counts_while_running_and_not_after_the_end);
        case!(due_work_counts_due_running_and_retry_awaiting_tasks_of_the_handlers);
        case!(long_texts_are_stored_whole);
        case!(runners_beat_finish_and_are_seen);
        case!(due_tasks_nobody_serves_are_given_up);
        case!(failed_tasks_are_planned_once);
        case!(a_late_outcome_of_a_run_put_back_is_ignored);
        case!(queues_are_paused_resumed_and_listed);
        case!(queues_holding_scheduled_tasks_are_listed_and_each_counts_the_live_runners_claiming_from_it);
        case!(dead_letters_are_replayed_and_finished_tasks_deleted_in_bulk);
        case!(schedules_queue_each_slot_once_even_when_overseers_race);
        case!(cancelled_tasks_never_run_and_their_late_outcomes_are_ignored);
        case!(declared_schedules_follow_the_declaration_and_leave_hand_made_ones);
        case!(statistics_count_runs_as_they_end_and_outlive_rotation);
        case!(a_unique_key_stays_taken_in_the_states_its_task_asked_for);
        case!(a_unique_key_is_let_go_once_its_period_has_passed);
        case!(a_batch_of_successes_is_counted_under_each_runs_handler_queue_and_runner);
        case!(claims_keep_runs_in_flight_within_the_queue_and_handler_limits);
        case!(every_transition_is_made_from_the_states_it_may_start_from_and_refused_from_the_others);
        case!(a_running_run_is_written_once_as_it_ended_and_ids_are_never_given_twice);
        case!(one_claim_gives_each_run_its_own_timeout_and_each_success_its_own_finish_time);
        case!(a_claim_of_ten_thousand_and_more_gives_every_task_a_run_of_its_own);

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_claims_never_share_a_run() {
            let (a, guard) = $open.await;
            let b = $open_same(&guard).await;
            suite::concurrent_claims_never_share_a_run(a, b).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_limited_claims_never_exceed_the_limit() {
            let (a, guard) = $open.await;
            let b = $open_same(&guard).await;
            suite::concurrent_limited_claims_never_exceed_the_limit(a, b).await;
        }
    };
}

/// The tests a database server's store runs besides the suite: migrating twice, an unreachable
/// server, and queueing inside the caller's transaction. `$scratch` yields a fresh database's
/// URL (a guard), `$store` is the backend's store type, `$nowhere` a URL where nothing listens,
/// `$waiting` a query counting claims that wait on a runner's row lock.
#[macro_export]
macro_rules! server_store_suite {
    ($scratch:expr, $store:ty, $nowhere:literal, $waiting:literal) => {
        async fn open() -> (SharedStore, common::ScratchDb) {
            let scratch = $scratch.await;
            (open_same(&scratch).await, scratch)
        }

        async fn open_same(url: &str) -> SharedStore {
            store::open(url, &StoreOptions::default()).await.expect("open the store")
        }

        store_suite!(open(), open_same);

        #[tokio::test]
        async fn migrating_twice_is_harmless() {
            let (store, _url) = open().await;
            store.migrate().await.expect("second migration");
        }

        #[tokio::test]
        async fn an_unreachable_server_is_a_clear_error() {
            let err = store::open($nowhere, &StoreOptions::default())
                .await
                .expect_err("nothing listens on port 1")
                .to_string();
            assert!(err.contains("cannot connect"), "{err}");
        }

        #[tokio::test]
        async fn tasks_can_be_queued_inside_the_callers_own_transaction() {
            use taskhost::model::NewTask;
            let scratch = $scratch.await;
            let store = <$store>::connect(&scratch, &StoreOptions::default()).await.expect("connect");
            taskhost::store::Store::migrate(&store).await.expect("migrate");
            let shared: SharedStore = std::sync::Arc::new(store.clone());
            suite::tasks_queued_in_the_callers_transaction_share_its_fate(shared, |commit| {
                let store = store.clone();
                async move {
                    let mut tx = store.pool().begin().await.expect("begin");
                    let added = <$store>::add_tasks_in(&mut tx, &[NewTask::new("mail", "{}")], chrono::Utc::now())
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

        /// A store on a new database holding one due task, and a runner registered for it.
        async fn one_task_and_a_runner() -> (common::ScratchDb, $store, SharedStore, chrono::DateTime<chrono::Utc>, i64) {
            use taskhost::model::NewTask;
            let scratch = $scratch.await;
            let raw = <$store>::connect(&scratch, &StoreOptions::default()).await.expect("connect");
            taskhost::store::Store::migrate(&raw).await.expect("migrate");
            let store: SharedStore = std::sync::Arc::new(raw.clone());
            let now = chrono::Utc::now();
            store.add_tasks(&[NewTask::new("h", "{}")], now).await.expect("add");
            let runner = store.register_runner(1, "elsewhere", now, 10).await.expect("register");
            (scratch, raw, store, now, runner)
        }

        /// A claim for `runner`, once it waits on its runner's row (which the caller holds locked).
        async fn claim_waiting_on_its_runner(
            raw: &$store,
            store: &SharedStore,
            runner: i64,
            now: chrono::DateTime<chrono::Utc>,
        ) -> tokio::task::JoinHandle<taskhost::Result<Vec<taskhost::model::ClaimedRun>>> {
            let claim = tokio::spawn({
                let store = store.clone();
                async move { store.claim(runner, &["default".into()], 10, now, std::time::Duration::from_secs(60)).await }
            });
            common::wait_until(std::time::Duration::from_secs(30), "the claim waits on its runner's row", || async {
                assert!(!claim.is_finished(), "the claim did not wait on its runner's row");
                sqlx::query_scalar::<_, i64>($waiting).fetch_one(raw.pool()).await.expect("waiting") > 0
            })
            .await;
            claim
        }

        /// A claim that reaches the server while its runner is being timed out (sent before a
        /// partition, say, and delivered after it healed) waits for the time-out, then claims
        /// nothing: before, it took runs for a dead runner that nothing would ever end.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_claim_that_meets_its_runners_time_out_waits_for_it_and_then_claims_nothing() {
            let (_scratch, raw, store, now, runner) = one_task_and_a_runner().await;
            // The overseer's time-out, held open: the runner's row is changed, not yet committed.
            let mut tx = raw.pool().begin().await.expect("begin");
            let mark = format!("UPDATE task_runners SET status = 'timeout' WHERE id = {runner}");
            sqlx::query(&mark).execute(&mut *tx).await.expect("mark");
            let claim = claim_waiting_on_its_runner(&raw, &store, runner, now).await;
            tx.commit().await.expect("commit");
            let claimed = claim.await.expect("join").expect("claim");
            assert!(claimed.is_empty(), "claimed {claimed:?} for a runner timed out");
            let other = store.register_runner(2, "elsewhere", now, 10).await.expect("register");
            let runs = store.claim(other, &["default".into()], 10, now, std::time::Duration::from_secs(60)).await;
            assert_eq!(runs.expect("claim").len(), 1, "the task waits for a live runner");
        }

        /// A claim held up after its pick (here by a lock on its runner's row; in the chaos test by
        /// a partition) holds up no enqueue: on MySQL, under REPEATABLE READ, the pick that reached
        /// the end of the due tasks locked the gap every new task goes into, until its commit.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_enqueue_does_not_wait_for_a_claim_in_flight() {
            use taskhost::model::NewTask;
            let (_scratch, raw, store, now, runner) = one_task_and_a_runner().await;
            let mut tx = raw.pool().begin().await.expect("begin");
            let hold = format!("UPDATE task_runners SET heartbeat_on = heartbeat_on WHERE id = {runner}");
            sqlx::query(&hold).execute(&mut *tx).await.expect("hold the runner's row");
            let claim = claim_waiting_on_its_runner(&raw, &store, runner, now).await;
            // Well within the server's lock wait timeout (50 s by default), which it waited before.
            let added = tokio::time::timeout(
                std::time::Duration::from_secs(20),
                store.add_tasks(&[NewTask::new("h", "{}"), NewTask::new("h", "{}")], now),
            )
            .await
            .expect("the enqueue waited for the claim")
            .expect("add");
            assert_eq!(added.len(), 2);
            tx.commit().await.expect("commit");
            let claimed = claim.await.expect("join").expect("claim");
            assert_eq!(claimed.len(), 1, "the claim goes on once its runner's row is free: {claimed:?}");
        }
    };
}
