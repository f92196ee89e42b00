//! More of the store suite: the reads, the runners, the overseer's writes, and the edges
//! (late writes, long strings) that every backend must treat alike.

use super::*;

pub async fn tasks_are_listed_by_status_queue_handler_and_death_oldest_first(store: SharedStore) {
    let tasks = vec![
        NewTask::new("a", r#"{"to": "Ann"}"#),
        NewTask::new("b", "{}").with_queue("mail"),
        NewTask::new("a", r#"{"to": "ann", "note": "100% <b>"}"#).with_queue("mail"),
        NewTask::new("b", "{}"),
    ];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["mail".into()], 1, t0(), DAY).await.expect("claim");
    store.finish_runs(&[failure(&c[0], t0(), NextStep::GiveUp)]).await.expect("finish");
    let list = |f: TaskFilter| {
        let store = store.clone();
        async move { store.list_tasks(&f).await.expect("list").iter().map(|t| t.id).collect::<Vec<_>>() }
    };
    assert_eq!(list(TaskFilter::default()).await, ids);
    assert_eq!(list(TaskFilter { limit: Some(2), ..Default::default() }).await, ids[..2]);
    let newest = TaskFilter { newest_first: true, ..Default::default() };
    assert_eq!(list(newest.clone()).await, ids.iter().rev().copied().collect::<Vec<_>>());
    assert_eq!(list(TaskFilter { offset: 1, limit: Some(2), ..newest.clone() }).await, vec![ids[2], ids[1]]);
    assert_eq!(list(TaskFilter { offset: 3, ..Default::default() }).await, vec![ids[3]]);
    // A cursor: after an id in the order asked for.
    assert_eq!(list(TaskFilter { after: Some(ids[1]), ..Default::default() }).await, ids[2..]);
    assert_eq!(list(TaskFilter { after: Some(ids[2]), limit: Some(1), ..newest }).await, vec![ids[1]]);
    assert_eq!(list(TaskFilter { queue: Some("mail".into()), ..Default::default() }).await, vec![ids[1], ids[2]]);
    assert_eq!(list(TaskFilter { handler: Some("a".into()), ..Default::default() }).await, vec![ids[0], ids[2]]);
    let a_in_mail = TaskFilter { handler: Some("a".into()), queue: Some("mail".into()), ..Default::default() };
    assert_eq!(list(a_in_mail).await, vec![ids[2]]);
    let scheduled = TaskFilter { status: Some(RunStatus::Scheduled), ..Default::default() };
    assert_eq!(list(scheduled).await, vec![ids[0], ids[2], ids[3]]);
    assert_eq!(list(TaskFilter { dead: true, ..Default::default() }).await, vec![ids[1]]);
    let dead_a = TaskFilter { dead: true, handler: Some("a".into()), ..Default::default() };
    assert!(list(dead_a).await.is_empty());
    // Text in the data: case-sensitive, and `%` or `_` are plain characters.
    let text = |t: &str| TaskFilter { text: Some(t.into()), ..Default::default() };
    assert_eq!(list(text("Ann")).await, vec![ids[0]]);
    assert_eq!(list(text("\"to\"")).await, vec![ids[0], ids[2]]);
    assert_eq!(list(text("100% <b>")).await, vec![ids[2]]);
    assert!(list(text("0%_")).await.is_empty());
    let c = store.counts().await.expect("counts");
    assert_eq!((c.scheduled, c.running, c.success, c.error, c.timeout, c.dead), (3, 0, 0, 1, 0, 1));
    // By state: a dead letter's latest run failed, but it awaits no retry; a run timed out does.
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    assert_eq!(c[0].task_id, ids[0]);
    store.time_out_runners(&[r], t0()).await.expect("time out");
    let state = |s| TaskFilter { state: Some(s), ..Default::default() };
    assert_eq!(list(state(TaskState::AwaitingRetry)).await, vec![ids[0]]);
    assert_eq!(list(state(TaskState::Dead)).await, vec![ids[1]]);
    assert_eq!(list(state(TaskState::Scheduled)).await, vec![ids[2], ids[3]]);
    let errored = TaskFilter { status: Some(RunStatus::Error), ..Default::default() };
    assert_eq!(list(errored).await, vec![ids[1]], "by the latest run's status, the dead letter");
    let mail = TaskFilter { state: Some(TaskState::Scheduled), queue: Some("mail".into()), ..Default::default() };
    assert_eq!(list(mail).await, vec![ids[2]]);
}

/// What an idle worker probes for tasks other processes add: 0 on an empty queue, then the newest
/// task's id after each add, single or bulk, whatever the task's queue or time.
pub async fn the_newest_task_id_follows_every_add(store: SharedStore) {
    assert_eq!(store.newest_task_id().await.expect("newest"), 0, "no task yet");
    let one = store.add_tasks(&[NewTask::new("a", "{}")], t0()).await.expect("add");
    assert_eq!(store.newest_task_id().await.expect("newest"), one[0].id);
    let later = NewTask::new("b", "{}").with_queue("mail").with_scheduled_on(t0() + secs(3600));
    let many = store.add_tasks(&[NewTask::new("a", "{}"), later], t0()).await.expect("add");
    let newest = many.iter().map(|a| a.id).max().expect("two ids");
    assert!(newest > one[0].id);
    assert_eq!(store.newest_task_id().await.expect("newest"), newest);
}

pub async fn progress_counts_while_running_and_not_after_the_end(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    let progress = |percent: u8, results: &str| ProgressUpdate {
        task_id: c[0].task_id,
        run_id: c[0].run_id,
        percent: Some(percent),
        results: Some(results.into()),
    };
    store.record_progress(&[progress(10, "[1]"), progress(20, "[2]")]).await.expect("progress");
    let run = &store.runs_of(id).await.expect("runs")[0];
    assert_eq!((run.percents_completed, run.results.as_deref()), (20, Some("[2]")), "the latest wins");
    let only_percent = ProgressUpdate { task_id: c[0].task_id, run_id: c[0].run_id, percent: Some(30), results: None };
    store.record_progress(&[only_percent]).await.expect("progress");
    let run = &store.runs_of(id).await.expect("runs")[0];
    assert_eq!((run.percents_completed, run.results.as_deref()), (30, Some("[2]")), "absent results kept");
    store.finish_runs(&[success(&c[0], t0() + secs(1), "[done]")]).await.expect("finish");
    store.record_progress(&[progress(50, "[late]")]).await.expect("late progress is no error");
    let run = &store.runs_of(id).await.expect("runs")[0];
    assert_eq!((run.percents_completed, run.results.as_deref()), (100, Some("[done]")), "late progress ignored");
}

pub async fn due_work_counts_due_running_and_retry_awaiting_tasks_of_the_handlers(store: SharedStore) {
    let queues = ["default".to_string()];
    let only = |h: &str| Some(vec![h.to_string()]);
    assert!(!store.has_due_work(&queues, t0()).await.expect("due"), "an empty queue");
    store.add_tasks(&[NewTask::new("a", "{}").with_max_attempts(5)], t0()).await.expect("add");
    assert!(store.has_due_work_for(&queues, only("a").as_deref(), t0()).await.expect("due"));
    assert!(!store.has_due_work_for(&queues, only("b").as_deref(), t0()).await.expect("due"), "not b's");
    assert!(!store.has_due_work_for(&queues, Some(&[]), t0()).await.expect("due"), "no handler");
    store.pause_queue("default", t0()).await.expect("pause");
    assert!(!store.has_due_work(&queues, t0()).await.expect("due"), "a paused queue's tasks wait");
    store.resume_queue("default").await.expect("resume");
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &queues, 1, t0(), DAY).await.expect("claim");
    assert!(store.has_due_work_for(&queues, only("b").as_deref(), t0()).await.expect("due"), "running counts");
    assert!(!store.has_due_work(&["other".into()], t0()).await.expect("due"), "of the queues asked");
    // Its runner dies: the task waits, timed out, for the overseer to plan its retry.
    assert_eq!(store.time_out_runners(&[r], t0() + secs(1)).await.expect("time out"), 1);
    assert_eq!(store.get_task(c[0].task_id).await.expect("get").expect("task").last_status, RunStatus::Timeout);
    assert!(store.has_due_work_for(&queues, only("a").as_deref(), t0() + secs(1)).await.expect("due"));
    assert!(!store.has_due_work_for(&queues, only("b").as_deref(), t0() + secs(1)).await.expect("due"));
    let plan = RetryPlan { task_id: c[0].task_id, next: NextStep::RetryAt(t0() + secs(60)) };
    store.apply_retry_plans(&[plan], t0() + secs(2)).await.expect("plan");
    assert!(!store.has_due_work(&queues, t0() + secs(59)).await.expect("due"), "the retry is not due yet");
    assert!(store.has_due_work(&queues, t0() + secs(60)).await.expect("due"));
}

