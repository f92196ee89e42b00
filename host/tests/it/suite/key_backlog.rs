//! The store suite's cases for a deep backlog of keys out of room: a claim reads a bounded part
//! of it, and still reaches the tasks that fit behind it.

use super::*;
use taskhost::store::{Backend, LimitEdit, LimitSetBy};

/// Due tasks a limited claim walks at most from where it starts (`store::shared::key_reads`).
const WINDOW: usize = 2_000;

fn ms(n: i64) -> chrono::Duration {
    chrono::Duration::milliseconds(n)
}

/// Queue `queue` limited per key by `limit`; key a's backlog of `n`, then b's task and a keyless
/// one due a second later (tasks due later keep their times: behind a's turns). The first claim
/// takes one of a's, which leaves a out of room; then claims of 16 go on until they hold b's and
/// the keyless task, each claim's tasks checked by `check`. The number of claims that took.
async fn claims_to_reach_past(store: &SharedStore, queue: &str, limit: Limit, n: usize) -> usize {
    let by = LimitSetBy::Operator;
    store.set_limit(LimitScope::Queue, queue, LimitEdit::Set(limit), by, t0()).await.expect("set");
    let in_q = |t: NewTask| t.with_queue(queue);
    let backlog: Vec<NewTask> =
        (0..n).map(|i| in_q(NewTask::new("h", format!("{{\"i\": {i}}}")).with_key("a"))).collect();
    store.add_tasks(&backlog, t0()).await.expect("add a's backlog");
    let behind = [
        in_q(NewTask::new("h", "{}").with_key("b").with_scheduled_on(t0() + secs(1))),
        in_q(NewTask::new("h", "{}").with_scheduled_on(t0() + secs(1))),
    ];
    let behind: Vec<TaskId> = store.add_tasks(&behind, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let limits = store.limits_in_force().await.expect("limits");
    let queues = [queue.to_string()];
    let r = runner(store, t0()).await;
    let claim =
        |n| taskhost::store::ClaimRequest { now: t0() + secs(2), ..super::limited(r, &queues, None, n, &limits) };
    let first = store.claim_paced(&claim(1)).await.expect("claim");
    assert_eq!(first.runs.len(), 1, "one of a's");
    let mut reached = Vec::new();
    for claims in 1..=n / WINDOW + 2 {
        let claimed = store.claim_paced(&claim(16)).await.expect("claim");
        for c in &claimed.runs {
            assert!(behind.contains(&c.task_id), "claim {claims} took one of a's, out of room: {:?}", c.task_id);
            reached.push(c.task_id);
        }
        if reached.len() == behind.len() {
            return claims;
        }
    }
    panic!("b's and the keyless task not reached past a's {n} in {} claims: {reached:?}", n / WINDOW + 2);
}

/// A key at its cap with a backlog of two and a half windows, and a key paced out with as many:
/// the tasks that fit behind them (another key's, a keyless one) are claimed by the second or
/// third claim, not the first: each claim reads a bounded part of the backlog (a claim once read
/// it whole, at every poll of every idle worker), and the next goes on from where it stopped.
pub async fn tasks_that_fit_behind_a_deep_backlog_of_keys_out_of_room_are_reached_in_a_few_claims(store: SharedStore) {
    let n = WINDOW * 5 / 2;
    let capped = Limit { max_running_per_key: Some(1), ..Limit::default() };
    let claims = claims_to_reach_past(&store, "capped", capped, n).await;
    // Not the first claim: it read no more than two windows. (MariaDB may read the tasks of the
    // keys not full by the index of keys, and take them at once.)
    let first = if store.backend() == Backend::MySql { 1 } else { 2 };
    assert!((first..=3).contains(&claims), "{claims} claims past a full key's backlog");
    let rate = Rate::parse("1/1h").and_then(|r| r.with_burst(0)).expect("a rate");
    let paced = Limit { rate_per_key: Some(rate), ..Limit::default() };
    let claims = claims_to_reach_past(&store, "paced", paced, n).await;
    assert!((2..=3).contains(&claims), "{claims} claims past a paced-out key's backlog");
    // Nothing is left that fits: a claim reads its bounded part and takes none.
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["capped".to_string(), "paced".to_string()];
    let r = runner(&store, t0()).await;
    let claim = taskhost::store::ClaimRequest { now: t0() + secs(3), ..super::limited(r, &queues, None, 16, &limits) };
    for _ in 0..3 {
        assert!(store.claim_paced(&claim).await.expect("claim").runs.is_empty());
    }
}

/// A worker that runs only handler h, in a queue where another handler's tasks lie among h's:
/// the tasks of three other keys due among a full key a's backlog (a third of a window in, three
/// quarters, and in the second window) are all claimed within a few claims. MariaDB's read, once
/// bounded by `ROWS EXAMINED` (which counted the other handler's rows, and more than once a
/// task), went on from where a window of h's tasks alone would end and never read some of them.
pub async fn tasks_that_fit_amid_a_backlog_of_full_keys_and_other_handlers_tasks_are_all_reached(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let capped = Limit { max_running_per_key: Some(1), ..Limit::default() };
    store.set_limit(LimitScope::Queue, "amid", LimitEdit::Set(capped), by, t0()).await.expect("set");
    let in_q = |t: NewTask| t.with_queue("amid");
    let n = WINDOW * 5 / 4;
    // a's turns are a microsecond apart from t0; the others' tasks keep the times they ask.
    let fitting = [(WINDOW / 3, "b"), (WINDOW * 3 / 4, "c"), (WINDOW * 6 / 5, "d")];
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(in_q(NewTask::new("h", format!("{{\"i\": {i}}}")).with_key("a")));
        tasks.push(in_q(NewTask::new("other", "{}")));
    }
    for (at, key) in fitting {
        let due = t0() + chrono::Duration::microseconds(at as i64);
        tasks.push(in_q(NewTask::new("h", "{}").with_key(key).with_scheduled_on(due)));
    }
    store.add_tasks(&tasks, t0()).await.expect("add");
    let limits = store.limits_in_force().await.expect("limits");
    let (queues, handlers) = (["amid".to_string()], ["h".to_string()]);
    let r = runner(&store, t0()).await;
    let claim = |n| taskhost::store::ClaimRequest {
        now: t0() + secs(1),
        ..super::limited(r, &queues, Some(&handlers), n, &limits)
    };
    let first = store.claim_paced(&claim(1)).await.expect("claim").runs;
    assert_eq!(first.iter().map(|c| c.key.as_deref()).collect::<Vec<_>>(), [Some("a")], "a full from then on");
    let mut reached = Vec::new();
    for _ in 0..4 {
        for c in store.claim_paced(&claim(16)).await.expect("claim").runs {
            assert_eq!(c.handler, "h", "only h's tasks");
            reached.push(c.key.unwrap_or_default());
        }
    }
    reached.sort();
    assert_eq!(reached, ["b", "c", "d"], "the three keys' tasks amid a's backlog, in four claims");
}

