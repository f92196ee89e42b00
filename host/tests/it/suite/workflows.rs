//! The store suite's cases for running work again, later and in sequence (issue 47): a succeeded
//! task retried, a snoozed run.

use super::*;

/// A succeeded task is scheduled again by a retry: its next run is a new attempt, its earlier run
/// and results are kept, it holds its unique key again (refused while another unfinished task
/// holds it), and an unfinished task still cannot be retried.
pub async fn a_succeeded_task_runs_again_as_a_new_attempt_keeping_its_runs(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("once")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    let refused = store.retry_task(id, None, t0()).await;
    assert!(
        matches!(&refused, Err(taskhost::Error::CannotRetry { reason, .. }) if reason.contains("it is running")),
        "{refused:?}"
    );
    store.finish_runs(&[success(&c[0], t0() + secs(1), r#"{"n":1}"#)]).await.expect("finish");

    // While another unfinished task holds the key, running it again would break uniqueness.
    let other = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("once")], t0()).await.expect("add")[0];
    assert!(other.created, "a succeeded task no longer holds its key");
    let refused = store.retry_task(id, None, t0() + secs(2)).await;
    assert!(
        matches!(&refused, Err(taskhost::Error::CannotRetry { reason, .. }) if reason.contains("unique key")),
        "{refused:?}"
    );
    store.cancel_tasks(&[other.id], t0() + secs(2)).await.expect("cancel the other");

    let attempt = store.retry_task(id, Some(r#"{"again":true}"#), t0() + secs(3)).await.expect("retry");
    assert_eq!(attempt, 2, "a new attempt");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(
        (task.state, task.last_status, task.data.as_str()),
        (TaskState::Scheduled, RunStatus::Scheduled, r#"{"again":true}"#)
    );
    let third = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("once")], t0()).await.expect("add")[0];
    assert_eq!((third.created, third.id), (false, id), "it holds its key again");

    let c = store.claim(r, &["default".into()], 1, t0() + secs(3), DAY).await.expect("claim");
    assert_eq!((c.len(), c[0].task_id, c[0].attempt), (1, id, 2));
    assert_eq!(c[0].data, r#"{"again":true}"#);
    store.finish_runs(&[success(&c[0], t0() + secs(4), r#"{"n":2}"#)]).await.expect("finish");
    let runs = store.runs_of(id).await.expect("runs");
    let kept: Vec<_> = runs.iter().map(|r| (r.attempt, r.status, r.results.as_deref())).collect();
    assert_eq!(kept, vec![(1, RunStatus::Success, Some(r#"{"n":1}"#)), (2, RunStatus::Success, Some(r#"{"n":2}"#))]);
}

/// A run that snoozed, as the runner reports it: due again at `until`, with partial results.
pub fn snoozed(c: &ClaimedRun, now: DateTime<Utc>, until: DateTime<Utc>) -> RunOutcome {
    let end = RunEnd::Snoozed { until, partial_results: Some(r#"{"page":3}"#.into()) };
    RunOutcome { end, percents_completed: Some(30), ..success(c, now, "") }
}

/// A snoozed run ends as `snoozed` with what it reported; its task is due again at its time, not
/// before, with the attempt given back (one attempt allowed, and still it runs again) and the snooze
/// counted; a replay forgets the snoozes; the snooze of a run cancelled meanwhile changes nothing.
pub async fn a_snoozed_run_schedules_its_task_again_using_no_attempt(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}").with_max_attempts(1)], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    assert_eq!((c[0].attempt, c[0].snoozes), (1, 0));
    store.finish_runs(&[snoozed(&c[0], t0() + secs(1), t0() + secs(60))]).await.expect("snooze");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(
        (task.state, task.last_status, task.scheduled_on),
        (TaskState::Scheduled, RunStatus::Scheduled, t0() + secs(60))
    );
    assert_eq!((task.snoozes, task.task_runs_failed), (1, 0), "counted as a snooze, not a failure");

    let early = store.claim(r, &["default".into()], 1, t0() + secs(59), DAY).await.expect("claim");
    assert!(early.is_empty(), "not due before its snooze ends: {early:?}");
    let c = store.claim(r, &["default".into()], 1, t0() + secs(60), DAY).await.expect("claim");
    assert_eq!((c.len(), c[0].attempt, c[0].snoozes), (1, 1, 1), "the same attempt, the snooze known");
    store.finish_runs(&[success(&c[0], t0() + secs(61), r#"{"n":1}"#)]).await.expect("finish");
    let runs = store.runs_of(id).await.expect("runs");
    let kept: Vec<_> = runs.iter().map(|r| (r.attempt, r.status, r.results.as_deref(), r.percents_completed)).collect();
    assert_eq!(
        kept,
        vec![(1, RunStatus::Snoozed, Some(r#"{"page":3}"#), 30), (1, RunStatus::Success, Some(r#"{"n":1}"#), 100)]
    );
    assert_eq!(runs[0].finished_on, Some(t0() + secs(1)));
    store.retry_task(id, None, t0() + secs(62)).await.expect("retry");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(task.snoozes, 0, "a replay forgets the snoozes");

    let other = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    let c = store.claim(r, &["default".into()], 2, t0() + secs(62), DAY).await.expect("claim");
    let mine = c.iter().find(|c| c.task_id == other).expect("claimed");
    store.cancel_tasks(&[other], t0() + secs(63)).await.expect("cancel");
    store.finish_runs(&[snoozed(mine, t0() + secs(64), t0() + secs(70))]).await.expect("late snooze");
    let task = store.get_task(other).await.expect("get").expect("exists");
    assert_eq!((task.state, task.snoozes), (TaskState::Cancelled, 0), "a late snooze changes nothing");
}
