//! The store suite's cases for flow-control limits: runs in flight and starts per period, kept
//! in the database, across runners.

use super::*;
use taskhost::store::{LimitEdit, LimitSetBy};

/// A limit of `n` runs in flight.
pub fn running(n: u32) -> Limit {
    Limit { max_running: Some(n), ..Limit::default() }
}

/// A limit of starts per period.
pub fn rate(text: &str, burst: u32) -> Limit {
    Limit { rate: Some(Rate::parse(text).and_then(|r| r.with_burst(burst)).expect("a rate")), ..Limit::default() }
}

pub fn limited<'a>(
    r: RunnerId,
    queues: &'a [String],
    handlers: Option<&'a [String]>,
    limit: u32,
    limits: &'a RunLimits,
) -> taskhost::store::ClaimRequest<'a> {
    taskhost::store::ClaimRequest {
        runner: r,
        queues,
        handlers,
        limit,
        now: t0(),
        default_timeout: DAY,
        limits: Some(limits),
        paced_by_server: false,
    }
}

/// A claim takes, in claim order, only what fits the room each limited queue and handler has
/// left across all runners; unlimited tasks are claimed as ever; an ended run makes room.
pub async fn claims_keep_runs_in_flight_within_the_queue_and_handler_limits(store: SharedStore) {
    let mut tasks = Vec::new();
    for _ in 0..4 {
        tasks.push(NewTask::new("h", "{}").with_queue("api"));
        tasks.push(NewTask::new("slow", "{}"));
        tasks.push(NewTask::new("h", "{}"));
    }
    let ids: Vec<_> = store.add_tasks(&tasks, t0()).await.expect("add").iter().map(|a| a.id).collect();
    let limits = RunLimits {
        queues: [("api".to_string(), running(2))].into_iter().collect(),
        handlers: [("slow".to_string(), running(3))].into_iter().collect(),
        ..RunLimits::default()
    };
    store.set_file_limits(&limits, t0()).await.expect("set the limits");
    let queues = ["api".to_string(), "default".to_string()];
    let (a, b) = (runner(&store, t0()).await, runner(&store, t0()).await);
    // Two claims of two: the first takes one of each in claim order (api, slow), and the second the same.
    let first = store.claim_for(&limited(a, &queues, None, 2, &limits)).await.expect("claim");
    assert_eq!(first.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![ids[0], ids[1]]);
    let second = store.claim_for(&limited(b, &queues, None, 20, &limits)).await.expect("claim");
    let took: Vec<_> = second.iter().map(|c| c.task_id).collect();
    // The api queue has room for one more, slow for two more; every unlimited task is taken.
    assert_eq!(took, vec![ids[2], ids[3], ids[4], ids[5], ids[7], ids[8], ids[11]], "{took:?}");
    let handlers = ["h".to_string(), "slow".to_string()];
    assert!(store.claim_for(&limited(a, &queues, Some(&handlers), 20, &limits)).await.expect("claim").is_empty());
    // Without the limits the rest would be claimable: they are held back, not gone.
    let counts = store.counts().await.expect("counts");
    assert_eq!((counts.running, counts.scheduled), (9, 3), "{counts:?}");
    // An ended run of each makes room for one more of each, whichever runner ended it.
    let ended = [first[0].clone(), first[1].clone()];
    store.finish_runs(&ended.iter().map(|c| success(c, t0(), "{}")).collect::<Vec<_>>()).await.expect("finish");
    let third = store.claim_for(&limited(b, &queues, Some(&handlers), 20, &limits)).await.expect("claim");
    assert_eq!(third.iter().map(|c| c.task_id).collect::<Vec<_>>(), vec![ids[6], ids[10]]);
    // A runner that serves only the unlimited handler claims freely; its queue's limit still holds.
    let only_h = ["h".to_string()];
    assert!(store.claim_for(&limited(a, &queues, Some(&only_h), 20, &limits)).await.expect("claim").is_empty());
    let counts = store.counts().await.expect("counts");
    assert_eq!((counts.running, counts.scheduled), (9, 1), "{counts:?}");
    // A runner no longer running claims nothing, limited or not, though room was made for it.
    store.finish_runs(&[success(&third[0], t0(), "{}")]).await.expect("finish");
    store.time_out_runners(&[a], t0()).await.expect("time out");
    assert!(store.claim_for(&limited(a, &queues, None, 20, &limits)).await.expect("claim").is_empty());
    assert_eq!(store.counts().await.expect("counts").scheduled, 1);
    assert_eq!(store.claim_for(&limited(b, &queues, None, 20, &limits)).await.expect("claim").len(), 1);
}

