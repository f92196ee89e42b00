//! The store suite's case for keys weighed by fuel (a queue's `fuel_per_turn`).

use super::*;
use taskhost::overseer::key_fuel::{self, KeyFuel};
use taskhost::overseer::{Service, Summary};
use taskhost::store::{Asked, ClaimRequest, LimitEdit, LimitSetBy};

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

/// The next `n` runs claims take in the metered queue.
async fn next_runs(store: &SharedStore, r: RunnerId, n: u32, at: DateTime<Utc>) -> Vec<ClaimedRun> {
    let limits = store.limits_in_force().await.expect("limits");
    let queues = ["metered".to_string()];
    let claim = ClaimRequest { now: at, ..super::limited(r, &queues, None, n, &limits) };
    store.claim_for(&claim).await.expect("claim")
}

fn keys_of(runs: &[ClaimedRun]) -> Vec<&str> {
    runs.iter().map(|c| c.key.as_deref().unwrap_or_default()).collect()
}

/// Their runs end, heavy's burning `heavy` and light's 1,000,000.
async fn end(store: &SharedStore, runs: &[ClaimedRun], heavy: i64, at: DateTime<Utc>) {
    let fuel = |c: &ClaimedRun| if c.key.as_deref() == Some("heavy") { heavy } else { 1_000_000 };
    let outcomes: Vec<RunOutcome> = runs.iter().map(|c| charged(c, fuel(c), at)).collect();
    store.finish_runs(&outcomes).await.expect("finish");
}

/// A key's backlog queued before any of its runs ended is given a turn a task; once its runs
/// burn ten times another key's fuel, the overseer lays its due tasks' turns again (a chunk at a
/// time, its first where it was), so it takes a tenth of the turns from then on, not from its
/// next add; once its runs grow cheap, its turns are drawn together, though not within 30 s of
/// the last time. A key within twice what its turns were laid by is only marked.
pub async fn a_keys_backlog_queued_before_its_runs_ended_is_laid_again_by_their_fuel(store: SharedStore) {
    let per_turn = Limit { fuel_per_turn: Some(1_000_000), ..Limit::default() };
    let by = LimitSetBy::Operator;
    store.set_limit(LimitScope::Queue, "metered", LimitEdit::Set(per_turn), by, t0()).await.expect("set");
    let r = runner(&store, t0()).await;
    // Both backlogs at once, before any run: a turn a task each, one for one.
    let mut backlog = metered("heavy", 41);
    backlog.extend(metered("light", 81));
    store.add_tasks(&backlog, t0()).await.expect("add");
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty(), "no run ended: nothing to weigh");
    let first = next_runs(&store, r, 2, t0() + secs(1)).await;
    assert_eq!(keys_of(&first), ["heavy", "light"], "one for one");
    end(&store, &first, 10_000_000, t0() + secs(1)).await;

    // The overseer's passes, 21 tasks each, 7 a transaction: heavy's 40 due tasks laid 10 µs
    // apart from its first (from the last back), going on at the next pass where the last
    // stopped; light, at a turn a task already, only marked.
    let svc = KeyFuel::new(store.clone(), key_fuel::Config { batch: 7, max_batches: 3, ..Default::default() });
    let mut passes = Vec::new();
    for _ in 0..3 {
        let pass = svc.run_once(t0() + secs(2)).await.expect("pass");
        passes.push((pass.keys, pass.tasks_moved, pass.batches));
    }
    assert_eq!(passes, [(0, 21, 3), (2, 18, 4), (0, 0, 0)], "heavy's 39 after its first, then light");
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty(), "both laid as their fuel asks");
    assert_eq!(svc.run_once(t0() + secs(2)).await.expect("pass"), key_fuel::Report::default());
    let taken = next_runs(&store, r, 30, t0() + secs(2)).await;
    let keys = keys_of(&taken);
    assert_eq!(keys.iter().filter(|k| **k == "heavy").count(), 3, "a tenth of the turns: {keys:?}");
    assert_eq!(keys.first(), Some(&"heavy"), "its first due task stays where it was: {keys:?}");

    // Heavy's runs grow cheap: its average (2,500,000) falls under half of what its turns were
    // laid by, and they are drawn together to 2.5 µs apart.
    end(&store, &taken, 0, t0() + secs(3)).await;
    // Not within 30 s of its last re-lay (a guest swinging its cost cannot keep the database
    // rewriting its backlog); then from the first on, its 36 tasks after its first, over two
    // passes.
    assert_eq!(svc.run_once(t0() + secs(3)).await.expect("pass"), key_fuel::Report::default());
    let first = svc.run_once(t0() + secs(40)).await.expect("pass");
    let second = svc.run_once(t0() + secs(40)).await.expect("pass");
    let passes = [(first.keys, first.tasks_moved, first.batches), (second.keys, second.tasks_moved, second.batches)];
    assert_eq!(passes, [(0, 20, 3), (1, 16, 3)], "heavy's tasks drawn together");
    assert_eq!(
        second.summary().as_deref(),
        Some("gave 16 tasks the turns their keys' fuel and weight ask (1 key done)")
    );
    let taken = next_runs(&store, r, 20, t0() + secs(40)).await;
    let keys = keys_of(&taken);
    assert!((5..=8).contains(&keys.iter().filter(|k| **k == "heavy").count()), "{keys:?}");
}