pub async fn long_texts_are_stored_whole(store: SharedStore) {
    let big = format!("[\"{}\"]", "x".repeat(1 << 20));
    let key = "k".repeat(MAX_UNIQUE_KEY_BYTES);
    let handler = "h".repeat(MAX_HANDLER_BYTES);
    let data = format!("{{\"d\":\"{}\"}}", "é".repeat(100_000));
    let task = NewTask::new(handler.clone(), data.clone()).with_unique_key(key.clone());
    let id = store.add_tasks(&[task], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    assert_eq!((c[0].handler.as_str(), c[0].data.as_str()), (handler.as_str(), data.as_str()));
    let mut done = success(&c[0], t0(), &big);
    done.logs = Some("log line\n".repeat(7_000));
    store.finish_runs(&[done]).await.expect("finish");
    let task = store.get_task(id).await.expect("get").expect("task");
    assert_eq!((task.unique_key.as_deref(), task.data.len()), (Some(key.as_str()), data.len()));
    let run = &store.runs_of(id).await.expect("runs")[0];
    assert_eq!(run.results.as_ref().map(String::len), Some(big.len()));
    assert_eq!(run.logs.as_ref().map(String::len), Some(63_000));
}

pub async fn runners_beat_finish_and_are_seen(store: SharedStore) {
    let a = runner(&store, t0()).await;
    let b = runner(&store, t0()).await;
    assert!(store.heartbeat(a, t0() + secs(5)).await.expect("beat"));
    assert!(store.heartbeat(a, t0() + secs(5)).await.expect("beat"), "a beat at the same time still counts");
    let served = taskhost::store::Served::from([("echo".to_string(), "ab".repeat(32))]);
    store.set_runner_handlers(b, &served).await.expect("handlers");
    let live = store.live_runners().await.expect("live");
    assert_eq!(live.iter().map(|r| r.id).collect::<Vec<_>>(), vec![a, b]);
    assert_eq!((live[0].process_id, live[0].host_name.as_str()), (4242, "test-host"));
    assert_eq!((live[0].heartbeat_on, live[0].handlers.as_ref()), (t0() + secs(5), None));
    assert_eq!(live[1].handlers.as_ref(), Some(&served));
    let seen = store.runners_seen_since(t0() + secs(1)).await.expect("seen");
    assert_eq!(seen.iter().map(|r| r.id).collect::<Vec<_>>(), vec![a], "b has not beaten since");
    store.finish_runner(a, RunnerStatus::Success, t0() + secs(6)).await.expect("finish");
    assert!(!store.heartbeat(a, t0() + secs(7)).await.expect("beat"), "a finished runner is told so");
    let seen = store.runners_seen_since(t0() + secs(1)).await.expect("seen");
    assert_eq!((seen[0].status, seen[0].finished_on), (RunnerStatus::Success, Some(t0() + secs(6))));
    assert_eq!(store.live_runners().await.expect("live").iter().map(|r| r.id).collect::<Vec<_>>(), vec![b]);
    store.finish_runner(a, RunnerStatus::Timeout, t0() + secs(8)).await.expect("again");
    let seen = store.runners_seen_since(t0() + secs(1)).await.expect("seen");
    assert_eq!(seen[0].status, RunnerStatus::Success, "a finished runner stays as it ended");
}

pub async fn due_tasks_nobody_serves_are_given_up(store: SharedStore) {
    let tasks = vec![
        NewTask::new("served", "{}"),
        NewTask::new("ghost", "{}").with_unique_key("g"),
        NewTask::new("ghost", "{}").with_scheduled_on(t0() + secs(60)),
        NewTask::new("other", "{}"),
    ];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let served = ["served".to_string()];
    let n = store.give_up_unserved(&served, t0(), t0() + secs(1), 1).await.expect("give up");
    assert_eq!(n, 1, "the limit holds");
    let n = store.give_up_unserved(&served, t0(), t0() + secs(1), 10).await.expect("give up");
    assert_eq!(n, 1, "the rest of what is due");
    for id in [ids[1], ids[3]] {
        let task = store.get_task(id).await.expect("get").expect("task");
        assert_eq!((task.last_status, task.gave_up_on), (RunStatus::Error, Some(t0() + secs(1))));
        let run = &store.runs_of(id).await.expect("runs")[0];
        assert_eq!((run.status, run.error_code.as_deref()), (RunStatus::Error, Some("handler-not-found")));
    }
    let not_due = store.get_task(ids[2]).await.expect("get").expect("task");
    assert_eq!(not_due.last_status, RunStatus::Scheduled, "not due yet");
    assert!(store.add_tasks(&[NewTask::new("ghost", "{}").with_unique_key("g")], t0()).await.expect("add")[0].created);
    assert_eq!(store.give_up_unserved(&[], t0() + secs(60), t0() + secs(60), 10).await.expect("all"), 3);
    assert_eq!(store.counts().await.expect("counts").scheduled, 0, "served by nobody: all given up");
}

pub async fn failed_tasks_are_planned_once(store: SharedStore) {
    let tasks = vec![NewTask::new("h", "{}").with_max_attempts(3), NewTask::new("h", "{}").with_unique_key("k")];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let r = runner(&store, t0()).await;
    store.claim(r, &["default".into()], 2, t0(), DAY).await.expect("claim");
    assert!(store.retry_candidates(10).await.expect("candidates").is_empty(), "running is no candidate");
    assert_eq!(store.time_out_runners(&[r], t0() + secs(1)).await.expect("time out"), 2);
    let mut found = store.retry_candidates(10).await.expect("candidates");
    found.sort_by_key(|c| c.task_id);
    assert_eq!(found.iter().map(|c| (c.task_id, c.failures)).collect::<Vec<_>>(), vec![(ids[0], 1), (ids[1], 1)]);
    assert_eq!(found[0].max_attempts, 3);
    assert_eq!(store.retry_candidates(1).await.expect("candidates").len(), 1, "the limit holds");
    let plans = [
        RetryPlan { task_id: ids[0], next: NextStep::RetryAt(t0() + secs(10)) },
        RetryPlan { task_id: ids[1], next: NextStep::GiveUp },
    ];
    store.apply_retry_plans(&plans, t0() + secs(2)).await.expect("apply");
    store.apply_retry_plans(&plans, t0() + secs(3)).await.expect("applying again changes nothing");
    assert!(store.retry_candidates(10).await.expect("candidates").is_empty());
    let task = store.get_task(ids[0]).await.expect("get").expect("task");
    assert_eq!((task.last_status, task.scheduled_on), (RunStatus::Scheduled, t0() + secs(10)));
    // Scheduled once: one claim takes it, as attempt 2, and its runs are the timed-out one and that.
    let r = runner(&store, t0() + secs(10)).await;
    let c = store.claim(r, &["default".into()], 10, t0() + secs(10), DAY).await.expect("claim");
    assert_eq!(c.iter().map(|c| (c.task_id, c.attempt)).collect::<Vec<_>>(), vec![(ids[0], 2)]);
    let retried = store.runs_of(ids[0]).await.expect("runs");
    assert_eq!(
        retried.iter().map(|r| (r.attempt, r.status)).collect::<Vec<_>>(),
        [(1, RunStatus::Timeout), (2, RunStatus::Running)]
    );
    let dead = store.get_task(ids[1]).await.expect("get").expect("task");
    assert_eq!((dead.last_status, dead.gave_up_on), (RunStatus::Timeout, Some(t0() + secs(2))));
    assert!(store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("k")], t0()).await.expect("add")[0].created);
}

