//! The store suite's case for keys weighed by fuel (a queue's `fuel_per_turn`).

use super::*;
use taskhost::store::{ClaimRequest, LimitEdit, LimitSetBy};

fn metered(key: &str, n: usize) -> Vec<NewTask> {
    (0..n).map(|i| NewTask::new("h", format!("{{\"i\": {i}}}")).with_key(key).with_queue("metered")).collect()
}

/// The outcome of `c` as a worker writes it in a queue that weighs keys by fuel (it marks the
/// keyed runs there, `runner::limits`): charged to its key.
fn charged(c: &ClaimedRun, fuel: i64, at: DateTime<Utc>) -> RunOutcome {
    let fuel_key = c.key.clone().map(|key| FuelKey { queue: c.queue.clone(), key });
    RunOutcome { fuel_used: Some(fuel), fuel_key, ..success(c, at, "{}") }
}

/// In a queue that weighs keys by fuel, a key whose runs burnt ten times the fuel another's did
/// is given a tenth of the turns at its next add, and a key with no run ended yet a turn a task;
/// each key's fuel a run is listed; a run is charged once, however often its outcome is
/// written; a key's average goes with its turn when the overseer prunes it.
pub async fn a_key_whose_runs_burn_ten_times_the_fuel_gets_a_tenth_of_the_turns(store: SharedStore) {
    let per_turn = Limit { fuel_per_turn: Some(1_000_000), ..Limit::default() };
    let by = LimitSetBy::Operator;
    store.set_limit(LimitScope::Queue, "metered", LimitEdit::Set(per_turn), by, t0()).await.expect("set");
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["metered".to_string()];
    let r = runner(&store, t0()).await;
    // Claimed as any queue (a fuel per turn limits no claim), the limits passed or not.
    let claim = |n, at| ClaimRequest { now: at, ..super::limited(r, &queues, None, n, &limits) };
    // A run each, over three runs for the light key: heavy burns 10,000,000, light 1,000,000.
    let mut first = metered("heavy", 1);
    first.extend(metered("light", 3));
    store.add_tasks(&first, t0()).await.expect("add");
    let ran = store.claim_for(&claim(8, t0() + secs(1))).await.expect("claim");
    assert_eq!(ran.len(), 4);
    let mut outcomes = Vec::new();
    for c in &ran {
        let fuel = match c.key.as_deref() {
            Some("heavy") => 10_000_000,
            Some("light") => 1_000_000,
            other => panic!("a claimed run carries its task's key, not {other:?}"),
        };
        outcomes.push(charged(c, fuel, t0() + secs(1)));
    }
    store.finish_runs(&outcomes).await.expect("finish");
    // Written again (a write retried) or late: not charged again.
    let again: Vec<RunOutcome> = outcomes.iter().map(|o| RunOutcome { fuel_used: Some(1), ..o.clone() }).collect();
    store.finish_runs(&again).await.expect("again");

    // Backlogs of 40 each at once, beside a key with no run ended yet.
    let mut backlog = metered("heavy", 40);
    backlog.extend(metered("light", 40));
    backlog.extend(metered("fresh", 40));
    store.add_tasks(&backlog, t0() + secs(2)).await.expect("add");
    let listed = store.keys(Some("metered"), t0() + secs(3), 10).await.expect("keys");
    let fuel_of = |k: &str| listed.iter().find(|i| i.key == k).and_then(|i| i.fuel_per_run);
    assert_eq!((fuel_of("heavy"), fuel_of("light"), fuel_of("fresh")), (Some(10_000_000), Some(1_000_000), None));
    let taken = store.claim_for(&claim(60, t0() + secs(3))).await.expect("claim");
    let keys: Vec<String> = taken.iter().map(|c| c.key.clone().unwrap_or_default()).collect();
    let count = |k: &str| keys.iter().filter(|x| *x == k).count();
    // Turns 1 µs apart for light and fresh, 10 µs for heavy, from one head: 60 claims reach
    // about 29 µs past it.
    assert!((2..=4).contains(&count("heavy")), "heavy took {} of 60 turns: {keys:?}", count("heavy"));
    assert!(count("light").abs_diff(count("fresh")) <= 1, "light and fresh alike: {keys:?}");

    // Nothing left of the keys: the overseer prunes their turns, and their averages with them.
    let left = store.claim_for(&claim(100, t0() + secs(4))).await.expect("claim");
    let ended: Vec<RunOutcome> = taken.iter().chain(&left).map(|c| charged(c, 1_000_000, t0() + secs(4))).collect();
    store.finish_runs(&ended).await.expect("finish");
    let pruned = store.prune_key_turns(t0() + DAY, 1_000).await.expect("prune");
    assert!(pruned >= 6, "3 turns and 3 averages at least: {pruned}");
    store.add_tasks(&metered("heavy", 1), t0() + DAY).await.expect("add");
    let listed = store.keys(Some("metered"), t0() + DAY, 10).await.expect("keys");
    assert_eq!(listed.iter().map(|k| (k.key.as_str(), k.fuel_per_run)).collect::<Vec<_>>(), [("heavy", None)]);
}