/// A queue capped per key where every due task's key is full is read to its last due task, then
/// left unread for a second (a lap of one window): a task that came due by time meanwhile waits
/// until then. But a task added, a run of a full key ending, or the queue resumed, is claimed at
/// once, whatever the time.
pub async fn a_queue_where_nothing_fits_is_left_unread_a_while_but_an_add_or_a_freed_key_is_seen_at_once(
    store: SharedStore,
) {
    let by = LimitSetBy::Operator;
    let capped = Limit { max_running_per_key: Some(1), ..Limit::default() };
    store.set_limit(LimitScope::Queue, "dry", LimitEdit::Set(capped), by, t0()).await.expect("set");
    let in_q = |t: NewTask| t.with_queue("dry");
    let mut tasks: Vec<NewTask> =
        (0..100).map(|i| in_q(NewTask::new("h", format!("{{\"i\": {i}}}")).with_key("a"))).collect();
    // c's task comes due by time, a second and a half in.
    tasks.push(in_q(NewTask::new("h", "{}").with_key("c").with_scheduled_on(t0() + secs(2) + ms(500))));
    let c = store.add_tasks(&tasks, t0()).await.expect("add")[100].id;
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["dry".to_string()];
    let r = runner(&store, t0()).await;
    let claim = |n, at| taskhost::store::ClaimRequest { now: at, ..super::limited(r, &queues, None, n, &limits) };
    let at = t0() + secs(2);
    let first = store.claim_paced(&claim(1, at)).await.expect("claim").runs;
    assert_eq!(first.len(), 1, "one of a's, a full from then on");
    assert!(store.claim_paced(&claim(16, at)).await.expect("claim").runs.is_empty(), "a's 99 left out: dry");

    // An add is seen at once.
    let added = store.add_tasks(&[in_q(NewTask::new("h", "{}"))], at).await.expect("add")[0].id;
    let taken = store.claim_paced(&claim(16, at)).await.expect("claim").runs;
    assert_eq!(taken.iter().map(|c| c.task_id).collect::<Vec<_>>(), [added], "the keyless task added");
    assert!(store.claim_paced(&claim(16, at)).await.expect("claim").runs.is_empty(), "dry again");

    // c's task came due by time: not read for a second after the read that found the queue dry.
    let later = at + ms(600);
    assert!(store.claim_paced(&claim(16, later)).await.expect("claim").runs.is_empty(), "left unread");
    let taken = store.claim_paced(&claim(16, at + ms(1_100))).await.expect("claim").runs;
    assert_eq!(taken.iter().map(|c| c.task_id).collect::<Vec<_>>(), [c], "read again after a second");

    // A full key's run ends: its next task is claimed at once.
    let at = at + ms(1_100);
    assert!(store.claim_paced(&claim(16, at)).await.expect("claim").runs.is_empty(), "dry");
    store.finish_runs(&[success(&first[0], at, "{}")]).await.expect("finish");
    let taken = store.claim_paced(&claim(16, at)).await.expect("claim").runs;
    assert_eq!(taken.len(), 1, "a's next, a having room again");
    assert_eq!(taken[0].key.as_deref(), Some("a"));

    // Paused, a's run ends: nothing is claimed, and the queue is left unread; resumed, it is read
    // at once.
    assert!(store.pause_queue("dry", at).await.expect("pause"));
    store.finish_runs(&[success(&taken[0], at, "{}")]).await.expect("finish");
    assert!(store.claim_paced(&claim(16, at)).await.expect("claim").runs.is_empty(), "paused");
    assert!(store.resume_queue("dry").await.expect("resume"));
    let taken = store.claim_paced(&claim(16, at)).await.expect("claim").runs;
    assert_eq!(taken.iter().map(|c| c.key.as_deref()).collect::<Vec<_>>(), [Some("a")], "resumed: read at once");
}