pub async fn a_late_outcome_of_a_run_put_back_is_ignored(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    assert_eq!(store.put_back(&[(c[0].run_id, t0() + secs(5))]).await.expect("put back"), [c[0].run_id]);
    store.finish_runs(&[success(&c[0], t0() + secs(1), "{}")]).await.expect("late success");
    store.finish_runs(&[failure(&c[0], t0() + secs(1), NextStep::GiveUp)]).await.expect("late failure");
    let progress =
        ProgressUpdate { task_id: c[0].task_id, run_id: c[0].run_id, percent: Some(50), results: Some("[1]".into()) };
    store.record_progress(&[progress]).await.expect("late progress");
    assert!(store.runs_of(id).await.expect("runs").is_empty(), "the run put back is gone, outcomes or not");
    let task = store.get_task(id).await.expect("get").expect("task");
    assert_eq!((task.last_status, task.task_runs_failed, task.gave_up_on), (RunStatus::Scheduled, 0, None));
}

/// Tasks queued in the caller's own transaction (`add_in(commit)` queues one `mail` task and
/// commits or rolls back) exist exactly when that transaction commits.
pub async fn tasks_queued_in_the_callers_transaction_share_its_fate<F, Fut>(store: SharedStore, add_in: F)
where
    F: Fn(bool) -> Fut,
    Fut: std::future::Future<Output = TaskId>,
{
    add_in(false).await;
    assert_eq!(store.counts().await.expect("counts").scheduled, 0, "rolled back with the caller's writes");
    let id = add_in(true).await;
    assert_eq!(store.counts().await.expect("counts").scheduled, 1);
    let task = store.get_task(id).await.expect("get").expect("committed with the caller's writes");
    assert_eq!(task.handler, "mail");
    assert!(store.runs_of(id).await.expect("runs").is_empty(), "its first run is made by its claim");
}