/// Passes of `svc` at `at` until one does nothing (at most 20).
async fn until_laid(svc: &KeyFuel, at: DateTime<Utc>) -> u64 {
    let mut moved = 0;
    for _ in 0..20 {
        let pass = svc.run_once(at).await.expect("pass");
        if pass == key_fuel::Report::default() {
            return moved;
        }
        moved += pass.tasks_moved;
    }
    panic!("still laying after 20 passes");
}

/// A key's weight changed while its backlog waits lays that backlog's due tasks again by it at
/// the overseer's next pass (in any queue, weighed by fuel or not), so the key takes its new
/// share at once, not from its next add; two changes before a pass are laid by the last; a change
/// made while a re-lay is under way is laid after it, and one back to the weight before undoes
/// what it had moved.
pub async fn a_keys_weight_changed_live_lays_its_queued_tasks_again(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let keyed =
        |key: &str| (0..60).map(|i| NewTask::new("h", format!("{{\"i\": {i}}}")).with_key(key)).collect::<Vec<_>>();
    let backlog: Vec<NewTask> = [keyed("heavy"), keyed("light")].concat();
    let added = store.add_tasks(&backlog, t0()).await.expect("add");
    let heavy_last = added[59].id;
    let due = |id| {
        let store = store.clone();
        async move { store.get_task(id).await.expect("get").expect("the task").scheduled_on }
    };
    assert_eq!(due(heavy_last).await, t0() + chrono::Duration::microseconds(59), "a turn a task");
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty());
    let weight = |w| LimitEdit::Set(Limit { weight: Some(w), ..Limit::default() });
    for w in [2, 3] {
        store.set_limit(LimitScope::Key, "heavy", weight(w), by, t0()).await.expect("weight");
    }
    let keys = store.keys_to_relay(100).await.expect("keys");
    let found: Vec<_> = keys.iter().map(|k| (k.queue.as_str(), k.key.as_str(), k.weight, k.asked)).collect();
    let asked = Asked { weight: 1, per_turn: 0, count: 2 };
    assert_eq!(found, [("default", "heavy", 3, Some(asked))], "laid by 1, two changes asked");

    // Heavy's 59 after its first drawn together to a third of a microsecond apart; light's kept.
    let at = t0() + secs(1);
    let svc = KeyFuel::new(store.clone(), key_fuel::Config::default());
    let pass = svc.run_once(at).await.expect("pass");
    assert_eq!((pass.keys, pass.tasks_moved), (1, 59));
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty(), "done");
    assert_eq!(due(heavy_last).await, t0() + chrono::Duration::microseconds(19));
    assert_eq!(due(added[119].id).await, t0() + chrono::Duration::microseconds(59), "light's kept");
    let r = runner(&store, t0()).await;
    let claimed = store.claim(r, &["default".into()], 40, at, DAY).await.expect("claim");
    let heavy = claimed.iter().filter(|c| c.key.as_deref() == Some("heavy")).count();
    // (Three of heavy's a microsecond to light's one, turns 333,333 ps apart rounded down to
    // microseconds; ties by id, heavy's added first.)
    assert_eq!(heavy, 31, "three turns to light's one");

    // Cleared while heavy's 29 left wait; a pass of 7 stretches its last 7 back (laid again
    // within `again_after` of its last re-lay: the operator asked), then the weight is set to 3
    // again: what was moved is drawn together again, passes on.
    let svc = KeyFuel::new(store.clone(), key_fuel::Config { batch: 7, max_batches: 1, ..Default::default() });
    store.set_limit(LimitScope::Key, "heavy", LimitEdit::Set(Limit::default()), by, at).await.expect("clear");
    assert_eq!(svc.run_once(at).await.expect("pass").tasks_moved, 7);
    assert_eq!(due(heavy_last).await, t0() + chrono::Duration::microseconds(38), "its last a microsecond a task on");
    store.set_limit(LimitScope::Key, "heavy", weight(3), by, at).await.expect("weight");
    assert!(until_laid(&svc, at).await >= 7);
    assert_eq!(due(heavy_last).await, t0() + chrono::Duration::microseconds(19), "as the weight of 3 had it");

    // Cleared again, to the end: a turn a task from heavy's first left, one for one with light.
    store.set_limit(LimitScope::Key, "heavy", LimitEdit::Set(Limit::default()), by, at).await.expect("clear");
    assert_eq!(until_laid(&svc, at).await, 28);
    assert_eq!(due(heavy_last).await, t0() + chrono::Duration::microseconds(38));
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty(), "nothing left asked");
    let claimed = store.claim(r, &["default".into()], 30, at, DAY).await.expect("claim");
    let heavy = claimed.iter().filter(|c| c.key.as_deref() == Some("heavy")).count();
    assert_eq!(heavy, 15, "one for one");
}

