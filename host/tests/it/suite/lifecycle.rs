//! A task's life on every backend: each transition of `model::lifecycle` tried from each state.
//! From a state it may start from, it ends where the model says, with the runs and the failure
//! count to match; from any other state it changes nothing at all.

use taskhost::model::*;
use taskhost::store::{RetryPlan, SharedStore};

use super::{failure, runner, secs, snoozed, success, t0, DAY};

/// One task of its own: its queue, handler and runner are used by no other case, so a
/// transition that acts on "every due task" or "a runner's runs" reaches only this one.
struct Case {
    n: usize,
    task: TaskId,
    runner: RunnerId,
}

/// The queue of a case's blocker: a task of its own that the case's task runs after when it is
/// waiting; ending it well or badly is how a waiting task is moved on.
fn blocker_queue(n: usize) -> String {
    format!("b{n}")
}

const CASES: usize = TaskState::ALL.len() * Transition::ALL.len();

fn queue(n: usize) -> String {
    format!("q{n}")
}

fn handler(n: usize) -> String {
    format!("h{n}")
}

fn now() -> chrono::DateTime<chrono::Utc> {
    t0() + secs(10)
}

/// What a task looks like from outside: its state, failure count and runs.
#[derive(Debug, PartialEq)]
struct Seen {
    state: TaskState,
    failed: u32,
    runs: Vec<(u32, RunStatus)>,
}

async fn seen(store: &SharedStore, task: TaskId) -> Seen {
    let t = store.get_task(task).await.expect("get").expect("exists");
    let runs = store.runs_of(task).await.expect("runs").iter().map(|r| (r.attempt, r.status)).collect();
    Seen { state: t.state, failed: t.task_runs_failed, runs }
}

/// The task's latest run; one never claimed has none: 0, an id no run has.
async fn latest_run(store: &SharedStore, task: TaskId) -> RunId {
    store.runs_of(task).await.expect("runs").last().map_or(0, |r| r.id)
}

/// A claimed-run stand-in for the outcome helpers: the task's latest run, running or not.
async fn as_claimed(store: &SharedStore, c: &Case) -> ClaimedRun {
    let t = store.get_task(c.task).await.expect("get").expect("exists");
    ClaimedRun {
        run_id: latest_run(store, c.task).await,
        task_id: c.task,
        attempt: 1,
        handler: t.handler,
        queue: t.queue,
        due_on: t.scheduled_on,
        data: t.data,
        queued_by: None,
        max_attempts: t.max_attempts,
        task_runs_failed: t.task_runs_failed,
        backoff: t.backoff,
        snoozes: t.snoozes,
        depth: t.depth,
        started_on: now(),
        timeout_on: now() + secs(60),
        key: t.key,
        fuel_key: None,
        delete_on_success: false,
        digest: None,
        unreadable: None,
    }
}

/// A new task brought to `state` by the transitions that lead there.
async fn task_in(store: &SharedStore, n: usize, state: TaskState) -> Case {
    let blocker = NewTask::new("blocker", "{}").with_queue(blocker_queue(n)).with_scheduled_on(t0());
    let blocker = store.add_tasks(&[blocker], t0()).await.expect("add")[0].id;
    let mut new = NewTask::new(handler(n), "{}").with_queue(queue(n)).with_max_attempts(3).with_scheduled_on(t0());
    if state == TaskState::Waiting {
        new = new.with_after([blocker]);
    }
    let task = store.add_tasks(&[new], t0()).await.expect("add")[0].id;
    let runner = store.register_runner(1000 + n as u32, "lifecycle", t0(), 100).await.expect("runner");
    let c = Case { n, task, runner };
    let path: &[Transition] = match state {
        TaskState::Waiting | TaskState::Scheduled => &[],
        TaskState::Running => &[Transition::Claim],
        TaskState::AwaitingRetry => &[Transition::Claim, Transition::TimeOut],
        TaskState::Succeeded => &[Transition::Claim, Transition::Succeed],
        TaskState::Dead => &[Transition::Claim, Transition::FailAndGiveUp],
        TaskState::Cancelled => &[Transition::Cancel],
    };
    for t in path {
        assert!(apply(store, &c, *t).await, "{t} on the way to {state}");
    }
    assert_eq!(seen(store, task).await.state, state);
    c
}

