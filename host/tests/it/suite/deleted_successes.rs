//! The store suite's cases for a queue that deletes its successes (issue 51, `on_success =
//! delete`): a success deletes its task where nothing reads it again and leaves its end in
//! `task_ends`, which the event stream, the counts, a later `after` and rotation read.

use taskhost::store::{LimitEdit, LimitSetBy, Look};

use super::*;

/// A success of `c` in a queue that deletes its successes.
fn deleting(c: &ClaimedRun, now: DateTime<Utc>) -> RunOutcome {
    RunOutcome { delete_on_success: true, ..success(c, now, r#"{"ok":true}"#) }
}

/// Whether `id` has a row.
async fn there(store: &SharedStore, id: TaskId) -> bool {
    store.get_task(id).await.expect("get").is_some()
}

/// A queue's `on_success` is kept with its other limits, read by the workers, and taken out as
/// they are.
pub async fn a_queues_on_success_is_set_read_and_taken_out_as_its_other_limits(store: SharedStore) {
    let delete = Limit { on_success: OnSuccess::Delete, ..Limit::default() };
    store.set_limit(LimitScope::Queue, "gone", LimitEdit::Set(delete), LimitSetBy::Operator, t0()).await.expect("set");
    let limits = store.limits_in_force().await.expect("limits");
    assert!(limits.deletes_successes("gone") && !limits.deletes_successes("default"));
    assert!(!limits.limits_claims_of("gone"), "it limits no claim");
    let listed = store.limits(t0(), None).await.expect("list");
    assert_eq!(
        listed.iter().map(|l| (l.target.as_str(), l.on_success)).collect::<Vec<_>>(),
        [("gone", OnSuccess::Delete)]
    );
    let keep = LimitChange { on_success: Some(OnSuccess::Keep), ..LimitChange::default() };
    store
        .set_limit(LimitScope::Queue, "gone", LimitEdit::Change(&keep), LimitSetBy::Operator, t0())
        .await
        .expect("set");
    assert!(store.limits_in_force().await.expect("limits").queues.is_empty(), "keep is no limit: taken out");
    let on_a_key = store.set_limit(LimitScope::Key, "k", LimitEdit::Set(delete), LimitSetBy::Operator, t0()).await;
    assert!(on_a_key.is_err(), "a key deletes nothing");
}

/// Successes that may delete their tasks leave only their ends, written a row a queue and
/// handler of each batch: the tasks read as gone, and their ends are counted, told by the event
/// stream (by when they ended and by id), met by a later `after`, and rotated with the finished
/// tasks.
pub async fn a_success_that_deletes_its_task_leaves_its_end_for_the_stream_the_counts_and_after(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let tasks = [NewTask::new("h", "{}"), NewTask::new("h", "{}"), NewTask::new("g", "{}"), NewTask::new("h", "{}")];
    let tasks = tasks.map(|t| t.with_queue("gone"));
    let ids: Vec<TaskId> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let claimed = store.claim(r, &["gone".into()], 4, t0(), DAY).await.expect("claim");
    let outcomes: Vec<RunOutcome> = claimed.iter().map(|c| deleting(c, t0() + secs(1))).collect();
    store.finish_runs(&outcomes[..3]).await.expect("finish");
    store.finish_runs(&outcomes[3..]).await.expect("finish, another batch");

    for id in &ids {
        assert!(!there(&store, *id).await, "{id} deleted");
    }
    assert_eq!(store.counts().await.expect("counts").success, 4, "counted as successes kept");
    let stats = store.stats(Some("h"), None, t0() + secs(2)).await.expect("stats");
    assert_eq!(stats[0].runs.succeeded, 3, "in the statistics");
    let look = Look { finished_after: Some(t0()), ids: vec![ids[1], ids[2]], limit: 100, ..Look::default() };
    let glimpse = store.glimpse(&look).await.expect("glimpse");
    let brief =
        |b: &taskhost::store::Brief| (b.id, b.handler.clone(), b.queue.clone(), b.state, b.attempt, b.finished_on);
    let want =
        |i: usize, h: &str| (ids[i], h.to_string(), "gone".to_string(), TaskState::Succeeded, 1, Some(t0() + secs(1)));
    let mut finished: Vec<_> = glimpse.finished.iter().map(brief).collect();
    finished.sort_by_key(|b| b.0);
    assert_eq!(finished, [want(0, "h"), want(1, "h"), want(2, "g"), want(3, "h")], "the stream's");
    assert_eq!(glimpse.asked.iter().map(brief).collect::<Vec<_>>(), [want(1, "h"), want(2, "g")], "asked by id");
    let window = Look { finished_window: Some((t0(), t0() + secs(2))), limit: 100, ..Look::default() };
    let sum: i64 = ids.iter().sum();
    assert_eq!(store.glimpse(&window).await.expect("glimpse").window, Some((4, sum, 4)), "summed in its window");
    let cut = Look { finished_after: Some(t0()), limit: 1, ..Look::default() };
    let cut = store.glimpse(&cut).await.expect("glimpse");
    assert!(!cut.finished.is_empty() && cut.finished_cut == Some(t0() + secs(1)), "a whole row, cut after it");

    let after = [NewTask::new("j", "{}").with_after([ids[1], ids[3]])];
    let after = store.add_tasks(&after, t0() + secs(2)).await.expect("after them");
    let next = store.get_task(after[0].id).await.expect("get").expect("added");
    assert_eq!(next.state, TaskState::Scheduled, "their ends count as met");
    // Each listed as succeeded, and told to the join's run (without results: none are kept).
    let deps = store.dependencies(next.id).await.expect("dependencies");
    let deps: Vec<_> = deps.iter().map(|d| (d.id, d.state)).collect();
    assert_eq!(deps, [(ids[1], TaskState::Succeeded), (ids[3], TaskState::Succeeded)]);
    let told = store.dependency_results(next.id, 1 << 20).await.expect("results");
    let told: Vec<_> = told.iter().map(|d| (d.id, d.handler.as_str(), d.succeeded, d.results.clone())).collect();
    assert_eq!(told, [(ids[1], "h", true, None), (ids[3], "h", true, None)]);
    let missing = store.add_tasks(&[NewTask::new("j", "{}").with_after([ids[3] + 100])], t0() + secs(2)).await;
    assert!(missing.is_err(), "a task that never was is still refused");

    assert_eq!(store.rotate(t0() + secs(3), 100).await.expect("rotate"), 4, "their ends rotated");
    assert_eq!(store.counts().await.expect("counts").success, 0);
    assert!(store.glimpse(&look).await.expect("glimpse").finished.is_empty());
}

/// A task that a wait, a dependent or a signal names, one with a unique key, one whose run
/// failed before and one whose run queued children are kept when they succeed, and so is a
/// success whose queue does not delete: each reads as succeeded.
pub async fn a_task_something_reads_again_is_kept_when_its_success_would_delete_it(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let q = |h: &str| NewTask::new(h, "{}").with_queue("gone");
    let tasks = [
        q("waited"),
        q("depended"),
        q("signalled"),
        q("unique").with_unique_key("u"),
        q("retried"),
        q("parent"),
        q("kept"),
    ];
    let ids: Vec<TaskId> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    assert_eq!(store.keep_tasks(&[ids[0]]).await.expect("keep"), 0, "no queue deletes: a wait writes nothing");
    // A signal keeps its task whatever its queue does now (a run claimed under another setting
    // may delete it).
    store.signal(ids[2], "go", "{}", t0()).await.expect("signal");
    let delete = Limit { on_success: OnSuccess::Delete, ..Limit::default() };
    store.set_limit(LimitScope::Queue, "gone", LimitEdit::Set(delete), LimitSetBy::Operator, t0()).await.expect("set");
    let elsewhere = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    assert_eq!(store.keep_tasks(&[elsewhere]).await.expect("keep"), 0, "its queue keeps: nothing written");
    assert_eq!(store.keep_tasks(&[ids[0]]).await.expect("keep"), 1, "a wait marks it");
    let dependent = store.add_tasks(&[NewTask::new("j", "{}").with_after([ids[1]])], t0()).await.expect("add")[0].id;
    let claimed = store.claim(r, &["gone".into()], 10, t0(), DAY).await.expect("claim");
    let of = |h: &str| claimed.iter().find(|c| c.handler == h).expect("claimed");
    store
        .finish_runs(&[failure(of("retried"), t0() + secs(1), NextStep::RetryAt(t0() + secs(1)))])
        .await
        .expect("fail");
    let again = store.claim(r, &["gone".into()], 10, t0() + secs(2), DAY).await.expect("claim");
    let mut outcomes: Vec<RunOutcome> =
        claimed.iter().filter(|c| c.handler != "retried").chain(&again).map(|c| deleting(c, t0() + secs(3))).collect();
    for o in &mut outcomes {
        if o.task_id == ids[5] {
            o.end = RunEnd::Success {
                results: None,
                children: QueuedTasks { tasks: vec![NewTask::new("child", "{}")], ..Default::default() },
            };
        }
        if o.task_id == ids[6] {
            o.delete_on_success = false;
        }
    }
    store.finish_runs(&outcomes).await.expect("finish");
    for (i, id) in ids.iter().enumerate() {
        let task = store.get_task(*id).await.expect("get").unwrap_or_else(|| panic!("{} deleted", tasks[i].handler));
        assert_eq!(task.state, TaskState::Succeeded, "{}", tasks[i].handler);
    }
    let dependent = store.get_task(dependent).await.expect("get").expect("there");
    assert_eq!(dependent.state, TaskState::Scheduled, "its dependency's success released it");
    assert_eq!(store.counts().await.expect("counts").success, 7, "none counted twice");
}

/// A batch deleting tasks whose ids lie further apart than a span (`ends::SPAN`) writes a row a
/// span, and a lookup by id reads its span's rows alone: a task that succeeded after a thousand
/// batches of the tasks queued after it, in one batch with a task a span later, is found by the
/// stream and met by a later `after` (a lookup of the thousand rows from its id on missed it).
pub async fn the_ends_of_a_batch_across_spans_of_ids_are_each_found_by_id(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let span = taskhost::store::ENDS_SPAN as usize;
    let between = 1_001;
    let mut tasks = vec![NewTask::new("filler", "{}").with_queue("filler"); span + 2];
    tasks[0] = NewTask::new("h", "{}").with_queue("gone");
    for t in &mut tasks[1..=between] {
        *t = NewTask::new("f", "{}").with_queue("gone");
    }
    tasks[span + 1] = NewTask::new("h", "{}").with_queue("gone");
    let added = store.add_tasks(&tasks, t0()).await.expect("add");
    let (a, z) = (added[0].id, added[span + 1].id);
    let mut claimed = Vec::new();
    while claimed.len() < between + 2 {
        let more = store.claim(r, &["gone".into()], 500, t0(), DAY).await.expect("claim");
        assert!(!more.is_empty(), "all claimed");
        claimed.extend(more);
    }
    let (ends, later): (Vec<_>, Vec<_>) = claimed.iter().partition(|c| c.task_id == a || c.task_id == z);
    for c in later {
        store.finish_runs(&[deleting(c, t0() + secs(1))]).await.expect("finish, a batch each");
    }
    let outcomes: Vec<RunOutcome> = ends.iter().map(|c| deleting(c, t0() + secs(2))).collect();
    store.finish_runs(&outcomes).await.expect("finish both in one batch");
    assert!(!there(&store, a).await && !there(&store, z).await, "both deleted");
    let look = Look { ids: vec![a, z], limit: 100, ..Look::default() };
    let asked = store.glimpse(&look).await.expect("glimpse").asked;
    assert_eq!(asked.iter().map(|b| (b.id, b.state)).collect::<Vec<_>>(), [a, z].map(|id| (id, TaskState::Succeeded)));
    let after = store.add_tasks(&[NewTask::new("j", "{}").with_after([a, z, a + 1])], t0()).await.expect("after");
    let next = store.get_task(after[0].id).await.expect("get").expect("added");
    assert_eq!(next.state, TaskState::Scheduled, "each met");
    assert!(store.add_tasks(&[NewTask::new("j", "{}").with_after([z + 100_000])], t0()).await.is_err());
}