/// Claims racing on two connections never put more runs of a limited queue in flight than its
/// limit, round after round.
pub async fn concurrent_limited_claims_never_exceed_the_limit(a: SharedStore, b: SharedStore) {
    let tasks: Vec<_> = (0..60).map(|_| NewTask::new("h", "{}").with_queue("api")).collect();
    a.add_tasks(&tasks, t0()).await.expect("add");
    let limits = RunLimits { queues: [("api".to_string(), running(3))].into_iter().collect(), ..RunLimits::default() };
    a.set_file_limits(&limits, t0()).await.expect("set the limits");
    let (ra, rb) = (runner(&a, t0()).await, runner(&b, t0()).await);
    for round in 0..8 {
        let claim_some = |s: SharedStore, r: RunnerId, limits: RunLimits| async move {
            let queues = ["api".to_string()];
            let mut mine = Vec::new();
            for _ in 0..4 {
                mine.extend(s.claim_for(&limited(r, &queues, None, 2, &limits)).await.expect("claim"));
            }
            mine
        };
        let (x, y) = tokio::join!(
            tokio::spawn(claim_some(a.clone(), ra, limits.clone())),
            tokio::spawn(claim_some(b.clone(), rb, limits.clone()))
        );
        let all: Vec<ClaimedRun> = x.expect("join").into_iter().chain(y.expect("join")).collect();
        assert_eq!(all.len(), 3, "round {round}: exactly the limit is in flight");
        a.finish_runs(&all.iter().map(|c| success(c, t0(), "{}")).collect::<Vec<_>>()).await.expect("finish");
    }
}

/// A claim at `ms` milliseconds after t0, of up to 16 runs, within `limits`.
fn at<'a>(r: RunnerId, queues: &'a [String], limits: &'a RunLimits, ms: i64) -> taskhost::store::ClaimRequest<'a> {
    taskhost::store::ClaimRequest {
        now: t0() + chrono::Duration::milliseconds(ms),
        ..limited(r, queues, None, 16, limits)
    }
}

/// Two runners claiming every 50 ms for three seconds from a queue limited to 5/1s with a burst
/// of 1: two start at once, then one every 200 ms, never more than 6 in a second; a claim held
/// back says when the next start is allowed; the unlimited queue beside it is claimed whole.
pub async fn rate_limits_pace_starts_across_runners_and_say_when_the_next_is_allowed(store: SharedStore) {
    store
        .set_limit(LimitScope::Queue, "api", LimitEdit::Set(rate("5/1s", 1)), LimitSetBy::Operator, t0())
        .await
        .expect("set");
    let api: Vec<_> = (0..40).map(|_| NewTask::new("h", "{}").with_queue("api")).collect();
    store.add_tasks(&api, t0()).await.expect("add");
    store.add_tasks(&vec![NewTask::new("h", "{}"); 3], t0()).await.expect("add");
    let limits = store.limits_in_force().await.expect("limits");
    assert_eq!(limits.queues.get("api"), Some(&rate("5/1s", 1)));
    let queues = ["api".to_string(), "default".to_string()];
    let (a, b) = (runner(&store, t0()).await, runner(&store, t0()).await);
    let first = store.claim_paced(&at(a, &queues, &limits, 0)).await.expect("claim");
    let of = |runs: &[ClaimedRun], q: &str| runs.iter().filter(|c| c.queue == q).count();
    assert_eq!((of(&first.runs, "api"), of(&first.runs, "default")), (2, 3), "the pace's start and the burst");
    assert_eq!(first.next_start_on, Some(t0() + chrono::Duration::milliseconds(200)));
    let held = store.claim_paced(&at(b, &queues, &limits, 50)).await.expect("claim");
    assert!(held.runs.is_empty(), "held back: no token, and the run costs nothing");
    assert_eq!(held.next_start_on, Some(t0() + chrono::Duration::milliseconds(200)), "when the next is allowed");
    let mut starts = vec![0, 0];
    for (i, ms) in (100..3000).step_by(50).enumerate() {
        let claimed =
            store.claim_paced(&at(if i % 2 == 0 { a } else { b }, &queues, &limits, ms)).await.expect("claim");
        starts.extend(std::iter::repeat_n(ms, claimed.runs.len()));
    }
    assert_eq!(starts.len(), 16, "one every 200 ms after the first two: {starts:?}");
    for (i, s) in starts.iter().enumerate() {
        let in_window = starts[i..].iter().take_while(|t| **t < s + 1000).count();
        assert!(in_window <= 6, "{in_window} starts in the second from {s} ms: {starts:?}");
    }
    let counts = store.counts().await.expect("counts");
    assert_eq!((counts.running, counts.scheduled), (19, 24), "held back, not failed: {counts:?}");
    // A worker's claims count by the server's own time (SQLite: the claim's): one start of
    // 1/1h, then none until an hour after it.
    let edit = LimitEdit::Set(rate("1/1h", 0));
    store.set_limit(LimitScope::Queue, "slow", edit, LimitSetBy::Operator, t0()).await.expect("set");
    store.add_tasks(&vec![NewTask::new("h", "{}").with_queue("slow"); 2], t0()).await.expect("add");
    let limits = store.limits_in_force().await.expect("limits");
    let slow = ["slow".to_string()];
    let by_server = |r| taskhost::store::ClaimRequest { paced_by_server: true, ..at(r, &slow, &limits, 0) };
    assert_eq!(store.claim_paced(&by_server(a)).await.expect("claim").runs.len(), 1);
    let held = store.claim_paced(&by_server(b)).await.expect("claim");
    assert!(held.runs.is_empty());
    let next = held.next_start_on.expect("when the next start is allowed");
    assert!(next >= t0() + chrono::Duration::hours(1), "{next}");
}