/// A queue paced per key where every due task's key is out of starts is left unread too, but
/// only until the first such key may start again: a task that came due by time meanwhile waits
/// until then. A rate per key changed is seen at once.
pub async fn a_paced_queue_where_nothing_fits_is_left_unread_until_its_first_key_may_start(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let paced = |r: &str| {
        let rate = Rate::parse(r).and_then(|r| r.with_burst(0)).expect("a rate");
        LimitEdit::Set(Limit { rate_per_key: Some(rate), ..Limit::default() })
    };
    store.set_limit(LimitScope::Queue, "slow", paced("2/1s"), by, t0()).await.expect("set");
    let in_q = |t: NewTask| t.with_queue("slow");
    let mut tasks: Vec<NewTask> =
        (0..100).map(|i| in_q(NewTask::new("h", format!("{{\"i\": {i}}}")).with_key("a"))).collect();
    // c's task comes due by time, 0.2 s in.
    tasks.push(in_q(NewTask::new("h", "{}").with_key("c").with_scheduled_on(t0() + secs(2) + ms(200))));
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let queues = ["slow".to_string()];
    let claim = |at| {
        let store = store.clone();
        let queues = queues.clone();
        async move {
            let limits = store.limits_in_force().await.expect("limits");
            let req = taskhost::store::ClaimRequest { now: at, ..super::limited(r, &queues, None, 16, &limits) };
            let mut keys: Vec<String> =
                store.claim_paced(&req).await.expect("claim").runs.into_iter().filter_map(|c| c.key).collect();
            keys.sort();
            keys
        }
    };
    let at = t0() + secs(2);
    assert_eq!(claim(at).await, ["a"], "a's first; a out of starts for half a second");
    assert!(claim(at).await.is_empty(), "a's 99 left out: dry until a may start");
    assert!(claim(at + ms(300)).await.is_empty(), "left unread, though c's task is due");
    assert_eq!(claim(at + ms(500)).await, ["a"], "read again as a may start: a's next (its backlog read first)");
    assert_eq!(claim(at + ms(500)).await, ["c"], "then c's, a out of starts again");

    // Dry until a may start again, a second on; a rate raised is seen at once (a's mark is
    // brought back to one pace of it ahead).
    let at = at + ms(500);
    assert!(claim(at).await.is_empty(), "dry");
    store.set_limit(LimitScope::Queue, "slow", paced("10/1s"), by, at).await.expect("set");
    assert_eq!(claim(at + ms(100)).await, ["a"], "read again under the new rate");
}