/// Pausing and resuming a queue, and what each queue holds: due, later, running, the oldest due
/// task, and the pause with its time.
pub async fn queues_are_paused_resumed_and_listed(store: SharedStore) {
    let tasks = vec![
        NewTask::new("h", "{}").with_queue("mail"),
        NewTask::new("h", "{}").with_queue("mail").with_scheduled_on(t0() - secs(30)),
        NewTask::new("h", "{}").with_queue("mail").with_scheduled_on(t0() + secs(60)),
        NewTask::new("h", "{}"),
    ];
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &["default".to_string()], 10, t0(), DAY).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert!(store.paused_queues().await.expect("paused").is_empty());
    assert!(store.pause_queue("mail", t0()).await.expect("pause"));
    assert!(!store.pause_queue("mail", t0() + secs(1)).await.expect("pause again"));
    assert!(store.pause_queue("idle", t0()).await.expect("pause an empty queue"));
    assert_eq!(store.paused_queues().await.expect("paused"), vec!["idle".to_string(), "mail".to_string()]);
    let queues = store.queues(t0()).await.expect("queues");
    let names: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["default", "idle", "mail"]);
    let (default, idle, mail) = (&queues[0], &queues[1], &queues[2]);
    assert_eq!((default.due, default.later, default.running, default.paused_on), (0, 0, 1, None));
    assert_eq!((idle.due, idle.running, idle.oldest_due, idle.paused_on), (0, 0, None, Some(t0())));
    assert_eq!((mail.due, mail.later, mail.running), (2, 1, 0));
    assert_eq!((mail.oldest_due, mail.paused_on), (Some(t0() - secs(30)), Some(t0())), "the first pause's time");
    // A claim takes nothing from a paused queue, with limits or without, and its due tasks
    // once resumed.
    let both = ["mail".to_string(), "default".to_string()];
    assert!(store.claim(r, &both, 10, t0(), DAY).await.expect("claim").is_empty(), "mail is paused");
    let limits =
        RunLimits { queues: [("mail".to_string(), super::running(5))].into_iter().collect(), ..RunLimits::default() };
    store.set_file_limits(&limits, t0()).await.expect("set the limits");
    let limited = super::limited(r, &both, None, 10, &limits);
    assert!(store.claim_for(&limited).await.expect("limited claim").is_empty(), "mail is paused");
    assert!(store.resume_queue("mail").await.expect("resume"));
    assert!(!store.resume_queue("mail").await.expect("resume again"));
    assert_eq!(store.paused_queues().await.expect("paused"), vec!["idle".to_string()]);
    assert_eq!(store.claim(r, &both, 10, t0(), DAY).await.expect("claim").len(), 2, "mail's due tasks");
}

