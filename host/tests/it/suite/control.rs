//! The store suite's cases for controlling a live queue: cancelling.

use super::*;
use taskhost::store::{BulkFilter, Cancelled, Finished, Replay, Unfinished};

/// Cancelling by id and by filter: a scheduled task never runs, a running run ends `cancelled`
/// at once and its late outcome (success or failure) is ignored, finished tasks are refused, the
/// unique key is freed; cancelled tasks are replayed like dead letters and rotated like successes.
pub async fn cancelled_tasks_never_run_and_their_late_outcomes_are_ignored(store: SharedStore) {
    let later = t0() + chrono::Duration::hours(1);
    let tasks = vec![
        NewTask::new("a", "{}").with_unique_key("k").with_scheduled_on(later),
        NewTask::new("a", "{}"),
        NewTask::new("b", "{}").with_queue("mail").with_scheduled_on(later),
        NewTask::new("b", "{}").with_queue("mail"),
        NewTask::new("a", "{}"),
    ];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &["default".into(), "mail".into()], 10, t0(), DAY).await.expect("claim");
    assert_eq!(claimed.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![ids[1], ids[3], ids[4]]);
    let run_of = |id: i64| claimed.iter().find(|c| c.task_id == id).expect("claimed").clone();
    store.finish_runs(&[success(&run_of(ids[4]), t0(), "{}")]).await.expect("finish");

    let at = t0() + secs(1);
    let done = store.cancel_tasks(&[ids[0], ids[1], ids[4], ids[4] + 1000], at).await.expect("cancel");
    assert_eq!(done, vec![ids[0], ids[1]], "a finished task and an unknown one are left alone");
    for id in [ids[0], ids[1]] {
        let task = store.get_task(id).await.expect("get").expect("task");
        assert_eq!((task.last_status, task.gave_up_on), (RunStatus::Cancelled, None));
        let runs = store.runs_of(id).await.expect("runs");
        let last = runs.last().expect("a run");
        assert_eq!((runs.len(), last.status, last.error_code.as_deref()), (1, RunStatus::Cancelled, Some("cancelled")));
        assert_eq!(last.finished_on, Some(at));
    }
    assert_eq!(
        store.running_runs_of(r).await.expect("running"),
        vec![run_of(ids[3]).run_id],
        "what the worker's run watch sees: the cancelled run is not running any more"
    );
    // The worker's outcome arrives late: success, then a failure asking for a retry.
    let late = run_of(ids[1]);
    store.finish_runs(&[success(&late, at + secs(1), "{}")]).await.expect("late success");
    store.finish_runs(&[failure(&late, at + secs(1), NextStep::RetryAt(at + secs(2)))]).await.expect("late failure");
    let task = store.get_task(ids[1]).await.expect("get").expect("task");
    assert_eq!((task.last_status, task.task_runs_failed), (RunStatus::Cancelled, 0), "the outcomes were ignored");
    assert_eq!(store.runs_of(ids[1]).await.expect("runs").len(), 1, "no retry run");
    let holder = store.add_tasks(&[NewTask::new("a", "{}").with_unique_key("k")], at).await.expect("add");
    assert!(holder[0].created, "a cancelled task holds no unique key");

    let mail = BulkFilter { queue: Some("mail".into()), ..Default::default() };
    let waiting = store.cancel_matching(&mail, Unfinished::Waiting, at).await.expect("cancel");
    assert_eq!(waiting, Cancelled { tasks: 1, running: 0 }, "the running one is not waiting");
    let any = store.cancel_matching(&mail, Unfinished::Any, at).await.expect("cancel");
    assert_eq!(any, Cancelled { tasks: 1, running: 1 });
    assert_eq!(store.cancel_matching(&mail, Unfinished::Any, at).await.expect("cancel"), Cancelled::default());
    assert_eq!(store.counts().await.expect("counts").cancelled, 4);
    let listed =
        store.list_tasks(&TaskFilter { status: Some(RunStatus::Cancelled), ..Default::default() }).await.expect("list");
    assert_eq!(listed.iter().map(|t| t.id).collect::<Vec<_>>(), ids[..4]);

    let past_all = later + secs(60);
    let again = store.claim(r, &["default".into(), "mail".into()], 10, past_all, DAY).await.expect("claim");
    assert_eq!(again.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![holder[0].id], "cancelled tasks never run");
    assert!(!store.has_due_work(&["mail".into()], past_all).await.expect("due"), "nothing keeps a drain going");

    match store.retry_task(ids[0], None, past_all).await {
        Err(taskhost::Error::CannotRetry { reason, .. }) => assert!(reason.contains("unique key"), "{reason}"),
        other => panic!("the key is held by another task: {other:?}"),
    }
    store.retry_task(ids[1], None, past_all).await.expect("a cancelled task is replayed");
    assert_eq!(store.get_task(ids[1]).await.expect("get").map(|t| t.last_status), Some(RunStatus::Scheduled));
    assert_eq!(store.replay(Replay::Cancelled, &mail, past_all).await.expect("replay"), 2);
    assert_eq!(store.replay(Replay::Dead, &BulkFilter::default(), past_all).await.expect("replay"), 0);

    let all = BulkFilter::default();
    assert_eq!(store.delete_finished(Finished::Cancelled, &all, past_all + secs(1)).await.expect("delete"), 1);
    assert!(store.get_task(ids[0]).await.expect("get").is_none());
    store.cancel_tasks(&[ids[2]], past_all + secs(2)).await.expect("cancel");
    assert_eq!(
        store.rotate(past_all + secs(3), 100).await.expect("rotate"),
        2,
        "rotation takes the cancelled task and the success"
    );
    assert!(store.get_task(ids[4]).await.expect("get").is_none());
    for id in [ids[1], ids[3]] {
        assert_eq!(store.get_task(id).await.expect("get").map(|t| t.last_status), Some(RunStatus::Scheduled));
    }
}