/// A queue's fuel per turn changed live lays its keys' queued tasks again by it at the
/// overseer's next pass, not only those added from then on: at ten times the fuel a turn, a key
/// whose runs burn ten turns' worth is laid a turn a task and one whose runs burn one a tenth of
/// a turn apart; cleared, a turn a task each (the first's left as they were, laid so already).
pub async fn a_queues_fuel_per_turn_changed_live_lays_its_keys_queued_tasks_again(store: SharedStore) {
    let by = LimitSetBy::Operator;
    let per_turn = |n| LimitEdit::Set(Limit { fuel_per_turn: n, ..Limit::default() });
    store.set_limit(LimitScope::Queue, "metered", per_turn(Some(1_000_000)), by, t0()).await.expect("set");
    let r = runner(&store, t0()).await;
    store.add_tasks(&[metered("heavy", 1), metered("light", 1)].concat(), t0()).await.expect("add");
    end(&store, &next_runs(&store, r, 2, t0() + secs(1)).await, 10_000_000, t0() + secs(1)).await;
    // Laid by the fuel their runs burn: heavy's 10 µs apart, light's 1 µs.
    let at = t0() + secs(2);
    let added = store.add_tasks(&[metered("heavy", 30), metered("light", 30)].concat(), at).await.expect("add");
    let spans = || {
        let store = store.clone();
        let ends = [(added[0].id, added[29].id), (added[30].id, added[59].id)];
        async move {
            let mut spans = Vec::new();
            for (first, last) in ends {
                let due = |id| {
                    let store = store.clone();
                    async move { store.get_task(id).await.expect("get").expect("the task").scheduled_on }
                };
                spans.push((due(last).await - due(first).await).num_microseconds().unwrap_or_default());
            }
            spans
        }
    };
    assert_eq!(spans().await, [290, 29], "heavy's and light's first to last, in µs");
    let svc = KeyFuel::new(store.clone(), key_fuel::Config::default());
    assert_eq!(until_laid(&svc, at).await, 0, "each laid by its fuel already: only marked");
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty());

    store.set_limit(LimitScope::Queue, "metered", per_turn(Some(10_000_000)), by, at).await.expect("set");
    let keys = store.keys_to_relay(100).await.expect("keys");
    let found: Vec<_> = keys.iter().map(|k| (k.key.as_str(), k.per_turn, k.asked)).collect();
    let asked = Some(Asked { weight: 1, per_turn: 1_000_000, count: 1 });
    assert_eq!(found, [("heavy", 10_000_000, asked), ("light", 10_000_000, asked)], "laid by the per turn before");
    let at = at + secs(1);
    assert_eq!(until_laid(&svc, at).await, 58, "each one's 29 after its first");
    // Light's turns 0.1 µs apart, rounded down to microseconds.
    assert_eq!(spans().await, [29, 2]);
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty(), "nothing left asked");

    store.set_limit(LimitScope::Queue, "metered", per_turn(None), by, at).await.expect("clear");
    assert_eq!(until_laid(&svc, at).await, 29, "light's stretched, heavy's read and left as they were");
    assert_eq!(spans().await, [29, 29]);
    assert!(store.keys_to_relay(100).await.expect("keys").is_empty(), "nothing left asked");
}
