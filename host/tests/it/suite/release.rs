//! The store suite's case for the one call that applies how claimed runs leave their worker.

use taskhost::model::*;
use taskhost::store::SharedStore;

use super::{failure, runner, secs, success, t0, DAY};

/// One call ends runs (a success, a failure given up), puts one back, and keeps what a
/// cancelled run left; a put-back of a run no longer running and a second keep change nothing.
pub async fn one_release_call_ends_puts_back_and_keeps_a_stopped_runs_record(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let new: Vec<NewTask> = (0..4).map(|_| NewTask::new("h", "{}")).collect();
    let tasks: Vec<TaskId> = store.add_tasks(&new, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let queues = [DEFAULT_QUEUE.to_string()];
    let c = store.claim(r, &queues, 10, t0(), DAY).await.expect("claim");
    assert_eq!(c.len(), 4);
    // The fourth is cancelled elsewhere while its guest runs.
    store.cancel_tasks(&[tasks[3]], t0() + secs(1)).await.expect("cancel");

    let done = success(&c[0], t0() + secs(2), r#"{"ok":true}"#);
    let dead = failure(&c[1], t0() + secs(2), NextStep::GiveUp);
    let stopped = StoppedRun {
        run_id: c[3].run_id,
        component_digest: None,
        fuel_used: Some(77),
        logs: Some("to the stop".into()),
        fuel_key: None,
    };
    let releases = [
        RunRelease::Ended(&done),
        RunRelease::Ended(&dead),
        RunRelease::PutBack { run: c[2].run_id, at: t0() + secs(9) },
        RunRelease::PutBack { run: c[3].run_id, at: t0() + secs(9) },
        RunRelease::Stopped(&stopped),
    ];
    let released = store.release_runs(&releases).await.expect("release");
    assert_eq!(released, Released { put_back: vec![c[2].run_id], kept: vec![c[3].run_id] });

    let task = |i: usize| {
        let store = store.clone();
        let id = tasks[i];
        async move { store.get_task(id).await.expect("get").expect("task") }
    };
    assert_eq!(task(0).await.state, TaskState::Succeeded);
    assert_eq!(task(1).await.state, TaskState::Dead);
    let back = task(2).await;
    assert_eq!((back.state, back.task_runs_failed, back.scheduled_on), (TaskState::Scheduled, 0, t0() + secs(9)));
    assert!(store.runs_of(tasks[2]).await.expect("runs").is_empty(), "a run put back leaves no row");
    assert_eq!(task(3).await.state, TaskState::Cancelled, "a put-back does not revive a cancelled task");
    let runs = store.runs_of(tasks[3]).await.expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].status, runs[0].fuel_used, runs[0].logs.as_deref()),
        (RunStatus::Cancelled, Some(77), Some("to the stop"))
    );

    // Kept once: a second record of the same stop changes nothing; nothing at all is a no-op.
    let again = StoppedRun { logs: Some("again".into()), ..stopped.clone() };
    assert_eq!(store.release_runs(&[RunRelease::Stopped(&again)]).await.expect("again"), Released::default());
    assert_eq!(store.runs_of(tasks[3]).await.expect("runs")[0].logs.as_deref(), Some("to the stop"));
    assert_eq!(store.release_runs(&[]).await.expect("none"), Released::default());
    assert!(store.running_runs_of(r).await.expect("running").is_empty());
}
