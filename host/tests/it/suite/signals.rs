//! The store suite's cases for signals (issue 47): a run that ends waiting for one, the signal
//! that makes its task due at once and is read by the run that ends well, a signal kept for a wait
//! still to come, a timed-out wait, and the refusals.

use super::*;

/// A run that waits, as the runner reports it: a snooze until `until`, awaiting `name`.
fn waiting(c: &ClaimedRun, now: DateTime<Utc>, name: &str, until: DateTime<Utc>) -> RunOutcome {
    let end =
        RunEnd::Snoozed { until, awaiting: Some(name.into()), partial_results: None, children: Default::default() };
    RunOutcome { end, ..success(c, now, "") }
}

/// A run that read these signals and succeeded.
fn read_and_succeeded(c: &ClaimedRun, now: DateTime<Utc>, signals: Vec<SignalId>) -> RunOutcome {
    let children = QueuedTasks { signals, ..QueuedTasks::default() };
    RunOutcome { end: RunEnd::Success { results: Some("{}".into()), children }, ..success(c, now, "") }
}

/// A task whose run waits for `go` is due at the wait's timeout and marked awaiting it; another
/// name's signal is kept and wakes nothing; `go` makes it due at once; the run that reads it and
/// succeeds marks it read, so no later run is handed it.
pub async fn a_signal_makes_the_task_awaiting_it_due_at_once_and_is_read_once(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    let lookup = store.signal_lookup(id, "go").await.expect("lookup");
    assert_eq!(lookup, SignalLookup::default(), "nothing sent, nothing awaited");
    let until = t0() + secs(3600);
    store.finish_runs(&[waiting(&c[0], t0() + secs(1), "go", until)]).await.expect("wait");
    let task = store.get_task(id).await.expect("get").expect("exists");
    let seen = (task.state, task.scheduled_on, task.awaiting_signal.as_deref(), task.awaiting_until, task.snoozes);
    assert_eq!(seen, (TaskState::Scheduled, until, Some("go"), Some(until), 1), "due at the timeout");

    let other = store.signal(id, "other", r#"{"n":0}"#, t0() + secs(2)).await.expect("send");
    assert!(!other.woke, "a signal it does not await wakes nothing");
    let none = store.claim(r, &["default".into()], 1, t0() + secs(3), DAY).await.expect("claim");
    assert!(none.is_empty(), "still not due");
    let sent = store.signal(id, "go", r#"{"by":"ann"}"#, t0() + secs(4)).await.expect("send");
    assert!(sent.woke, "{sent:?}");
    let c = store.claim(r, &["default".into()], 1, t0() + secs(4), DAY).await.expect("claim");
    assert_eq!(c.len(), 1, "due at once");
    let lookup = store.signal_lookup(id, "go").await.expect("lookup");
    assert_eq!(lookup.unread, Some((sent.id, r#"{"by":"ann"}"#.to_string())));
    assert_eq!(
        lookup.clone().found("go", t0() + secs(4)),
        SignalFound::Delivered { id: sent.id, data: r#"{"by":"ann"}"#.into() }
    );
    store.finish_runs(&[read_and_succeeded(&c[0], t0() + secs(5), vec![sent.id])]).await.expect("finish");

    let signals = store.signals_of(id).await.expect("signals");
    let seen: Vec<_> = signals.iter().map(|s| (s.name.as_str(), s.read_by_run)).collect();
    assert_eq!(seen, vec![("other", None), ("go", Some(c[0].run_id))], "the one read is marked by its run");
    assert_eq!(store.signal_lookup(id, "go").await.expect("lookup").unread, None, "no later run is handed it");
}

/// A signal sent before any wait is kept for it (the running task is not made due); a run that
/// fails, or waits for another, leaves it unread; a wait whose time has come is found timed out;
/// a run that ends waiting for a signal sent while it ran is due at once.
pub async fn a_signal_sent_before_the_wait_is_kept_and_a_failed_run_leaves_it_unread(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 1, t0(), DAY).await.expect("claim");
    let sent = store.signal(id, "go", "{}", t0() + secs(1)).await.expect("send");
    assert!(!sent.woke, "a running task is not made due");
    let retry = NextStep::RetryAt(t0() + secs(10));
    let failed = RunOutcome {
        end: RunEnd::Failure { failure: Failure::host_error("boom"), partial_results: None, next: retry },
        ..success(&c[0], t0() + secs(2), "")
    };
    store.finish_runs(&[failed]).await.expect("fail");
    assert_eq!(store.signal_lookup(id, "go").await.expect("lookup").unread.map(|u| u.0), Some(sent.id));

    // A run handed `go` that waits for another name, timing out at 100 s, leaves `go` unread: the
    // next run, from the top, is handed it again.
    let c = store.claim(r, &["default".into()], 1, t0() + secs(10), DAY).await.expect("claim");
    let mut wait = waiting(&c[0], t0() + secs(11), "later", t0() + secs(100));
    if let RunEnd::Snoozed { children, .. } = &mut wait.end {
        children.signals = vec![sent.id];
    }
    store.finish_runs(&[wait]).await.expect("wait");
    assert_eq!(store.signal_lookup(id, "go").await.expect("lookup").unread.map(|u| u.0), Some(sent.id));
    let lookup = store.signal_lookup(id, "later").await.expect("lookup");
    assert_eq!(lookup.clone().found("later", t0() + secs(50)), SignalFound::NotYet { until: Some(t0() + secs(100)) });
    assert_eq!(lookup.found("later", t0() + secs(100)), SignalFound::TimedOut);

    // A signal sent while the run that ends waiting for it runs: its end finds it, due at once.
    let c = store.claim(r, &["default".into()], 1, t0() + secs(100), DAY).await.expect("claim");
    assert_eq!(c.len(), 1, "due at the wait's timeout");
    assert!(!store.signal(id, "soon", "{}", t0() + secs(101)).await.expect("send").woke);
    store.finish_runs(&[waiting(&c[0], t0() + secs(102), "soon", t0() + secs(500))]).await.expect("wait");
    let task = store.get_task(id).await.expect("get").expect("exists");
    assert_eq!((task.scheduled_on, task.awaiting_signal.as_deref()), (t0() + secs(102), Some("soon")));
}

/// Signals are refused for a task finished or unknown, each with one clear error.
pub async fn a_signal_to_a_finished_or_unknown_task_is_refused(store: SharedStore) {
    let id = store.add_tasks(&[NewTask::new("h", "{}")], t0()).await.expect("add")[0].id;
    store.cancel_tasks(&[id], t0() + secs(1)).await.expect("cancel");
    let refused = store.signal(id, "go", "{}", t0() + secs(2)).await;
    assert!(
        matches!(&refused, Err(taskhost::Error::CannotSignal { reason, .. }) if reason.contains("cancelled")),
        "{refused:?}"
    );
    let unknown = store.signal(id + 1000, "go", "{}", t0() + secs(2)).await;
    assert!(matches!(unknown, Err(taskhost::Error::TaskNotFound(_))), "{unknown:?}");
    assert!(store.signals_of(id).await.expect("signals").is_empty(), "nothing kept");
}