/// Try `t` on the case's task through the store's own entry point; whether the store says it
/// acted (for those that say).
async fn apply(store: &SharedStore, c: &Case, t: Transition) -> bool {
    let at = now();
    match t {
        Transition::Ready | Transition::DependencyFailed => {
            let b = store.claim(c.runner, &[blocker_queue(c.n)], 1, at, DAY).await.expect("claim");
            let Some(b) = b.first() else { return false };
            let end = if t == Transition::Ready { success(b, at, "{}") } else { failure(b, at, NextStep::GiveUp) };
            store.finish_runs(&[end]).await.expect("finish");
            true
        }
        Transition::Claim => !store.claim(c.runner, &[queue(c.n)], 10, at, DAY).await.expect("claim").is_empty(),
        Transition::Succeed => {
            let run = as_claimed(store, c).await;
            store.finish_runs(&[success(&run, at, "{}")]).await.expect("finish");
            true
        }
        Transition::FailAndRetry | Transition::FailAndGiveUp => {
            let next = if t == Transition::FailAndRetry { NextStep::RetryAt(at) } else { NextStep::GiveUp };
            let run = as_claimed(store, c).await;
            store.finish_runs(&[failure(&run, at, next)]).await.expect("finish");
            true
        }
        Transition::Snooze => {
            let run = as_claimed(store, c).await;
            store.finish_runs(&[snoozed(&run, at, at)]).await.expect("finish");
            true
        }
        Transition::TimeOut => store.time_out_runners(&[c.runner], at).await.expect("time out") > 0,
        Transition::PutBack => {
            let run = latest_run(store, c.task).await;
            store.put_back(&[(run, at)]).await.expect("put back") == [run]
        }
        Transition::Retry | Transition::GiveUp => {
            let next = if t == Transition::Retry { NextStep::RetryAt(at) } else { NextStep::GiveUp };
            let plan = RetryPlan { task_id: c.task, next };
            store.apply_retry_plans(&[plan], at).await.expect("plans");
            true
        }
        Transition::Abandon => {
            let mut served: Vec<String> = (0..CASES).filter(|i| *i != c.n).map(handler).collect();
            served.push("blocker".into());
            store.give_up_unserved(&served, at, at, 10).await.expect("give up unserved") > 0
        }
        Transition::Cancel => !store.cancel_tasks(&[c.task], at).await.expect("cancel").is_empty(),
        Transition::Replay => store.retry_task(c.task, None, at).await.is_ok(),
    }
}

/// What a legal transition leaves: the model's state, the failure counted (or forgotten), one
/// running run while the task runs and none otherwise (a task's runs are made by its claims,
/// or by a cancel or an abandon to record why it ended, each numbered after the latest; a run
/// put back is gone).
fn check_legal(t: Transition, before: &Seen, after: &Seen) {
    assert_eq!(after.state, t.to(), "{t} from {}", before.state);
    let failed = match t {
        Transition::Succeed | Transition::Replay => 0,
        _ if t.counts_a_failure() => before.failed + 1,
        _ => before.failed,
    };
    assert_eq!(after.failed, failed, "failures after {t} from {}", before.state);
    let active: Vec<&(u32, RunStatus)> =
        after.runs.iter().filter(|(_, s)| matches!(s, RunStatus::Scheduled | RunStatus::Running)).collect();
    let active_wanted = usize::from(after.state == TaskState::Running);
    assert_eq!(active.len(), active_wanted, "active runs after {t}: {:?}", after.runs);
    let last = before.runs.iter().map(|(a, _)| *a).max().unwrap_or(0);
    let made = match t {
        Transition::Claim => Some(RunStatus::Running),
        Transition::Cancel | Transition::DependencyFailed if before.state != TaskState::Running => {
            Some(RunStatus::Cancelled)
        }
        Transition::Abandon => Some(RunStatus::Error),
        _ => None,
    };
    let runs = match t {
        Transition::PutBack => before.runs.len() - 1,
        _ => before.runs.len() + usize::from(made.is_some()),
    };
    assert_eq!(after.runs.len(), runs, "runs after {t}: {:?}", after.runs);
    if let Some(status) = made {
        assert_eq!(after.runs.last(), Some(&(last + 1, status)), "the run made by {t}");
    }
}

