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
    let end = RunEnd::Snoozed {
        until,
        awaiting: None,
        partial_results: Some(r#"{"page":3}"#.into()),
        children: Default::default(),
    };
    RunOutcome { end, percents_completed: Some(30), ..success(c, now, "") }
}

/// A snoozed run ends as `snoozed` with what it reported; its task is due again at its time, not
/// before, with the attempt given back (one attempt allowed, and still it runs again) and the snooze
/// counted; a replay forgets the snoozes; the snooze of a run cancelled meanwhile changes nothing.
/// The statistics count snoozed runs apart, and tasks waiting for others.
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

    // The statistics count the snooze as an ending of its own (the late one not at all), and a task
    // waiting for another as waiting.
    let after = NewTask::new("h", "{}").with_after([id]);
    store.add_tasks(&[after], t0() + secs(65)).await.expect("add after");
    let stats = store.stats(Some("h"), None, t0() + secs(66)).await.expect("stats");
    let runs = taskhost::stats::RunCounts { succeeded: 1, cancelled: 1, snoozed: 1, ..Default::default() };
    assert_eq!(stats[0].runs, runs);
    assert_eq!(stats[0].failure_rate, 0.0, "a snooze is not a failure");
    assert_eq!((stats[0].last_minute, stats[0].tasks.waiting, stats[0].tasks.running), (3, 1, 1));
}

/// A success that queued `children`.
fn with_children(c: &ClaimedRun, now: DateTime<Utc>, children: Vec<NewTask>) -> RunOutcome {
    RunOutcome { end: RunEnd::Success { results: None, children: children.into() }, ..success(c, now, "") }
}

