//! The store suite's cases for tasks that run after others (issue 47): a join waits, unclaimed,
//! until each task it runs after has succeeded; one that ends badly cancels the tasks waiting for
//! it, and theirs in turn, except those that run anyway.

use super::*;
use taskhost::store::{BulkFilter, Replay};

async fn add(store: &SharedStore, t: NewTask) -> TaskId {
    store.add_tasks(&[t], t0()).await.expect("add")[0].id
}

/// Claim the due task `id` (alone in `queue`) and end it with `end`.
async fn end_one(
    store: &SharedStore,
    r: RunnerId,
    queue: &str,
    at: DateTime<Utc>,
    end: impl Fn(&ClaimedRun) -> RunOutcome,
) {
    let c = store.claim(r, &[queue.to_string()], 1, at, DAY).await.expect("claim");
    assert_eq!(c.len(), 1, "{queue}: one task due");
    store.finish_runs(&[end(&c[0])]).await.expect("finish");
}

async fn state(store: &SharedStore, id: TaskId) -> (TaskState, u32) {
    let t = store.get_task(id).await.expect("get").expect("exists");
    (t.state, t.waiting_for)
}

/// A join waits, never claimed, until each task it runs after has succeeded, then is due when the
/// last one ended (or at its own time, if later); a task after one succeeded already is due at once.
pub async fn a_task_waits_unclaimed_until_each_task_it_runs_after_has_succeeded(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let a = add(&store, NewTask::new("a", "{}").with_queue("a")).await;
    let b = add(&store, NewTask::new("b", "{}").with_queue("b")).await;
    let join = add(&store, NewTask::new("j", "{}").with_queue("j").with_after([a, b, a])).await;
    let later =
        add(&store, NewTask::new("j", "{}").with_queue("later").with_after([a]).with_scheduled_on(t0() + secs(3600)))
            .await;
    assert_eq!(state(&store, join).await, (TaskState::Waiting, 2), "a listed twice counts once");
    let waiting = TaskFilter { state: Some(TaskState::Waiting), ..Default::default() };
    assert_eq!(store.list_tasks(&waiting).await.expect("list").len(), 2);
    assert!(store.claim(r, &["j".into()], 10, t0() + secs(1), DAY).await.expect("claim").is_empty(), "waiting");

    end_one(&store, r, "a", t0() + secs(1), |c| success(c, t0() + secs(1), "{}")).await;
    assert_eq!(state(&store, join).await, (TaskState::Waiting, 1));
    let task = store.get_task(later).await.expect("get").expect("exists");
    assert_eq!((task.state, task.scheduled_on), (TaskState::Scheduled, t0() + secs(3600)), "its own time is later");
    assert!(store.claim(r, &["j".into()], 10, t0() + secs(2), DAY).await.expect("claim").is_empty(), "still waiting");

    end_one(&store, r, "b", t0() + secs(2), |c| success(c, t0() + secs(5), "{}")).await;
    let task = store.get_task(join).await.expect("get").expect("exists");
    assert_eq!((task.state, task.scheduled_on), (TaskState::Scheduled, t0() + secs(5)), "due when the last ended");
    let deps = store.dependencies(join).await.expect("dependencies");
    let deps: Vec<_> = deps.iter().map(|d| (d.id, d.state)).collect();
    assert_eq!(deps, vec![(a, TaskState::Succeeded), (b, TaskState::Succeeded)]);
    let c = store.claim(r, &["j".into()], 10, t0() + secs(5), DAY).await.expect("claim");
    assert_eq!(c.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![join]);

    let after_done = add(&store, NewTask::new("j", "{}").with_queue("j").with_after([a])).await;
    assert_eq!(state(&store, after_done).await, (TaskState::Scheduled, 0), "its dependency succeeded already");
}