/// Every transition from every state: the legal ones move the task as the model says, the
/// others are refused and change nothing (a late success after a cancel, a replay of a running
/// task, a second overseer's retry …).
pub async fn every_transition_is_made_from_the_states_it_may_start_from_and_refused_from_the_others(
    store: SharedStore,
) {
    let mut n = 0;
    for state in TaskState::ALL {
        for t in Transition::ALL {
            let c = task_in(&store, n, state).await;
            n += 1;
            let before = seen(&store, c.task).await;
            let acted = apply(&store, &c, t).await;
            let after = seen(&store, c.task).await;
            if state.allows(t) {
                assert!(acted, "{t} from {state} said it did nothing");
                check_legal(t, &before, &after);
            } else {
                assert_eq!(after, before, "{t} from {state} changed the task");
                assert!(!acted || !reports(t), "{t} from {state} said it acted");
            }
        }
    }
}

/// Whether the store's entry point for `t` says if it acted (outcomes and plans are written or
/// ignored without a word).
fn reports(t: Transition) -> bool {
    !matches!(
        t,
        Transition::Ready
            | Transition::DependencyFailed
            | Transition::Succeed
            | Transition::FailAndRetry
            | Transition::FailAndGiveUp
            | Transition::Snooze
            | Transition::Retry
            | Transition::GiveUp
    )
}

/// One finish of 5,000 runs (35,000 values: more than SQLite binds in one statement), with every
/// field varying: each run and task is written once, with its own values, and every unique key
/// is freed.
pub async fn a_finish_of_runs_in_as_many_queues_counts_each_queue(store: SharedStore) {
    // 2,500 statistics rows of 28 values: more than one statement binds on PostgreSQL and MySQL.
    let queues: Vec<String> = (0..2_500).map(|i| format!("q{i}")).collect();
    let tasks: Vec<_> = queues.iter().map(|q| NewTask::new("h", "{}").with_queue(q.as_str())).collect();
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &queues, 2_500, t0(), DAY).await.expect("claim");
    assert_eq!(claimed.len(), 2_500);
    let outcomes: Vec<_> = claimed.iter().map(|c| success(c, t0() + secs(1), "{}")).collect();
    store.finish_runs(&outcomes).await.expect("finish");
    let stats = store.stats(None, None, t0() + secs(30)).await.expect("stats");
    assert_eq!(stats.len(), 2_500);
    assert!(stats.iter().all(|s| s.runs.succeeded == 1), "each queue counted once");
}

