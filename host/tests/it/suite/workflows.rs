//! The store suite's cases for running work again and in sequence (issue 47): a succeeded task
//! retried.

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