/// Claims racing on two connections at the same moment share one rate's starts: 4/1s with a
/// burst of 3 starts four between them, and a quarter second later one more; under a rate per
/// key, as many for each key.
pub async fn concurrent_rate_limited_claims_never_exceed_the_rate(a: SharedStore, b: SharedStore) {
    a.set_limit(LimitScope::Queue, "api", LimitEdit::Set(rate("4/1s", 3)), LimitSetBy::Operator, t0())
        .await
        .expect("set");
    let tasks: Vec<_> = (0..60).map(|_| NewTask::new("h", "{}").with_queue("api")).collect();
    a.add_tasks(&tasks, t0()).await.expect("add");
    let limits = a.limits_in_force().await.expect("limits");
    let (ra, rb) = (runner(&a, t0()).await, runner(&b, t0()).await);
    for (ms, want) in [(0, 4), (250, 1), (300, 0), (1500, 4)] {
        assert_eq!(race(&a, &b, (ra, rb), "api", &limits, ms).await, want, "at {ms} ms");
    }
    // The same for each key under a queue's rate per key: two keys, four starts each at once.
    let per_key = Limit { rate_per_key: rate("4/1s", 3).rate, ..Limit::default() };
    a.set_limit(LimitScope::Queue, "keyed", LimitEdit::Set(per_key), LimitSetBy::Operator, t0()).await.expect("set");
    let keyed: Vec<NewTask> = ["x", "y"]
        .iter()
        .flat_map(|k| (0..30).map(move |_| NewTask::new("h", "{}").with_queue("keyed").with_key(*k)))
        .collect();
    a.add_tasks(&keyed, t0()).await.expect("add");
    let limits = a.limits_in_force().await.expect("limits");
    for (ms, want) in [(1000, 8), (1250, 2), (1300, 0), (2500, 8)] {
        assert_eq!(race(&a, &b, (ra, rb), "keyed", &limits, ms).await, want, "keyed, at {ms} ms");
    }
}

/// Runs claimed from `queue` at `ms` by three claims on each of two connections at once.
async fn race(
    a: &SharedStore,
    b: &SharedStore,
    r: (RunnerId, RunnerId),
    queue: &str,
    limits: &RunLimits,
    ms: i64,
) -> usize {
    let claim_some = |s: SharedStore, r: RunnerId, limits: RunLimits, queue: String| async move {
        let queues = [queue];
        let mut mine = 0;
        for _ in 0..3 {
            mine += s.claim_for(&at(r, &queues, &limits, ms)).await.expect("claim").len();
        }
        mine
    };
    let (x, y) = tokio::join!(
        tokio::spawn(claim_some(a.clone(), r.0, limits.clone(), queue.to_string())),
        tokio::spawn(claim_some(b.clone(), r.1, limits.clone(), queue.to_string()))
    );
    x.expect("join") + y.expect("join")
}