/// A task that is given up on cancels the tasks waiting for it, theirs in turn, each with a run that
/// says why; one that runs anyway is due instead. An operator's cancel does the same, and a
/// waiting task can itself be cancelled.
pub async fn a_dependency_that_ends_badly_cancels_the_tasks_waiting_for_it_unless_they_run_anyway(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let c = add(&store, NewTask::new("c", "{}").with_queue("c")).await;
    let d = add(&store, NewTask::new("d", "{}").with_queue("d").with_after([c])).await;
    let e = add(&store, NewTask::new("e", "{}").with_queue("e").with_after([d])).await;
    let f = add(&store, NewTask::new("f", "{}").with_queue("f").with_after([c]).with_run_anyway()).await;
    end_one(&store, r, "c", t0() + secs(1), |run| failure(run, t0() + secs(1), NextStep::GiveUp)).await;
    for (id, name) in [(d, "d"), (e, "e, after d")] {
        assert_eq!(state(&store, id).await.0, TaskState::Cancelled, "{name}");
        let runs = store.runs_of(id).await.expect("runs");
        let why: Vec<_> = runs.iter().map(|r| (r.status, r.error_code.as_deref())).collect();
        assert_eq!(why, vec![(RunStatus::Cancelled, Some(codes::DEPENDENCY_FAILED))], "{name}");
    }
    assert_eq!(state(&store, f).await, (TaskState::Scheduled, 0), "it runs anyway");

    let g = add(&store, NewTask::new("g", "{}").with_queue("g")).await;
    let h = add(&store, NewTask::new("h", "{}").with_queue("h").with_after([g])).await;
    let i = add(&store, NewTask::new("i", "{}").with_queue("i").with_after([g])).await;
    assert_eq!(store.cancel_tasks(&[i], t0() + secs(2)).await.expect("cancel"), vec![i], "a waiting task");
    store.cancel_tasks(&[g], t0() + secs(3)).await.expect("cancel");
    assert_eq!(state(&store, h).await.0, TaskState::Cancelled, "cancelled with the task it ran after");
    let runs = store.runs_of(i).await.expect("runs");
    assert_eq!(runs[0].error_code.as_deref(), Some(codes::CANCELLED), "the operator's own cancel");
}

/// A task that succeeded, then is retried while a task waits for it and another: that task waits
/// for its new end, and is cancelled when the retry is; one retried after dying, which a task
/// running anyway counted met, is waited for again too. One already released is not held back.
pub async fn a_dependency_retried_while_a_task_waits_for_it_is_waited_for_again(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let a = add(&store, NewTask::new("a", "{}").with_queue("a")).await;
    let b = add(&store, NewTask::new("b", "{}").with_queue("b")).await;
    let join = add(&store, NewTask::new("j", "{}").with_queue("j").with_after([a, b])).await;
    let released = add(&store, NewTask::new("j", "{}").with_queue("r").with_after([a])).await;
    end_one(&store, r, "a", t0() + secs(1), |c| success(c, t0() + secs(1), "{}")).await;
    assert_eq!(state(&store, join).await, (TaskState::Waiting, 1));
    assert_eq!(state(&store, released).await, (TaskState::Scheduled, 0));

    store.retry_task(a, None, t0() + secs(2)).await.expect("retry");
    assert_eq!(state(&store, join).await, (TaskState::Waiting, 2), "it waits for the retry's end");
    assert_eq!(state(&store, released).await, (TaskState::Scheduled, 0), "released already");
    store.cancel_tasks(&[a], t0() + secs(3)).await.expect("cancel");
    assert_eq!(state(&store, join).await.0, TaskState::Cancelled, "the retry ended badly");
    let runs = store.runs_of(join).await.expect("runs");
    assert_eq!(runs[0].error_code.as_deref(), Some(codes::DEPENDENCY_FAILED));

    // Run anyway: two dead dependencies counted met, replayed in bulk, are waited for again,
    // then met by their successes.
    let c = add(&store, NewTask::new("c", "{}").with_queue("c")).await;
    let d = add(&store, NewTask::new("c", "{}").with_queue("d")).await;
    let e = add(&store, NewTask::new("e", "{}").with_queue("e")).await;
    let anyway = add(&store, NewTask::new("j", "{}").with_queue("j").with_after([c, d, e]).with_run_anyway()).await;
    for (queue, at) in [("c", 4), ("d", 5)] {
        end_one(&store, r, queue, t0() + secs(at), |run| failure(run, t0() + secs(at), NextStep::GiveUp)).await;
    }
    assert_eq!(state(&store, anyway).await, (TaskState::Waiting, 1));
    let dead = BulkFilter { handler: Some("c".into()), ..Default::default() };
    assert_eq!(store.replay(Replay::Dead, &dead, t0() + secs(6)).await.expect("replay"), 2);
    assert_eq!(state(&store, anyway).await, (TaskState::Waiting, 3), "both waited for again");
    for (queue, at) in [("c", 7), ("d", 8), ("e", 9)] {
        end_one(&store, r, queue, t0() + secs(at), |run| success(run, t0() + secs(at), "{}")).await;
    }
    assert_eq!(state(&store, anyway).await, (TaskState::Scheduled, 0));
}

