//! The store suite's cases for uniqueness over time (issue 48): a unique key kept after its task
//! ends, in the states the task asked for, and let go once its period has passed.

use super::*;
use taskhost::store::{BulkFilter, Replay};

async fn add(store: &SharedStore, task: NewTask, at: DateTime<Utc>) -> Added {
    store.add_tasks(&[task], at).await.expect("add")[0]
}

fn keyed(key: &str, states: UniqueStates) -> NewTask {
    NewTask::new("h", "{}").with_unique_key(key).with_unique_states(states).with_max_attempts(1)
}

/// `succeeded` keeps the key once its task succeeded, not once it is dead; `any` keeps it once
/// cancelled or dead; the default lets it go at the end. A task holding its own key still runs
/// again: a retry, and the bulk replay of dead letters (which leaves one whose key another holds).
pub async fn a_unique_key_stays_taken_in_the_states_its_task_asked_for(store: SharedStore) {
    let r = runner(&store, t0()).await;
    let ok = add(&store, keyed("ok", UniqueStates::Succeeded), t0()).await.id;
    let dead = add(&store, keyed("dead", UniqueStates::Succeeded), t0()).await.id;
    let plain = add(&store, keyed("plain", UniqueStates::Unfinished), t0()).await.id;
    let shared = add(&store, keyed("shared", UniqueStates::Unfinished), t0()).await.id;
    let kept_dead = add(&store, keyed("kept-dead", UniqueStates::Any), t0()).await.id;
    let gone = add(&store, keyed("gone", UniqueStates::Any), t0()).await.id;
    store.cancel_tasks(&[gone], t0() + secs(1)).await.expect("cancel");
    let c = store.claim(r, &["default".into()], 10, t0(), DAY).await.expect("claim");
    let run_of = |id: TaskId| c.iter().find(|c| c.task_id == id).expect("claimed").clone();
    let end = t0() + secs(1);
    let outcomes = [
        success(&run_of(ok), end, "{}"),
        failure(&run_of(dead), end, NextStep::GiveUp),
        success(&run_of(plain), end, "{}"),
        failure(&run_of(kept_dead), end, NextStep::GiveUp),
        failure(&run_of(shared), end, NextStep::GiveUp),
    ];
    store.finish_runs(&outcomes).await.expect("finish");
    // `shared` let its key go when it died; another task takes it, keeping it once dead too.
    let keeper = add(&store, keyed("shared", UniqueStates::Any), end).await.id;
    let c = store.claim(r, &["default".into()], 10, end, DAY).await.expect("claim");
    assert_eq!(c.len(), 1);
    store.finish_runs(&[failure(&c[0], end, NextStep::GiveUp)]).await.expect("finish");

    let later = t0() + secs(2);
    let again = |key: &str| add(&store, keyed(key, UniqueStates::Unfinished), later);
    let seen = |a: Added| (a.created, a.id);
    assert_eq!(seen(again("ok").await), (false, ok), "a succeeded task keeps a key held while succeeded");
    assert!(again("dead").await.created, "a dead one lets it go");
    assert!(again("plain").await.created, "by default the key goes with the task's end");
    assert_eq!(seen(again("kept-dead").await), (false, kept_dead), "`any` keeps it once dead");
    assert_eq!(seen(again("gone").await), (false, gone), "`any` keeps it once cancelled");
    let task = store.get_task(ok).await.expect("get").expect("exists");
    assert_eq!((task.unique_states, task.unique_until), (UniqueStates::Succeeded, None));

    store.retry_task(ok, None, later).await.expect("a task holding its own key runs again");
    // Dead letters: `kept-dead` and `keeper` hold their own keys and are replayed; `dead`'s key is
    // another's now, and so is `shared`'s (`keeper`'s, in the same batch).
    assert_eq!(store.replay(Replay::Dead, &BulkFilter::default(), later).await.expect("replay"), 2);
    let mut states = Vec::new();
    for id in [dead, kept_dead, shared, keeper] {
        states.push(store.get_task(id).await.expect("get").expect("exists").state);
    }
    let (dead_, scheduled) = (TaskState::Dead, TaskState::Scheduled);
    assert_eq!(states, [dead_, scheduled, dead_, scheduled]);
}

/// A key held for a period is let go once it has passed since its task was queued, whatever the
/// task's state (unfinished or finished); the next task with the key then holds it, for its own
/// period.
pub async fn a_unique_key_is_let_go_once_its_period_has_passed(store: SharedStore) {
    let for_a_minute = |states| keyed("p", states).with_unique_for(Duration::from_secs(60));
    let first = add(&store, for_a_minute(UniqueStates::Any), t0()).await;
    assert!(first.created);
    let task = store.get_task(first.id).await.expect("get").expect("exists");
    assert_eq!(task.unique_until, Some(t0() + secs(60)));
    let within = add(&store, for_a_minute(UniqueStates::Any), t0() + secs(59)).await;
    assert_eq!((within.created, within.id), (false, first.id), "taken within its period");
    // Past it, though the first task is still unfinished.
    let past = add(&store, for_a_minute(UniqueStates::Any), t0() + secs(60)).await;
    assert!(past.created, "let go at the end of the period");
    let next = add(&store, for_a_minute(UniqueStates::Any), t0() + secs(61)).await;
    assert_eq!((next.created, next.id), (false, past.id), "the new holder's own period");
    // The first one, unfinished without its key, runs and ends as any task.
    let r = runner(&store, t0()).await;
    let c = store.claim(r, &["default".into()], 10, t0() + secs(61), DAY).await.expect("claim");
    assert_eq!(c.len(), 2, "both run: {c:?}");
    let outcomes: Vec<_> = c.iter().map(|c| success(c, t0() + secs(62), "{}")).collect();
    store.finish_runs(&outcomes).await.expect("finish");
    let kept = add(&store, for_a_minute(UniqueStates::Any), t0() + secs(119)).await;
    assert_eq!((kept.created, kept.id), (false, past.id), "held in any state until its period ends");
    let free = add(&store, for_a_minute(UniqueStates::Any), t0() + secs(120)).await;
    assert!(free.created, "then let go, though its task is finished");
    // A retry of the task that held it waits for the new holder's period as an add does.
    store.cancel_tasks(&[free.id], t0() + secs(121)).await.expect("cancel");
    let refused = store.retry_task(past.id, None, t0() + secs(150)).await;
    assert!(matches!(refused, Err(taskhost::Error::CannotRetry { .. })), "{refused:?}");
    store.retry_task(past.id, None, t0() + secs(180)).await.expect("the cancelled holder's period passed");
}