/// Declared schedules (the configuration file's) are added, updated and removed to match the
/// declaration, in one transaction; those made by hand stay (one of a declared name is taken
/// over); a new cron expression starts from the next slot; a pause is kept.
pub async fn declared_schedules_follow_the_declaration_and_leave_hand_made_ones(store: SharedStore) {
    use taskhost::schedule::{NewSchedule, Synced};
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    store.add_schedule(&NewSchedule::new("hand", "0 0 * * *", "h"), t0()).await.expect("add");
    store.add_schedule(&NewSchedule::new("kept", "0 0 * * *", "h"), t0()).await.expect("add");
    let a = NewSchedule::new("a", "* * * * *", "h");
    let b = NewSchedule::new("b", "* * * * *", "h");
    let synced = store.sync_schedules(&[a.clone(), b.clone()], t0()).await.expect("sync");
    assert_eq!(synced, Synced { added: names(&["a", "b"]), ..Default::default() });
    let declared = |all: &[taskhost::schedule::Schedule]| {
        all.iter().filter(|s| s.declared).map(|s| s.spec.name.clone()).collect::<Vec<_>>()
    };
    assert_eq!(declared(&store.schedules().await.expect("list")), names(&["a", "b"]));
    assert_eq!(store.sync_schedules(&[a.clone(), b.clone()], t0()).await.expect("sync"), Synced::default());

    // Slots move on; then a's data changes (its slots carry on) and "hand" is declared.
    let at = t0() + secs(120);
    assert_eq!(store.queue_due_slots(at).await.expect("due").len(), 2);
    store.set_schedule_paused("a", Some(at)).await.expect("pause");
    let slot_of = |all: &[taskhost::schedule::Schedule], name: &str| {
        all.iter().find(|s| s.spec.name == name).map(|s| s.last_slot)
    };
    let a_slot = slot_of(&store.schedules().await.expect("list"), "a");
    let a2 = NewSchedule { data: r#"{"v": 2}"#.into(), ..a.clone() };
    let hand = NewSchedule::new("hand", "0 0 * * *", "h");
    let synced = store.sync_schedules(&[a2.clone(), hand.clone()], at + secs(1)).await.expect("sync");
    assert_eq!(synced, Synced { updated: names(&["a", "hand"]), removed: names(&["b"]), ..Default::default() });
    let all = store.schedules().await.expect("list");
    assert_eq!(declared(&all), names(&["a", "hand"]));
    assert!(all.iter().any(|s| s.spec.name == "kept" && !s.declared), "made by hand, not declared: kept");
    let got = |name: &str| all.iter().find(|s| s.spec.name == name).cloned().expect("listed");
    let a_now = got("a");
    assert_eq!((a_now.spec.data.as_str(), a_now.paused_on.is_some()), (r#"{"v": 2}"#, true), "updated, still paused");
    assert_eq!(slot_of(&all, "a"), a_slot, "the same cron expression keeps its slots");

    // A new cron expression starts after the sync: no backlog of the old expression's slots.
    let a3 = NewSchedule { cron: "*/5 * * * * *".into(), ..a2 };
    let later = at + secs(600);
    store.sync_schedules(&[a3, hand], later).await.expect("sync");
    let a_now = store.schedules().await.expect("list").into_iter().find(|s| s.spec.name == "a").expect("a");
    assert_eq!((a_now.spec.cron.as_str(), a_now.last_slot), ("*/5 * * * * *", later));
    let synced = store.sync_schedules(&[], later).await.expect("sync");
    assert_eq!(synced, Synced { removed: names(&["a", "hand"]), ..Default::default() });
    let left: Vec<String> = store.schedules().await.expect("list").into_iter().map(|s| s.spec.name).collect();
    assert_eq!(left, names(&["kept"]));
}

/// Statistics count each run once, as it ends (success, failure, time-out, cancel; a late outcome
/// is not counted again), per handler and queue, and outlive the rows rotation deletes.
pub async fn statistics_count_runs_as_they_end_and_outlive_rotation(store: SharedStore) {
    use taskhost::stats::RunCounts;
    let tasks = vec![
        NewTask::new("a", "{}"),
        NewTask::new("a", "{}"),
        NewTask::new("a", "{}"),
        NewTask::new("b", "{}").with_queue("mail"),
    ];
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let r = runner(&store, t0()).await;
    let queues = ["default".to_string(), "mail".to_string()];
    let claimed = store.claim(r, &queues, 10, t0(), DAY).await.expect("claim");
    let run_of = |id: i64| claimed.iter().find(|c| c.task_id == id).expect("claimed").clone();
    let outcomes = vec![
        success(&run_of(ids[0]), t0(), "{}"),
        failure(&run_of(ids[1]), t0(), NextStep::RetryAt(t0() + secs(1))),
        failure(&run_of(ids[2]), t0(), NextStep::GiveUp),
        success(&run_of(ids[3]), t0(), "{}"),
    ];
    store.finish_runs(&outcomes).await.expect("finish");
    store.finish_runs(&outcomes[..1]).await.expect("a late duplicate is ignored");
    // The retry runs, then is timed out by an overseer; a fourth task is cancelled unrun.
    let retry = store.claim(r, &queues, 10, t0() + secs(2), DAY).await.expect("claim");
    assert_eq!(retry.len(), 1);
    let far = t0() + chrono::Duration::days(2);
    assert_eq!(store.time_out_overdue_runs(far, t0() + secs(4), 10).await.expect("time out"), 1);
    let cancelled = store.add_tasks(&[NewTask::new("a", "{}")], t0()).await.expect("add")[0].id;
    store.cancel_tasks(&[cancelled], t0() + secs(5)).await.expect("cancel");
    // A run cancelled ten minutes in: counted, but its time is not the handler's.
    let slow = store.add_tasks(&[NewTask::new("c", "{}").with_queue("slow")], t0()).await.expect("add")[0].id;
    let c = store.claim(r, &["slow".to_string()], 1, t0() + secs(5), DAY).await.expect("claim");
    assert_eq!(c.len(), 1);
    store.cancel_tasks(&[slow], t0() + secs(605)).await.expect("cancel");

    let now = t0() + secs(30);
    let stats = store.stats(None, None, now).await.expect("stats");
    assert_eq!(
        stats.iter().map(|s| (s.handler.as_str(), s.queue.as_str())).collect::<Vec<_>>(),
        [("a", "default"), ("b", "mail"), ("c", "slow")]
    );
    assert_eq!(stats[2].runs, RunCounts { cancelled: 1, ..Default::default() });
    assert_eq!(stats[2].duration_ms, None, "a cancelled run is not timed");
    let a = &stats[0];
    assert_eq!(a.runs, RunCounts { succeeded: 1, failed: 2, timed_out: 1, cancelled: 1, snoozed: 0 });
    assert_eq!(a.failure_rate, 0.75);
    let d = a.duration_ms.expect("durations");
    assert_eq!(d.max, 2_000, "the timed-out run ran from its claim at +2 s to +4 s");
    assert!(d.p50 > 0.0 && d.p50 <= 5.0 && d.p95 <= 2_000.0, "{d:?}");
    let fuel = a.fuel.expect("fuel");
    assert_eq!((fuel.avg, fuel.max), (1234.0, 1234), "three runs reported fuel");
    assert_eq!((a.first_run, a.last_run), (Some(t0()), Some(t0() + secs(5))));
    assert_eq!((a.last_minute, a.last_hour), (5, 5));
    let tasks = taskhost::stats::TaskCounts { waiting: 0, scheduled: 0, running: 0, awaiting_retry: 1, dead: 1 };
    assert_eq!(a.tasks, tasks, "the timed-out task awaits its retry; finished ones are counted by their runs");
    assert_eq!(stats[1].runs, RunCounts { succeeded: 1, ..Default::default() });
    assert_eq!(store.stats(Some("b"), None, now).await.expect("stats").len(), 1);
    assert_eq!(store.stats(None, Some("nope"), now).await.expect("stats").len(), 0);
    let later = store.stats(Some("a"), None, now + chrono::Duration::hours(2)).await.expect("stats");
    assert_eq!((later[0].last_minute, later[0].last_hour), (0, 0), "throughput looks back an hour only");
    // The same runs a minute at a time, empty minutes included.
    let m0 = chrono::DurationRound::duration_trunc(t0(), chrono::Duration::minutes(1)).expect("a minute");
    let minute = |n: i64| m0 + chrono::Duration::minutes(n);
    let series = store.throughput(None, None, now, 3).await.expect("throughput");
    assert_eq!(series.iter().map(|m| m.at).collect::<Vec<_>>(), [minute(-2), minute(-1), minute(0)]);
    assert_eq!(series[2].runs, RunCounts { succeeded: 2, failed: 2, timed_out: 1, cancelled: 1, snoozed: 0 });
    assert_eq!(series[0].runs, RunCounts::default());
    let slow = store.throughput(Some("c"), Some("slow"), t0() + secs(605), 11).await.expect("throughput");
    assert_eq!((slow.len(), slow[0].at, slow[10].at), (11, minute(0), minute(10)));
    assert_eq!(slow[10].runs, RunCounts { cancelled: 1, ..Default::default() });
    assert!(slow[..10].iter().all(|m| m.runs == RunCounts::default()), "{slow:?}");

    assert_eq!(store.rotate(t0() + chrono::Duration::days(1), 100).await.expect("rotate"), 4);
    let kept = store.stats(None, None, now).await.expect("stats");
    assert_eq!(kept[0].runs, a.runs, "rotation keeps the statistics");
    assert_eq!(kept[1].runs.succeeded, 1, "its task is gone, its count stays");

    // Runs ten minutes and an hour later, then the rows merged into hours, two a batch: every
    // figure reads the same, and merged rows are not merged again.
    store.add_tasks(&[NewTask::new("a", "{}"), NewTask::new("a", "{}")], t0()).await.expect("add");
    for at in [t0() + chrono::Duration::minutes(10), t0() + chrono::Duration::hours(1)] {
        let c = store.claim(r, &queues, 1, at, DAY).await.expect("claim");
        store.finish_runs(&[success(&c[0], at, "{}")]).await.expect("finish");
    }
    let far = t0() + chrono::Duration::days(1);
    let before = store.stats(None, None, far).await.expect("stats");
    let mut merged = 0;
    loop {
        let n = store.compact_stats(far, 2).await.expect("compact");
        merged += n;
        if n == 0 {
            break;
        }
    }
    assert_eq!(
        merged, 6,
        "three rows of the first minute (two runners), two of minute 10 (a and c), one an hour later"
    );
    assert_eq!(store.compact_stats(far, 2).await.expect("compact"), 0);
    let after = store.stats(None, None, far).await.expect("stats");
    assert_eq!(format!("{after:?}"), format!("{before:?}"));
    assert_eq!(after[0].runs.succeeded, 3);
}

pub async fn a_batch_of_successes_is_counted_under_each_runs_handler_queue_and_runner(store: SharedStore) {
    let tasks = [
        NewTask::new("a", "{}"),
        NewTask::new("a", "{}"),
        NewTask::new("a", "{}"),
        NewTask::new("b", "{}").with_queue("mail"),
    ];
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r1 = runner(&store, t0()).await;
    let r2 = store.register_runner(4343, "other-host", t0(), 100).await.expect("register");
    let mut claimed = store.claim(r1, &["default".to_string()], 2, t0(), DAY).await.expect("claim");
    let queues = ["default".to_string(), "mail".to_string()];
    claimed.extend(store.claim(r2, &queues, 10, t0() + secs(1), DAY).await.expect("claim"));
    assert_eq!(claimed.len(), 4);
    // Durations in three histogram buckets, fuel reported by three runs of four, one finishing later.
    let ends = [(3, Some(100), 10), (700, None, 10), (40_000, Some(300), 12), (10, Some(7), 10)];
    let outcomes: Vec<RunOutcome> = claimed
        .iter()
        .zip(ends)
        .map(|(c, (ms, fuel, at))| RunOutcome { duration_ms: ms, fuel_used: fuel, ..success(c, t0() + secs(at), "{}") })
        .collect();
    store.finish_runs(&outcomes).await.expect("finish, one batch");
    store.finish_runs(&outcomes).await.expect("the same outcomes again are ignored");

    let stats = store.stats(None, None, t0() + secs(30)).await.expect("stats");
    assert_eq!(stats.len(), 2);
    let (a, b) = (&stats[0], &stats[1]);
    assert_eq!(
        (a.handler.as_str(), a.queue.as_str(), b.handler.as_str(), b.queue.as_str()),
        ("a", "default", "b", "mail")
    );
    assert_eq!(a.runs, taskhost::stats::RunCounts { succeeded: 3, ..Default::default() });
    let d = a.duration_ms.expect("timed");
    assert_eq!((d.max, d.avg), (40_000, (3.0 + 700.0 + 40_000.0) / 3.0));
    let fuel = a.fuel.expect("fuel");
    assert_eq!((fuel.avg, fuel.max), (200.0, 300), "two of the three runs reported fuel");
    assert_eq!((a.first_run, a.last_run), (Some(t0()), Some(t0() + secs(12))), "from the first start to the last end");
    assert_eq!(b.runs, taskhost::stats::RunCounts { succeeded: 1, ..Default::default() });
    assert_eq!(b.duration_ms.map(|d| d.max), Some(10));
    assert_eq!(b.fuel.map(|f| (f.avg, f.max)), Some((7.0, 7)));
    assert_eq!((b.first_run, b.last_run), (Some(t0() + secs(1)), Some(t0() + secs(10))), "its claim's start");
    // One row a handler, queue and runner: a's runs of each runner, and b's.
    let far = t0() + chrono::Duration::days(2);
    assert_eq!(store.compact_stats(far, 100).await.expect("compact"), 3);
    let merged = store.stats(None, None, far).await.expect("stats");
    assert_eq!((merged[0].runs.succeeded, merged[1].runs.succeeded), (3, 1));
    assert_eq!(merged[0].duration_ms.map(|d| d.max), Some(40_000));
}