pub async fn a_large_finish_writes_each_run_and_task_with_its_own_values(store: SharedStore) {
    let tasks: Vec<_> = (0..5_000).map(|i| NewTask::new("h", "{}").with_unique_key(format!("k{i}"))).collect();
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let mut claimed = Vec::new();
    while claimed.len() < tasks.len() {
        claimed.extend(store.claim(r, &["default".into()], 1_000, t0(), DAY).await.expect("claim"));
    }
    let outcomes: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(i, c)| RunOutcome {
            duration_ms: i as i64,
            fuel_used: Some(i as i64 * 10),
            logs: (i % 2 == 0).then(|| format!("log {i}")),
            fuel_key: None,
            delete_on_success: false,
            component_digest: (i % 3 != 0).then(|| format!("{i:064}")),
            ..success(c, t0() + secs(1 + i as i64 % 50), &format!(r#"{{"i":{i}}}"#))
        })
        .collect();
    store.finish_runs(&outcomes).await.expect("finish");
    assert_eq!(store.counts().await.expect("counts").running, 0);
    for (i, o) in outcomes.iter().enumerate().step_by(149) {
        let task = store.get_task(o.task_id).await.expect("get").expect("task");
        assert_eq!(task.last_status, RunStatus::Success);
        let runs = store.runs_of(o.task_id).await.expect("runs");
        assert_eq!(runs.len(), 1);
        let run = &runs[0];
        assert_eq!((run.id, run.status, run.finished_on), (o.run_id, RunStatus::Success, Some(o.finished_on)));
        assert_eq!((run.duration_ms, run.fuel_used), (Some(i as i64), Some(i as i64 * 10)));
        assert_eq!(
            (run.logs.as_deref(), run.component_digest.as_deref()),
            (o.logs.as_deref(), o.component_digest.as_deref())
        );
        assert_eq!(run.results.as_deref(), Some(format!(r#"{{"i":{i}}}"#).as_str()));
    }
    let again = store.add_tasks(&[NewTask::new("h", "{}").with_unique_key("k4999")], t0()).await.expect("add");
    assert!(again[0].created, "the finished task's key is free");
}

/// A running run is kept on its task's row and written to `task_runs` once, as it ended,
/// whichever way it ends; run ids, handed out by claims, are never given twice, and attempts
/// count on across retries, put backs and runs made by a cancel.
pub async fn a_running_run_is_written_once_as_it_ended_and_ids_are_never_given_twice(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let tasks: Vec<NewTask> = (0..4).map(|_| NewTask::new("h", "{}")).collect();
    let ids: Vec<TaskId> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let queues = ["default".to_string()];
    let first = store.claim(r, &queues, 3, t0(), DAY).await.expect("claim");
    let [a, b, c] = [&first[0], &first[1], &first[2]];
    let mut given: Vec<RunId> = first.iter().map(|c| c.run_id).collect();
    let progress =
        ProgressUpdate { task_id: a.task_id, run_id: a.run_id, percent: Some(50), results: Some("[p]".into()) };
    store.record_progress(&[progress]).await.expect("progress");
    let running = store.runs_of(a.task_id).await.expect("runs");
    assert_eq!(
        running.iter().map(|r| (r.id, r.attempt, r.status, r.percents_completed)).collect::<Vec<_>>(),
        [(a.run_id, 1, RunStatus::Running, 50)],
        "read from the task's row"
    );
    store.finish_runs(&[failure(a, t0() + secs(1), NextStep::RetryAt(t0() + secs(2)))]).await.expect("fail");
    assert_eq!(store.put_back(&[(b.run_id, t0() + secs(2))]).await.expect("put back"), [b.run_id]);
    assert_eq!(store.cancel_tasks(&[c.task_id, ids[3]], t0() + secs(1)).await.expect("cancel").len(), 2);
    let failed = &store.runs_of(a.task_id).await.expect("runs")[0];
    assert_eq!(
        (failed.id, failed.status, failed.percents_completed, failed.results.as_deref(), failed.runner_id),
        (a.run_id, RunStatus::Error, 40, Some("[p]"), Some(r)),
        "the failed run keeps its partial results and runner, its progress as its outcome last saw it"
    );
    assert!(store.runs_of(b.task_id).await.expect("runs").is_empty(), "a run put back leaves no row");
    let cancelled = store.runs_of(c.task_id).await.expect("runs");
    assert_eq!(
        cancelled.iter().map(|r| (r.id, r.attempt, r.status)).collect::<Vec<_>>(),
        [(c.run_id, 1, RunStatus::Cancelled)]
    );
    let made = store.runs_of(ids[3]).await.expect("runs");
    assert_eq!(made.iter().map(|r| (r.attempt, r.status)).collect::<Vec<_>>(), [(1, RunStatus::Cancelled)]);
    given.push(made[0].id);
    let again = store.claim(r, &queues, 10, t0() + secs(2), DAY).await.expect("claim");
    let attempts: Vec<(TaskId, u32)> = again.iter().map(|c| (c.task_id, c.attempt)).collect();
    assert_eq!(attempts, [(a.task_id, 2), (b.task_id, 1)], "a retry counts on; a put back does not");
    given.extend(again.iter().map(|c| c.run_id));
    store.finish_runs(&again.iter().map(|c| success(c, t0() + secs(3), "[]")).collect::<Vec<_>>()).await.expect("ok");
    let mut unique = given.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), given.len(), "every run id given once: {given:?}");
    let runs = store.runs_of(a.task_id).await.expect("runs");
    assert_eq!(
        runs.iter().map(|r| (r.id, r.attempt, r.status)).collect::<Vec<_>>(),
        [(a.run_id, 1, RunStatus::Error), (again[0].run_id, 2, RunStatus::Success)]
    );
}

/// One claim of tasks with different run timeouts gives each run its own, the same as its
/// worker is told and as the overseer times it out; a batch of successes gives each task its
/// own run's finish time.
pub async fn one_claim_gives_each_run_its_own_timeout_and_each_success_its_own_finish_time(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let timeouts: [Option<i64>; 6] = [None, Some(10), Some(20), Some(10), None, Some(30)];
    let tasks: Vec<NewTask> = timeouts
        .iter()
        .map(|t| match t {
            Some(s) => NewTask::new("h", "{}").with_run_timeout(std::time::Duration::from_secs(s.unsigned_abs())),
            None => NewTask::new("h", "{}"),
        })
        .collect();
    let ids: Vec<TaskId> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let claimed = store.claim(r, &["default".into()], 10, t0(), DAY).await.expect("claim");
    assert_eq!(claimed.iter().map(|c| c.task_id).collect::<Vec<_>>(), ids, "all, in order");
    let day = chrono::Duration::from_std(DAY).expect("a day");
    for (c, t) in claimed.iter().zip(timeouts) {
        assert_eq!(c.timeout_on, t0() + t.map_or(day, secs), "task {}", c.task_id);
        let runs = store.runs_of(c.task_id).await.expect("runs");
        assert_eq!(runs.iter().map(|r| (r.id, r.status)).collect::<Vec<_>>(), [(c.run_id, RunStatus::Running)]);
    }
    for (at, due) in [(9, 0), (10, 2), (19, 0), (20, 1), (30, 1)] {
        let now = t0() + secs(at);
        assert_eq!(store.time_out_overdue_runs(now, now, 100).await.expect("time out"), due, "at {at} s");
    }
    for (i, t) in timeouts.iter().enumerate() {
        let want = if t.is_some() { RunStatus::Timeout } else { RunStatus::Running };
        assert_eq!(store.get_task(ids[i]).await.expect("get").expect("exists").last_status, want, "task {i}");
    }
    let ok = [success(&claimed[0], t0() + secs(31), "[]"), success(&claimed[4], t0() + secs(32), "[]")];
    store.finish_runs(&ok).await.expect("finish");
    for (i, at) in [(0, 31), (4, 32)] {
        let runs = store.runs_of(ids[i]).await.expect("runs");
        assert_eq!(
            runs.iter().map(|r| (r.id, r.status, r.finished_on)).collect::<Vec<_>>(),
            [(claimed[i].run_id, RunStatus::Success, Some(t0() + secs(at)))]
        );
    }
    let all = taskhost::store::BulkFilter::default();
    let succeeded = taskhost::store::Finished::Succeeded;
    let before = t0() + secs(31) + chrono::Duration::milliseconds(500);
    assert_eq!(store.delete_finished(succeeded, &all, before).await.expect("delete"), 1, "finished at 31 s");
    assert!(store.get_task(ids[0]).await.expect("get").is_none());
    let kept = store.get_task(ids[4]).await.expect("get").expect("finished at 32 s, kept");
    assert_eq!(kept.last_status, RunStatus::Success);
}

/// A claim of more tasks than one statement of a database takes (MySQL's is cut into several)
/// gives every task one run of its own.
pub async fn a_claim_of_ten_thousand_and_more_gives_every_task_a_run_of_its_own(store: SharedStore) {
    let n = 10_050;
    let tasks: Vec<NewTask> = (0..n).map(|_| NewTask::new("h", "{}")).collect();
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &["default".into()], n as u32, t0(), DAY).await.expect("claim");
    assert_eq!(claimed.len(), n);
    let mut runs: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    runs.sort_unstable();
    runs.dedup();
    assert_eq!(runs.len(), n, "every run id given once");
    for c in [&claimed[0], &claimed[9_999], &claimed[10_000], &claimed[n - 1]] {
        let on_task = store.runs_of(c.task_id).await.expect("runs");
        assert_eq!(
            on_task.iter().map(|r| (r.id, r.attempt, r.status)).collect::<Vec<_>>(),
            [(c.run_id, 1, RunStatus::Running)]
        );
    }
    assert_eq!(store.counts().await.expect("counts").running, n as u64);
}
