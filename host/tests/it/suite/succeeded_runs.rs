//! The store suite's case for a run that succeeded (issue 51): it is kept on its task's row, not
//! written to `task_runs`, and every reader finds it as it ended; a replay writes it to `task_runs`
//! before the task runs again, so the task's runs read the same across the replay.

use super::*;

/// A run's id, attempt, status, progress, end, results and duration.
type Seen<'a> = (RunId, u32, RunStatus, u8, Option<DateTime<Utc>>, Option<&'a str>, Option<i64>);
/// A run's runner, component digest, fuel, logs and start.
type Kept<'a> = (Option<RunnerId>, Option<&'a str>, Option<i64>, Option<&'a str>, Option<DateTime<Utc>>);

/// What a reader shows of a run, as a tuple to compare.
fn seen(r: &Run) -> Seen<'_> {
    (r.id, r.attempt, r.status, r.percents_completed, r.finished_on, r.results.as_deref(), r.duration_ms)
}

fn kept(r: &Run) -> Kept<'_> {
    (r.runner_id, r.component_digest.as_deref(), r.fuel_used, r.logs.as_deref(), r.started_on)
}

/// A run that succeeded reads the same from a task's runs, from the details of final tasks and
/// as a dependency's results, and is counted in the statistics; replayed and run again, the
/// task has both runs, each as it ended.
pub async fn a_run_that_succeeded_reads_the_same_everywhere_and_a_replay_keeps_it(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let id = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    let after = store.add_tasks(&[NewTask::new("j", "{}").with_queue("j").with_after([id])], t0()).await;
    let join = after.expect("add")[0].id;
    let first = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    let mut ok = success(&first[0], t0() + secs(1), r#"{"a":1}"#);
    ok.logs = Some("line one\n".into());
    store.finish_runs(&[ok]).await.expect("finish");

    let runs = store.runs_of(id).await.expect("runs");
    let want = (first[0].run_id, 1, RunStatus::Success, 100, Some(t0() + secs(1)), Some(r#"{"a":1}"#), Some(3));
    assert_eq!(runs.iter().map(seen).collect::<Vec<_>>(), [want]);
    let digest = "ab".repeat(32);
    assert_eq!(kept(&runs[0]), (Some(r), Some(digest.as_str()), Some(1234), Some("line one\n"), Some(t0())));
    let details = store.final_details(&[id, join]).await.expect("details");
    assert_eq!(details.len(), 1, "only the final one");
    assert_eq!(details[0].runs.iter().map(|d| seen(&d.run)).collect::<Vec<_>>(), [want], "the details read it too");
    assert_eq!(kept(&details[0].runs[0].run), kept(&runs[0]));
    let results = store.dependency_results(join, 1 << 20).await.expect("results");
    let results: Vec<_> = results.iter().map(|d| (d.id, d.succeeded, d.results.as_deref())).collect();
    assert_eq!(results, [(id, true, Some(r#"{"a":1}"#))], "what the join's run reads");
    let small = store.dependency_results(join, 3).await.expect("results");
    assert!(small[0].results.is_none() && small[0].results_left_out, "left out past the bound");
    let stats = store.stats(Some("h"), None, t0() + secs(2)).await.expect("stats");
    assert_eq!((stats[0].runs.succeeded, stats[0].fuel.as_ref().map(|f| f.max)), (1, Some(1234)), "counted");

    assert_eq!(store.retry_task(id, None, t0() + secs(2)).await.expect("replay"), 2, "the next run is the second");
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs.iter().map(seen).collect::<Vec<_>>(), [want], "the replay kept it");
    assert_eq!(kept(&runs[0]), (Some(r), Some(digest.as_str()), Some(1234), Some("line one\n"), Some(t0())));
    let again = store.claim(r, &["default".into()], 1, t0() + secs(2), DAY).await.expect("claim");
    assert_eq!((again[0].task_id, again[0].attempt), (id, 2));
    let running = store.runs_of(id).await.expect("runs");
    assert_eq!(running.iter().map(|r| r.status).collect::<Vec<_>>(), [RunStatus::Success, RunStatus::Running]);
    let results = store.dependency_results(join, 1 << 20).await.expect("results");
    assert_eq!(results[0].results.as_deref(), Some(r#"{"a":1}"#), "its last ended run's, while it runs again");
    store.finish_runs(&[success(&again[0], t0() + secs(3), r#"{"a":2}"#)]).await.expect("finish");
    let second = (again[0].run_id, 2, RunStatus::Success, 100, Some(t0() + secs(3)), Some(r#"{"a":2}"#), Some(3));
    let runs = store.runs_of(id).await.expect("runs");
    assert_eq!(runs.iter().map(seen).collect::<Vec<_>>(), [want, second]);
    let details = store.final_details(&[id]).await.expect("details");
    assert_eq!(details[0].runs.iter().map(|d| seen(&d.run)).collect::<Vec<_>>(), [want, second]);
    let results = store.dependency_results(join, 1 << 20).await.expect("results");
    assert_eq!(results[0].results.as_deref(), Some(r#"{"a":2}"#), "the latest run's");
    let stats = store.stats(Some("h"), None, t0() + secs(4)).await.expect("stats");
    assert_eq!(stats[0].runs.succeeded, 2);
}