/// Limits are kept in the database: a worker's file sets them, an operator's change is kept
/// from the file and applies from the next claim (a rate raised live at once, its old pace mark
/// notwithstanding), a limit taken out limits nothing, and the listing says who set each, its
/// runs in flight and its due tasks.
pub async fn limits_are_set_live_and_a_file_does_not_overwrite_an_operators(store: SharedStore) {
    let file = RunLimits { queues: [("api".to_string(), running(1))].into_iter().collect(), ..RunLimits::default() };
    assert!(store.set_file_limits(&file, t0()).await.expect("file").is_empty());
    let tasks: Vec<_> = (0..8).map(|_| NewTask::new("h", "{}").with_queue("api")).collect();
    store.add_tasks(&tasks, t0()).await.expect("add");
    let view = store.limits_in_force().await.expect("limits");
    let (r, queues) = (runner(&store, t0()).await, ["api".to_string()]);
    let claim = |ms: i64| {
        let (store, queues, view) = (&store, &queues, &view);
        async move { store.claim_for(&at(r, queues, view, ms)).await.expect("claim") }
    };
    let mut held = claim(0).await;
    assert_eq!(held.len(), 1);
    let listed = store.limits(t0(), None).await.expect("list");
    assert_eq!(listed.len(), 1);
    let api = &listed[0];
    let seen = (api.scope, api.target.as_str(), api.max_running, api.set_by);
    assert_eq!(seen, (LimitScope::Queue, "api", Some(1), Some(LimitSetBy::File)));
    assert_eq!((api.running, api.due, api.rate.as_deref()), (1, 7, None));
    // Raised live: the next claim reads it, with the view it had.
    let change =
        LimitChange { max_running: Some(Some(3)), rate_limit: Some(Some("100/1s".into())), ..LimitChange::default() };
    let edit = |change| LimitEdit::Change(change);
    let by = LimitSetBy::Operator;
    let written = store.set_limit(LimitScope::Queue, "api", edit(&change), by, t0()).await.expect("set");
    assert_eq!((written.before, written.now.max_running, written.kept), (running(1), Some(3), false));
    held.extend(claim(0).await);
    assert_eq!(held.len(), 2, "one start of the rate at once");
    held.extend(claim(10).await);
    assert_eq!(held.len(), 3, "10 ms later, the next");
    assert!(claim(20).await.is_empty(), "3 in flight");
    // A worker's file no longer sets it: the operator's stays.
    assert_eq!(store.set_file_limits(&file, t0()).await.expect("file"), vec!["queue:api".to_string()]);
    let listed = store.limits(t0(), None).await.expect("list");
    let seen = (listed[0].max_running, listed[0].rate.as_deref(), listed[0].set_by);
    assert_eq!(seen, (Some(3), Some("100/1s"), Some(LimitSetBy::Operator)));
    // Lowered to 1/1h, then raised: the slow rate's pace mark, an hour ahead, is brought back.
    store.finish_runs(&held.iter().map(|c| success(c, t0(), "{}")).collect::<Vec<_>>()).await.expect("finish");
    let slow = LimitChange { rate_limit: Some(Some("1/1h".into())), ..LimitChange::default() };
    store.set_limit(LimitScope::Queue, "api", edit(&slow), by, t0()).await.expect("set");
    assert_eq!(claim(30).await.len(), 1, "one start of 1/1h");
    assert!(claim(40).await.is_empty(), "the next in an hour");
    let fast = LimitChange { rate_limit: Some(Some("100/1s".into())), ..LimitChange::default() };
    store.set_limit(LimitScope::Queue, "api", edit(&fast), by, t0()).await.expect("set");
    assert_eq!(claim(50).await.len(), 1, "raised: one pace on at most");
    // Taken out: nothing holds the queue back, and a file sets it again.
    let clear = LimitEdit::Set(Limit::default());
    assert!(store.set_limit(LimitScope::Queue, "api", clear.clone(), by, t0()).await.expect("clear").before.is_some());
    assert!(!store.set_limit(LimitScope::Queue, "api", clear, by, t0()).await.expect("clear").before.is_some());
    assert!(store.limits(t0(), None).await.expect("list").is_empty());
    assert!(store.limits_in_force().await.expect("limits").is_empty());
    assert_eq!(claim(60).await.len(), 3, "the rest, unlimited");
    assert!(store.set_file_limits(&file, t0()).await.expect("file").is_empty());
    assert_eq!(store.limits_in_force().await.expect("limits"), file);
}

/// A claim that picks tasks but claims none (its runner timed out meanwhile, as after a
/// partition) uses no start of a rate: neither the queue's nor a key's pace moves, and a live
/// runner takes the starts.
pub async fn a_claim_that_takes_nothing_uses_no_start_of_a_rate(store: SharedStore) {
    let rate = |text: &str| Some(Rate::parse(text).and_then(|r| r.with_burst(0)).expect("a rate"));
    let by = LimitSetBy::Operator;
    for (queue, limit) in [
        ("paced", Limit { rate: rate("1/1h"), ..Limit::default() }),
        ("keyed", Limit { rate_per_key: rate("1/1h"), ..Limit::default() }),
    ] {
        store.set_limit(LimitScope::Queue, queue, LimitEdit::Set(limit), by, t0()).await.expect("set");
        store.add_tasks(&[NewTask::new("h", "{}").with_key("a").with_queue(queue)], t0()).await.expect("add");
    }
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["paced".to_string(), "keyed".to_string()];
    let (gone, live) = (runner(&store, t0()).await, runner(&store, t0()).await);
    store.time_out_runners(&[gone], t0() + secs(60)).await.expect("time out");
    let claim = |r| taskhost::store::ClaimRequest { now: t0() + secs(61), ..limited(r, &queues, None, 16, &limits) };
    assert!(store.claim_paced(&claim(gone)).await.expect("claim").runs.is_empty(), "a timed-out runner claims none");
    let taken = store.claim_paced(&claim(live)).await.expect("claim");
    assert_eq!(taken.runs.len(), 2, "each queue's one start is still there");
}