/// Bulk actions: the dead letters of a queue and handler replayed at once (one whose unique key an
/// unfinished task holds is left dead), a dead letter's data replaced as it is replayed, and
/// finished tasks deleted by kind, handler and age, never an unfinished one.
pub async fn dead_letters_are_replayed_and_finished_tasks_deleted_in_bulk(store: SharedStore) {
    use taskhost::store::{BulkFilter, Finished, Replay};
    let tasks = vec![
        NewTask::new("a", "{}"),
        NewTask::new("a", "{}").with_unique_key("k"),
        NewTask::new("a", "{}").with_queue("mail"),
        NewTask::new("b", "{}"),
        NewTask::new("a", r#"{"ok": 1}"#),
    ];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &["default".into(), "mail".into()], 10, t0(), DAY).await.expect("claim");
    assert_eq!(claimed.len(), 5);
    let outcomes: Vec<_> = claimed
        .iter()
        .map(|c| if c.task_id == ids[4] { success(c, t0(), "{}") } else { failure(c, t0(), NextStep::GiveUp) })
        .collect();
    store.finish_runs(&outcomes).await.expect("finish");
    let holder = store.add_tasks(&[NewTask::new("a", "{}").with_unique_key("k")], t0()).await.expect("add");
    assert!(holder[0].created, "a dead letter holds no key");
    let status = |id: i64| {
        let store = store.clone();
        async move { store.get_task(id).await.expect("get").map(|t| (t.last_status, t.gave_up_on.is_some())) }
    };

    let a_default = BulkFilter { queue: Some("default".into()), handler: Some("a".into()), ids: None };
    assert_eq!(
        store.replay(Replay::Dead, &a_default, t0() + secs(1)).await.expect("retry"),
        1,
        "the key's holder keeps ids[1] dead"
    );
    assert_eq!(status(ids[0]).await, Some((RunStatus::Scheduled, false)));
    assert_eq!(
        store.runs_of(ids[0]).await.expect("runs").iter().map(|r| (r.attempt, r.status)).collect::<Vec<_>>(),
        [(1, RunStatus::Error)],
        "the replayed task's next run is made by its claim"
    );
    assert_eq!(status(ids[1]).await, Some((RunStatus::Error, true)));
    assert_eq!(status(ids[2]).await, Some((RunStatus::Error, true)), "another queue");
    let every_a = BulkFilter { handler: Some("a".into()), ..Default::default() };
    assert_eq!(store.replay(Replay::Dead, &every_a, t0() + secs(1)).await.expect("retry"), 1);
    assert_eq!(status(ids[2]).await, Some((RunStatus::Scheduled, false)));

    store.retry_task(ids[3], Some(r#"{"fixed": true}"#), t0() + secs(2)).await.expect("replay with new data");
    let edited = store.get_task(ids[3]).await.expect("get").expect("task");
    assert_eq!((edited.data.as_str(), edited.last_status), (r#"{"fixed": true}"#, RunStatus::Scheduled));

    let all = BulkFilter::default();
    assert_eq!(store.delete_finished(Finished::Dead, &all, t0()).await.expect("delete"), 0, "none finished before t0");
    assert_eq!(store.delete_finished(Finished::Dead, &all, t0() + secs(1)).await.expect("delete"), 1);
    assert_eq!(status(ids[1]).await, None);
    assert!(store.runs_of(ids[1]).await.expect("runs").is_empty(), "its runs went with it");
    let picked = BulkFilter { ids: Some(vec![ids[0], ids[4], ids[3]]), ..Default::default() };
    assert_eq!(
        store.delete_finished(Finished::Any, &picked, t0() + secs(10)).await.expect("delete"),
        1,
        "of the tasks picked by id, only the success had finished"
    );
    assert_eq!(status(ids[4]).await, None);
    for id in [ids[0], ids[2], ids[3], holder[0].id] {
        assert_eq!(status(id).await.map(|s| s.0), Some(RunStatus::Scheduled), "unfinished tasks stay");
    }
}

/// Periodic tasks: a schedule's due slot is queued once, even by two callers racing; a missed
/// slot is queued once or passed over by the schedule's policy; paused schedules queue nothing;
/// a trigger queues a task at once.
pub async fn schedules_queue_each_slot_once_even_when_overseers_race(store: SharedStore) {
    use taskhost::schedule::{Missed, NewSchedule};
    store.add_schedule(&NewSchedule::new("minutely", "* * * * *", "h"), t0()).await.expect("add");
    let skipper = NewSchedule { missed: Missed::Skip, ..NewSchedule::new("skipper", "*/5 * * * *", "h") };
    store.add_schedule(&skipper, t0()).await.expect("add");
    assert!(store.add_schedule(&skipper, t0()).await.is_err(), "names are unique");
    assert!(store.queue_due_slots(t0()).await.expect("due").is_empty(), "no slot since creation");

    let at = t0() + secs(90);
    let (a, b) = tokio::join!(store.queue_due_slots(at), store.queue_due_slots(at));
    let queued: Vec<_> = a.expect("due").into_iter().chain(b.expect("due")).collect();
    assert_eq!(queued.len(), 1, "one task for the slot, however many race: {queued:?}");
    assert_eq!(queued[0].0, "minutely");
    let task = store.get_task(queued[0].1).await.expect("get").expect("task");
    let slot = DateTime::from_timestamp(at.timestamp() / 60 * 60, 0).expect("minute");
    assert_eq!((task.scheduled_on, task.queued_by.as_deref()), (slot, Some("schedule:minutely")));
    assert!(store.queue_due_slots(at).await.expect("due").is_empty(), "the slot is taken");

    // An hour without an overseer: the minutely schedule queues its latest slot once, the
    // skipper passes over its missed slots.
    let late = t0() + secs(3600 + 90);
    let queued = store.queue_due_slots(late).await.expect("due");
    assert_eq!(queued.iter().map(|q| q.0.as_str()).collect::<Vec<_>>(), ["minutely"]);
    let schedules = store.schedules().await.expect("list");
    let skipped = schedules.iter().find(|s| s.spec.name == "skipper").expect("skipper");
    assert!(skipped.last_slot > t0() + secs(3000), "passed over, not queued later: {skipped:?}");

    assert!(store.set_schedule_paused("minutely", Some(late)).await.expect("pause"));
    assert!(store.queue_due_slots(late + secs(120)).await.expect("due").is_empty(), "paused");
    assert!(store.set_schedule_paused("minutely", None).await.expect("resume"));
    assert_eq!(store.queue_due_slots(late + secs(120)).await.expect("due").len(), 1);
    let now = late + secs(130);
    let id = store.trigger_schedule("skipper", now).await.expect("trigger");
    assert_eq!(store.get_task(id).await.expect("get").map(|t| t.scheduled_on), Some(now));
    assert!(store.remove_schedule("skipper").await.expect("remove"));
    assert!(!store.remove_schedule("skipper").await.expect("remove"));
    assert!(!store.set_schedule_paused("skipper", None).await.expect("resume"), "no such schedule");
    assert_eq!(store.schedules().await.expect("list").len(), 1);
}
