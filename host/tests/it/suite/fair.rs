//! The store suite's cases for fair shares: keyed tasks take turns, by weight, and a queue may
//! cap each key's runs in flight.

use super::*;
use taskhost::store::{LimitEdit, LimitSetBy};

fn keyed(key: &str, n: usize) -> Vec<NewTask> {
    (0..n).map(|i| NewTask::new("h", format!("{{\"i\": {i}}}")).with_key(key)).collect()
}

/// The keys of the tasks of `runs` ("" for none), in their order.
async fn keys_of(store: &SharedStore, runs: &[ClaimedRun]) -> Vec<String> {
    let mut keys = Vec::new();
    for c in runs {
        keys.push(store.get_task(c.task_id).await.expect("get").expect("the task").key.unwrap_or_default());
    }
    keys
}

/// The keys of the tasks claimed, in claim order.
async fn claimed_keys(store: &SharedStore, r: RunnerId, n: u32, now: DateTime<Utc>) -> Vec<String> {
    keys_of(store, &store.claim(r, &["default".into()], n, now, DAY).await.expect("claim")).await
}

/// A key that comes a second after another's backlog of 100 is claimed beside it, one for one,
/// from the head of the queue; the keys' tasks keep their own order, and a task due later keeps
/// its time.
pub async fn a_key_that_comes_later_takes_turns_with_a_keys_backlog(store: SharedStore) {
    let a = store.add_tasks(&keyed("a", 100), t0()).await.expect("add a");
    let b = store.add_tasks(&keyed("b", 5), t0() + secs(1)).await.expect("add b");
    let later = NewTask::new("h", "{}").with_key("b").with_scheduled_on(t0() + secs(3600));
    let later = store.add_tasks(&[later], t0() + secs(1)).await.expect("add later");
    let task = store.get_task(later[0].id).await.expect("get").expect("the task");
    assert_eq!((task.scheduled_on, task.key.as_deref()), (t0() + secs(3600), Some("b")));
    let r = runner(&store, t0()).await;
    let keys = claimed_keys(&store, r, 12, t0() + secs(1)).await;
    assert_eq!(keys, ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b", "a", "a"], "turns from the head");
    // Each key's own tasks in the order they were added.
    let first_b = store.get_task(b[0].id).await.expect("get").expect("b0");
    let first_a = store.get_task(a[0].id).await.expect("get").expect("a0");
    assert!(first_b.scheduled_on <= first_a.scheduled_on + chrono::Duration::microseconds(1));
    // Keyless tasks are taken by their due time, as ever.
    let plain = store.add_tasks(&[NewTask::new("h", "{}")], t0() + secs(2)).await.expect("add")[0];
    let rest = store.claim(r, &["default".into()], 200, t0() + secs(2), DAY).await.expect("claim");
    assert_eq!(rest.len(), 94, "a's 93 left, then the keyless task");
    assert_eq!(rest.last().map(|c| c.task_id), Some(plain.id));
}

/// A key of weight 3 is given three turns to a weight-1 key's one; a weight is a key's only
/// limit, and a cap per key a queue's.
pub async fn a_keys_weight_gives_it_that_many_turns_to_another_keys_one(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let heavy = Limit { weight: Some(3), ..Limit::default() };
    store.set_limit(LimitScope::Key, "heavy", LimitEdit::Set(heavy), by, t0()).await.expect("weight");
    let capped = Limit { max_running: Some(2), ..Limit::default() };
    let err = store.set_limit(LimitScope::Key, "heavy", LimitEdit::Set(capped), by, t0()).await.expect_err("a cap");
    assert!(err.to_string().contains("a key takes a weight only"), "{err}");
    let listed = store.limits(t0(), None).await.expect("list");
    assert_eq!(listed.iter().map(|l| (l.scope, l.weight)).collect::<Vec<_>>(), [(LimitScope::Key, Some(3))]);
    store.add_tasks(&keyed("heavy", 60), t0()).await.expect("add");
    store.add_tasks(&keyed("light", 60), t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let keys = claimed_keys(&store, r, 40, t0() + secs(1)).await;
    let heavy = keys.iter().filter(|k| *k == "heavy").count();
    assert!((29..=31).contains(&heavy), "{heavy} of 40 turns were the heavy key's: {keys:?}");
}

/// A queue capped at two runs in flight a key claims no more of a key across runners, takes the
/// other keys' tasks past a full key's, and makes room as runs end.
pub async fn a_queue_capped_per_key_holds_each_key_to_its_cap_across_runners(store: SharedStore) {
    let queue = |t: NewTask| t.with_queue("tenants");
    let mut tasks: Vec<NewTask> = keyed("a", 6).into_iter().map(queue).collect();
    tasks.extend(keyed("b", 6).into_iter().map(queue));
    tasks.push(queue(NewTask::new("h", "{}")));
    store.add_tasks(&tasks, t0()).await.expect("add");
    let per_key = Limit { max_running_per_key: Some(2), ..Limit::default() };
    store
        .set_limit(LimitScope::Queue, "tenants", LimitEdit::Set(per_key), LimitSetBy::Operator, t0())
        .await
        .expect("set");
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["tenants".to_string()];
    let (r1, r2) = (runner(&store, t0()).await, runner(&store, t0()).await);
    // A second on: a key's turns are a microsecond apart, its later tasks due that much later.
    let limited =
        |r, n| taskhost::store::ClaimRequest { now: t0() + secs(1), ..super::limited(r, &queues, None, n, &limits) };
    let first = store.claim_for(&limited(r1, 3)).await.expect("claim");
    let second = store.claim_for(&limited(r2, 16)).await.expect("claim");
    let mut keys = Vec::new();
    for c in first.iter().chain(&second) {
        keys.push(store.get_task(c.task_id).await.expect("get").expect("task").key);
    }
    let count = |k: &str| keys.iter().filter(|x| x.as_deref() == Some(k)).count();
    assert_eq!((count("a"), count("b"), keys.len()), (2, 2, 5), "{keys:?}");
    assert!(store.claim_for(&limited(r1, 16)).await.expect("claim").is_empty());
    // The first run (a's: a key's first turn comes first) ends: one more of a's.
    assert_eq!(keys[0].as_deref(), Some("a"));
    store.finish_runs(&[success(&first[0], t0(), "{}")]).await.expect("finish");
    let next = store.claim_for(&limited(r1, 16)).await.expect("claim");
    assert_eq!(next.len(), 1);
    let next_key = store.get_task(next[0].task_id).await.expect("get").expect("task").key;
    assert_eq!(next_key.as_deref(), Some("a"), "the key whose run ended");
}

/// A full key's backlog, however heavy, does not keep another key's task from a capped queue's
/// claim; and a key's backlog in one queue does not push its task in another back.
pub async fn a_full_keys_backlog_holds_back_neither_other_keys_nor_its_own_other_queues(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let heavy = Limit { weight: Some(1000), ..Limit::default() };
    store.set_limit(LimitScope::Key, "a", LimitEdit::Set(heavy), by, t0()).await.expect("weight");
    let per_key = Limit { max_running_per_key: Some(1), ..Limit::default() };
    store.set_limit(LimitScope::Queue, "t", LimitEdit::Set(per_key), by, t0()).await.expect("cap");
    let in_t = |t: NewTask| t.with_queue("t");
    store.add_tasks(&keyed("a", 100).into_iter().map(in_t).collect::<Vec<_>>(), t0()).await.expect("add a");
    store.add_tasks(&keyed("b", 1).into_iter().map(in_t).collect::<Vec<_>>(), t0()).await.expect("add b");
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["t".to_string()];
    let r = runner(&store, t0()).await;
    let claim =
        |n| taskhost::store::ClaimRequest { now: t0() + secs(1), ..super::limited(r, &queues, None, n, &limits) };
    let mut keys = Vec::new();
    for _ in 0..3 {
        for c in store.claim_for(&claim(1)).await.expect("claim") {
            keys.push(store.get_task(c.task_id).await.expect("get").expect("task").key.unwrap_or_default());
        }
    }
    assert_eq!(keys, ["a", "b"], "one of a's, then b's past a's 99, then none: each key at its cap");
    // b's 10,000 in a bulk queue hold its turns there (10 ms of them); its task in another queue
    // is due now.
    store
        .add_tasks(&keyed("b", 10_000).into_iter().map(|t| t.with_queue("bulk")).collect::<Vec<_>>(), t0())
        .await
        .expect("add");
    let fast = store.add_tasks(&[NewTask::new("h", "{}").with_key("b").with_queue("fast")], t0()).await.expect("add");
    let task = store.get_task(fast[0].id).await.expect("get").expect("task");
    assert_eq!(task.scheduled_on, t0(), "due at once, not after b's backlog in bulk");
}

/// A new key starts where the claims of its handler are, not at a task of another handler no
/// worker serves, waiting since long before: it takes turns with the backlog from there.
pub async fn a_new_key_starts_where_its_handlers_claims_are_not_at_an_unserved_task(store: SharedStore) {
    let unserved = NewTask::new("gone", "{}").with_key("z");
    store.add_tasks(&[unserved], t0() - secs(3600)).await.expect("add the unserved task");
    store.add_tasks(&keyed("a", 100), t0()).await.expect("add a");
    let r = runner(&store, t0()).await;
    let handlers = ["h".to_string()];
    let queues = ["default".to_string()];
    let claim = |n, now| taskhost::store::ClaimRequest {
        runner: r,
        queues: &queues,
        handlers: Some(&handlers),
        limit: n,
        now,
        default_timeout: DAY,
        limits: None,
        paced_by_server: false,
    };
    assert_eq!(store.claim_for(&claim(2, t0() + secs(1))).await.expect("claim").len(), 2, "a's first two run");
    store.add_tasks(&keyed("b", 5), t0() + secs(1)).await.expect("add b");
    let mut keys = Vec::new();
    for c in store.claim_for(&claim(4, t0() + secs(1))).await.expect("claim") {
        keys.push(store.get_task(c.task_id).await.expect("get").expect("task").key.unwrap_or_default());
    }
    assert_eq!(keys, ["b", "a", "b", "a"], "turns from a's place, not b's five first");
}

/// A keyed task whose turn reads an hour back (its queue's head) is not given up on as unserved
/// the moment it is queued: its queueing time counts too.
pub async fn a_turn_earlier_than_its_queueing_does_not_make_a_task_look_unserved(store: SharedStore) {
    store.add_tasks(&[NewTask::new("h", "{}")], t0() - secs(3600)).await.expect("add the old task");
    let new = store.add_tasks(&[NewTask::new("new", "{}").with_key("a")], t0()).await.expect("add")[0];
    let task = store.get_task(new.id).await.expect("get").expect("task");
    assert_eq!(task.scheduled_on, t0() - secs(3600), "its turn is the head's");
    let served = ["h".to_string()];
    let horizon = t0() - secs(600);
    assert_eq!(store.give_up_unserved(&served, horizon, t0(), 10).await.expect("give up"), 0);
    let later = t0() + secs(3600);
    assert_eq!(store.give_up_unserved(&served, later - secs(600), later, 10).await.expect("give up"), 1);
}

/// The keys are listed with their tasks, weights and waits (the longest-waiting first), and each
/// limit with the due tasks it holds back now: beyond its room, or beyond its keys' rooms.
pub async fn what_each_key_holds_and_what_each_limit_holds_back_are_listed(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let caps = Limit { max_running: Some(3), max_running_per_key: Some(1), ..Limit::default() };
    store.set_limit(LimitScope::Queue, "t", LimitEdit::Set(caps), by, t0()).await.expect("caps");
    let two = Limit { weight: Some(2), ..Limit::default() };
    store.set_limit(LimitScope::Key, "b", LimitEdit::Set(two), by, t0()).await.expect("weight");
    let in_t = |t: NewTask| t.with_queue("t");
    let mut tasks: Vec<NewTask> = keyed("a", 5).into_iter().map(in_t).collect();
    tasks.push(in_t(NewTask::new("h", "{}")));
    tasks.push(in_t(NewTask::new("h", "{}").with_key("a").with_scheduled_on(t0() + secs(3600))));
    store.add_tasks(&tasks, t0()).await.expect("add a");
    store.add_tasks(&keyed("b", 2).into_iter().map(in_t).collect::<Vec<_>>(), t0() + secs(1)).await.expect("add b");
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["t".to_string()];
    let r = runner(&store, t0()).await;
    let now = t0() + secs(2);
    let claim = taskhost::store::ClaimRequest { now, ..super::limited(r, &queues, None, 16, &limits) };
    let claimed = store.claim_for(&claim).await.expect("claim");
    assert_eq!(claimed.len(), 3, "one of a's, one of b's, the keyless task");

    let keys = store.keys(None, now, 10).await.expect("keys");
    let seen: Vec<_> = keys.iter().map(|k| (k.key.as_str(), k.due, k.later, k.running, k.weight)).collect();
    assert_eq!(seen, [("a", 4, 1, 1, None), ("b", 1, 0, 1, Some(2))], "a has waited longest");
    assert!(keys[0].waiting_since.is_some_and(|t| t >= t0() && t < t0() + secs(1)), "{keys:?}");
    assert_eq!(keys[1].waiting_since, Some(t0() + secs(1)), "since b's queueing, not its turn at a's head");
    let one = store.keys(Some("t"), now, 1).await.expect("keys");
    assert_eq!(one.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["a"]);
    assert!(store.keys(Some("other"), now, 10).await.expect("keys").is_empty());

    let held = |limits: &[taskhost::store::LimitInfo], scope| {
        limits.iter().find(|l| l.scope == scope).map(|l| (l.running, l.due, l.held_back))
    };
    let listed = store.limits(now, None).await.expect("limits");
    assert_eq!(held(&listed, LimitScope::Queue), Some((3, 5, 5)), "at its cap: all five held back");
    assert_eq!(held(&listed, LimitScope::Key), Some((1, 1, 0)), "a weight holds nothing back");
    // The keyless run ends: room for one, but a's and b's are at their caps per key.
    let plain = keyless(&store, &claimed).await;
    store.finish_runs(&[success(plain, now, "{}")]).await.expect("finish");
    let listed = store.limits(now, None).await.expect("limits");
    assert_eq!(held(&listed, LimitScope::Queue), Some((2, 5, 5)), "each key at its cap");
    // A rate holds back what it cannot start now.
    let rate = Limit { rate: Some(Rate::parse("1/1h").expect("rate")), ..Limit::default() };
    store.set_limit(LimitScope::Handler, "r", LimitEdit::Set(rate), by, now).await.expect("rate");
    store.add_tasks(&(0..3).map(|_| NewTask::new("r", "{}")).collect::<Vec<_>>(), now).await.expect("add r");
    let listed = store.limits(now, None).await.expect("limits");
    assert_eq!(held(&listed, LimitScope::Handler), Some((0, 3, 2)), "one start now, two held back");
}

/// The run among `claimed` of a task without a key.
async fn keyless<'a>(store: &SharedStore, claimed: &'a [ClaimedRun]) -> &'a ClaimedRun {
    for c in claimed {
        if store.get_task(c.task_id).await.expect("get").expect("task").key.is_none() {
            return c;
        }
    }
    panic!("no keyless task was claimed")
}

