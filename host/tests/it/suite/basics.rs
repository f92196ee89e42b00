//! The store suite's first cases: adding, claiming, ending runs, retries and dead letters, unique
//! keys.

use super::*;

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
    let by_state = TaskFilter { state: Some(TaskState::Dead), ..Default::default() };
    let dead = store.list_tasks(&by_state).await.expect("list");
    assert_eq!(dead[0].last_error.as_deref(), Some("boom: it broke"), "so does a list of the dead state");
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

/// Tasks due after 2038 (past MariaDB's TIMESTAMP range) keep their time, one at a time and in
/// bulk; of a list of ids, those of final tasks are told apart from unfinished and unknown ones
/// (what a wait for a task's end reads).
pub async fn a_task_due_in_2099_keeps_its_time_and_final_tasks_are_told_from_the_rest(store: SharedStore) {
    let far = chrono::DateTime::parse_from_rfc3339("2099-01-01T00:00:00Z").expect("time").to_utc();
    let one = store.add_tasks(&[NewTask::new("echo", "{}").with_scheduled_on(far)], t0()).await.expect("add one");
    let many: Vec<NewTask> = (0..3).map(|_| NewTask::new("echo", "{}").with_scheduled_on(far)).collect();
    let many = store.add_tasks(&many, t0()).await.expect("add many");
    for a in one.iter().chain(&many) {
        let task = store.get_task(a.id).await.expect("get").expect("exists");
        assert_eq!(task.scheduled_on, far);
    }
    let cancelled = store.cancel_tasks(&[many[0].id], t0()).await.expect("cancel");
    assert_eq!(cancelled, [many[0].id]);
    let asked = [one[0].id, many[0].id, many[1].id, 999_999];
    let ended = store.final_details(&asked).await.expect("final");
    assert_eq!(ended.iter().map(|d| d.task.id).collect::<Vec<_>>(), [many[0].id]);
    assert_eq!(ended[0].task.state, TaskState::Cancelled);
    assert!(store.final_details(&[]).await.expect("none asked").is_empty());
}