/// A task after one that does not exist, or after one dead or cancelled already (unless it runs
/// anyway), is refused by name, and nothing of its batch is added, nor itself when added alone.
pub async fn a_task_after_a_missing_or_dead_task_is_refused_and_nothing_is_added(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let dead = add(&store, NewTask::new("x", "{}").with_queue("x")).await;
    end_one(&store, r, "x", t0() + secs(1), |run| failure(run, t0() + secs(1), NextStep::GiveUp)).await;
    let newest = store.newest_task_id().await.expect("newest");
    let missing = newest + 1000;
    let refusals = [
        (NewTask::new("y", "{}").with_after([missing]), format!("there is no task {missing}")),
        (NewTask::new("y", "{}").with_after([dead]), format!("task {dead} is dead")),
    ];
    for (t, words) in refusals {
        let err = store.add_tasks(&[NewTask::new("ok", "{}"), t.clone()], t0()).await.expect_err("refused");
        // Named by its place in the batch, as the checks before the store name a task.
        assert!(err.to_string().starts_with("tasks[1]: invalid after: ") && err.to_string().contains(&words), "{err}");
        assert_eq!(store.newest_task_id().await.expect("newest"), newest, "nothing added");
        let err = store.add_tasks(&[t], t0()).await.expect_err("refused alone");
        assert!(err.to_string().starts_with("invalid after: ") && err.to_string().contains(&words), "{err}");
        assert_eq!(store.newest_task_id().await.expect("newest"), newest, "nothing added alone");
    }
    let anyway = add(&store, NewTask::new("y", "{}").with_after([dead]).with_run_anyway()).await;
    assert_eq!(state(&store, anyway).await, (TaskState::Scheduled, 0), "it runs anyway");
}

/// A join reads the tasks it runs after in id order, each with its last run's results while they
/// fit the bytes it may hold (bytes, not characters), those past it left out; one dead (for a
/// join that runs anyway) says it did not succeed. A task added after none reads none.
pub async fn a_join_reads_the_results_of_the_tasks_it_runs_after_within_its_bytes(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let a = add(&store, NewTask::new("a", "{}").with_queue("a")).await;
    let b = add(&store, NewTask::new("b", "{}").with_queue("b")).await;
    let c = add(&store, NewTask::new("c", "{}").with_queue("c")).await;
    let d = add(&store, NewTask::new("d", "{}").with_queue("d")).await;
    let join = add(&store, NewTask::new("j", "{}").with_queue("j").with_after([d, c, b, a]).with_run_anyway()).await;
    end_one(&store, r, "a", t0() + secs(1), |run| success(run, t0() + secs(1), r#"{"n":1}"#)).await;
    // Four bytes, three characters.
    end_one(&store, r, "b", t0() + secs(1), |run| success(run, t0() + secs(1), "\"\u{fc}\"")).await;
    end_one(&store, r, "c", t0() + secs(1), |run| success(run, t0() + secs(1), "[3]")).await;
    end_one(&store, r, "d", t0() + secs(1), |run| failure(run, t0() + secs(1), NextStep::GiveUp)).await;
    assert_eq!(state(&store, join).await, (TaskState::Scheduled, 0), "due: it runs anyway");

    let read = |max: usize| {
        let store = store.clone();
        async move {
            let found = store.dependency_results(join, max).await.expect("read");
            found.into_iter().map(|d| (d.id, d.handler, d.succeeded, d.results, d.results_left_out)).collect::<Vec<_>>()
        }
    };
    let all = read(1 << 20).await;
    let expected = vec![
        (a, "a".to_string(), true, Some(r#"{"n":1}"#.to_string()), false),
        (b, "b".into(), true, Some("\"\u{fc}\"".into()), false),
        (c, "c".into(), true, Some("[3]".into()), false),
        (d, "d".into(), false, None, false),
    ];
    assert_eq!(all, expected);
    let cut = read(10).await;
    let kept: Vec<_> = cut.iter().map(|d| (d.3.is_some(), d.4)).collect();
    assert_eq!(
        kept,
        vec![(true, false), (false, true), (true, false), (false, false)],
        "7 + 3 bytes of 10: b's 4 do not fit"
    );
    assert!(store.dependency_results(a, 1 << 20).await.expect("read").is_empty(), "a runs after none");
}