/// A queue's rate per key paces each key apart, across runners: two keys at 5/1s with a burst
/// of 1 each start two at once, then one every 200 ms, never more than 6 in a second, however
/// deep the other's backlog; a claim held back says when the next key may start; the listing
/// says what it holds back; a rate raised live applies at once; and an idle key's pace mark is
/// kept while it is ahead.
pub async fn a_rate_per_key_paces_each_key_apart_across_runners(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let per_key = |text: &str, burst| Limit {
        rate_per_key: Some(Rate::parse(text).and_then(|r| r.with_burst(burst)).expect("a rate")),
        ..Limit::default()
    };
    store.set_limit(LimitScope::Queue, "api", LimitEdit::Set(per_key("5/1s", 1)), by, t0()).await.expect("set");
    let in_api = |t: NewTask| t.with_queue("api");
    let mut tasks: Vec<NewTask> = keyed("a", 20).into_iter().map(in_api).collect();
    tasks.extend(keyed("b", 20).into_iter().map(in_api));
    tasks.extend((0..2).map(|_| in_api(NewTask::new("h", "{}"))));
    store.add_tasks(&tasks, t0()).await.expect("add");
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["api".to_string()];
    let start = t0() + secs(1);
    let at = |r, ms| taskhost::store::ClaimRequest {
        now: start + chrono::Duration::milliseconds(ms),
        ..super::limited(r, &queues, None, 16, &limits)
    };
    let (r1, r2) = (runner(&store, t0()).await, runner(&store, t0()).await);
    let mut starts: std::collections::HashMap<String, Vec<i64>> = Default::default();
    let first = store.claim_paced(&at(r1, 0)).await.expect("claim");
    for key in keys_of(&store, &first.runs).await {
        starts.entry(key).or_default().push(0);
    }
    assert_eq!(first.next_start_on, Some(start + chrono::Duration::milliseconds(200)), "when a key may start next");
    let held = store.claim_paced(&at(r2, 50)).await.expect("claim");
    assert!(held.runs.is_empty(), "each key out of starts, held back at no cost");
    assert_eq!(held.next_start_on, Some(start + chrono::Duration::milliseconds(200)));
    for (i, ms) in (100..3000).step_by(50).enumerate() {
        let claimed = store.claim_paced(&at(if i % 2 == 0 { r1 } else { r2 }, ms)).await.expect("claim");
        for key in keys_of(&store, &claimed.runs).await {
            starts.entry(key).or_default().push(ms);
        }
    }
    assert_eq!(starts.get("").map(Vec::len), Some(2), "keyless tasks are not paced: {starts:?}");
    for key in ["a", "b"] {
        let mine = &starts[key];
        assert_eq!(mine.len(), 16, "{key}: two at once, then one every 200 ms: {mine:?}");
        for (i, s) in mine.iter().enumerate() {
            let in_window = mine[i..].iter().take_while(|t| **t < s + 1000).count();
            assert!(in_window <= 6, "{key}: {in_window} starts in the second from {s} ms: {mine:?}");
        }
    }
    let now = start + chrono::Duration::milliseconds(2950);
    let listed = store.limits(now, Some(LimitScope::Queue)).await.expect("limits");
    let api: Vec<_> = listed.iter().map(|l| (l.rate_per_key.as_deref(), l.due, l.held_back)).collect();
    assert_eq!(api, [(Some("5/1s"), 8, 8)], "each key's four left held back until its next start");
    // Raised live: the keys' marks come back to one pace of the new rate.
    store.set_limit(LimitScope::Queue, "api", LimitEdit::Set(per_key("100/1s", 1)), by, now).await.expect("raise");
    let limits = store.limits_in_force().await.expect("limits");
    let raised = taskhost::store::ClaimRequest {
        now: now + chrono::Duration::milliseconds(10),
        ..super::limited(r1, &queues, None, 16, &limits)
    };
    assert_eq!(store.claim_paced(&raised).await.expect("claim").runs.len(), 4, "two of each key at once");
    // A key idle since its turn, its mark an hour ahead: its row is kept until the mark is past.
    store.set_limit(LimitScope::Queue, "slow", LimitEdit::Set(per_key("1/1h", 0)), by, t0()).await.expect("set");
    store.add_tasks(&[NewTask::new("h", "{}").with_key("c").with_queue("slow")], t0()).await.expect("add");
    let limits = store.limits_in_force().await.expect("limits");
    let slow = ["slow".to_string()];
    let claim = taskhost::store::ClaimRequest { now: start, ..super::limited(r1, &slow, None, 16, &limits) };
    let ran = store.claim_for(&claim).await.expect("claim");
    store.finish_runs(&[success(&ran[0], start, "{}")]).await.expect("finish");
    let pruned = store.prune_key_turns(start + secs(600), 100).await.expect("prune");
    assert_eq!(pruned, 3, "c's turn and a's and b's marks, past: not c's mark, an hour ahead");
    let later = |at| taskhost::store::ClaimRequest { now: at, ..super::limited(r1, &slow, None, 16, &limits) };
    store.add_tasks(&[NewTask::new("h", "{}").with_key("c").with_queue("slow")], start + secs(700)).await.expect("add");
    assert!(store.claim_for(&later(start + secs(700))).await.expect("claim").is_empty(), "paced still");
    // Then c's mark is past, and deleted: it is needed to pace no more.
    assert_eq!(store.prune_key_turns(start + secs(7200), 100).await.expect("prune"), 1);
    assert_eq!(store.claim_for(&later(start + secs(7200))).await.expect("claim").len(), 1);
}