/// The tasks a run queued are written with its success (or snooze), in its transaction: each names
/// its parent and is one level deeper, due when asked; one whose unique key an unfinished task holds
/// is not added (that task stays no one's child); the children of a run ended elsewhere meanwhile
/// (cancelled) are not written.
pub async fn a_runs_children_are_written_with_its_end_and_only_if_it_ended_well(store: SharedStore) {
    let held = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("held")], t0()).await.expect("add")[0].id;
    let parent = store.add_tasks(&[NewTask::new("p", "{}")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 2, t0(), DAY).await.expect("claim");
    let c = c.into_iter().find(|c| c.task_id == parent).expect("the parent claimed");
    let children = vec![
        NewTask::new("a", r#"{"i":1}"#),
        NewTask::new("b", r#"{"i":2}"#).with_queue("q2").with_scheduled_on(t0() + secs(30)),
        NewTask::new("h", "{}").with_unique_key("held"),
    ];
    store.finish_runs(&[with_children(&c, t0() + secs(1), children)]).await.expect("finish");
    let filter = TaskFilter { parent: Some(parent), newest_first: false, ..Default::default() };
    let kids = store.list_tasks(&filter).await.expect("list");
    let seen: Vec<_> = kids.iter().map(|k| (k.handler.as_str(), k.queue.as_str(), k.parent_id, k.depth)).collect();
    assert_eq!(seen, vec![("a", "default", Some(parent), 1), ("b", "q2", Some(parent), 1)]);
    assert_eq!((kids[0].scheduled_on, kids[1].scheduled_on), (t0() + secs(1), t0() + secs(30)));
    assert_eq!((kids[0].queued_on, kids[0].state), (t0() + secs(1), TaskState::Scheduled));
    let held = store.get_task(held).await.expect("get").expect("exists");
    assert_eq!((held.parent_id, held.depth), (None, 0), "a task holding the key stays no one's child");

    // A grandchild is two deep; a run cancelled meanwhile queues nothing.
    let a = kids[0].id;
    let c = store.claim(r, &["default".into()], 5, t0() + secs(2), DAY).await.expect("claim");
    let mine = c.iter().find(|c| c.task_id == a).expect("the child claimed");
    assert_eq!(mine.depth, 1, "a claim knows its task's depth");
    store.finish_runs(&[with_children(mine, t0() + secs(3), vec![NewTask::new("g", "{}")])]).await.expect("finish");
    let grand = store.list_tasks(&TaskFilter { parent: Some(a), ..Default::default() }).await.expect("list");
    assert_eq!((grand.len(), grand[0].depth), (1, 2));
    let other = store.add_tasks(&[NewTask::new("p", "{}")], t0()).await.expect("add")[0].id;
    let c = store.claim(r, &["default".into()], 10, t0() + secs(4), DAY).await.expect("claim");
    let mine = c.iter().find(|c| c.task_id == other).expect("claimed");
    store.cancel_tasks(&[other], t0() + secs(5)).await.expect("cancel");
    store.finish_runs(&[with_children(mine, t0() + secs(6), vec![NewTask::new("late", "{}")])]).await.expect("late");
    let none = store.list_tasks(&TaskFilter { parent: Some(other), ..Default::default() }).await.expect("list");
    assert!(none.is_empty(), "a run ended elsewhere queues nothing: {none:?}");

    // A snooze writes its children too.
    let snoozer = store.add_tasks(&[NewTask::new("p", "{}")], t0()).await.expect("add")[0].id;
    let c = store.claim(r, &["default".into()], 10, t0() + secs(7), DAY).await.expect("claim");
    let mine = c.iter().find(|c| c.task_id == snoozer).expect("claimed");
    let end = RunEnd::Snoozed {
        until: t0() + secs(60),
        awaiting: None,
        partial_results: None,
        children: vec![NewTask::new("s", "{}")].into(),
    };
    store.finish_runs(&[RunOutcome { end, ..success(mine, t0() + secs(8), "") }]).await.expect("snooze");
    let kids = store.list_tasks(&TaskFilter { parent: Some(snoozer), ..Default::default() }).await.expect("list");
    assert_eq!(kids.len(), 1, "a snoozed run's children are written");
}

/// A join a run queued (`enqueue-after`) is written after the tasks its numbers name, waiting for
/// each: the parts written in bulk before it; a part kept out because an unfinished task holds its
/// key is not waited for (a join waits only for its run's tasks). The join is due once they ran.
pub async fn a_runs_join_waits_for_the_tasks_it_queued_before_it(store: SharedStore) {
    let held = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("k").with_queue("h")], t0()).await;
    let held = held.expect("add")[0].id;
    let parent = store.add_tasks(&[NewTask::new("p", "{}").with_queue("p")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["p".into()], 1, t0(), DAY).await.expect("claim");
    let mut queued = QueuedTasks::from(vec![
        NewTask::new("a", "{}").with_queue("parts"),
        NewTask::new("b", "{}").with_queue("parts"),
        NewTask::new("h", "{}").with_unique_key("k"),
        NewTask::new("j", "{}").with_queue("j"),
        NewTask::new("z", "{}").with_queue("after"),
    ]);
    queued.after.insert(3, vec![0, 1, 2]);
    let end = RunEnd::Success { results: None, children: queued };
    store.finish_runs(&[RunOutcome { end, ..success(&c[0], t0() + secs(1), "") }]).await.expect("finish");
    let filter = TaskFilter { parent: Some(parent), newest_first: false, ..Default::default() };
    let kids = store.list_tasks(&filter).await.expect("list");
    let names: Vec<&str> = kids.iter().map(|k| k.handler.as_str()).collect();
    assert_eq!(names, vec!["a", "b", "j", "z"], "the key's holder stays no one's child");
    let join = &kids[2];
    assert_eq!((join.state, join.waiting_for), (TaskState::Waiting, 2));
    let deps: Vec<TaskId> = store.dependencies(join.id).await.expect("deps").iter().map(|d| d.id).collect();
    assert_eq!(deps, vec![kids[0].id, kids[1].id], "not the task holding the key ({held})");

    let at = t0() + secs(2);
    let c = store.claim(r, &["parts".into()], 5, at, DAY).await.expect("claim");
    assert_eq!(c.len(), 2);
    let ended: Vec<RunOutcome> = c.iter().map(|c| success(c, at, "{}")).collect();
    store.finish_runs(&ended).await.expect("finish");
    let join = store.get_task(join.id).await.expect("get").expect("exists");
    assert_eq!((join.state, join.waiting_for), (TaskState::Scheduled, 0), "due once both parts succeeded");
}

/// A run's children, as the runner reports them with its success.
fn succeeded_with(c: &ClaimedRun, now: DateTime<Utc>, children: Vec<NewTask>) -> RunOutcome {
    RunOutcome { end: RunEnd::Success { results: Some("{}".into()), children: children.into() }, ..success(c, now, "") }
}

/// Cancelling with children reaches every unfinished task under the task, level by level, a
/// running one too, under a finished task as well; a task beside them is untouched.
pub async fn cancelling_with_children_reaches_every_unfinished_task_under_it(store: SharedStore) {
    let beside = NewTask::new("beside", "{}").with_queue("other");
    let added = store.add_tasks(&[NewTask::new("top", "{}"), beside], t0()).await.expect("add");
    let (top, beside) = (added[0].id, added[1].id);
    let r = runner(&store, t0()).await;
    let q = ["default".to_string()];
    let c = store.claim(r, &q, 1, t0(), DAY).await.expect("claim");
    let kids = vec![NewTask::new("mid", "{}"), NewTask::new("leaf", "{}")];
    store.finish_runs(&[succeeded_with(&c[0], t0() + secs(1), kids)]).await.expect("finish");
    // `mid` runs and queues a grandchild; `leaf` is left running.
    let c = store.claim(r, &q, 2, t0() + secs(2), DAY).await.expect("claim");
    let mid = c.iter().find(|c| c.handler == "mid").expect("mid");
    let leaf = c.iter().find(|c| c.handler == "leaf").expect("leaf").task_id;
    store.finish_runs(&[succeeded_with(mid, t0() + secs(3), vec![NewTask::new("grand", "{}")])]).await.expect("mid");
    let grand =
        store.list_tasks(&TaskFilter { parent: Some(mid.task_id), ..TaskFilter::default() }).await.expect("list");

    let done = store.cancel_with_children(&[top], t0() + secs(4)).await.expect("cancel");
    let mut expected = vec![leaf, grand[0].id];
    expected.sort_unstable();
    assert_eq!(done, expected, "the finished top and mid are not cancelled, all under them is");
    for (id, state) in
        [(top, TaskState::Succeeded), (mid.task_id, TaskState::Succeeded), (beside, TaskState::Scheduled)]
    {
        assert_eq!(store.get_task(id).await.expect("get").expect("exists").state, state, "task {id}");
    }
    for id in expected {
        assert_eq!(store.get_task(id).await.expect("get").expect("exists").state, TaskState::Cancelled, "task {id}");
    }
}
