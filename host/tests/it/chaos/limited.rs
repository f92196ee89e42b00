//! The chaos test's limited, keyed workload: `witness` tasks in a queue whose limits every
//! worker's file sets ([`CONFIG`]: at most 3 runs in flight, 1 of each key, 3 starts a second
//! with a burst of 1, and 1 start a second of each key), one added every second under one of
//! three keys while the faults go on. Once the queue drains, [`check`] holds the limits to what
//! they promised, after kills, partitions and a server restart:
//!
//! - never more guests alive at once than the caps allow, in all and of each key, by the guests'
//!   own times (a slot is freed only once its run's outcome is in, or its runner is timed out
//!   after the fence stopped its guests: a fence that failed would show here);
//! - never more starts in a second than the rates allow, in all and of each key, by the runs'
//!   starts in the database (the server's time the rates counted by; a start put back leaves no
//!   run, and it took a token: the starts seen are fewer, never more);
//! - nothing leaked: the queue drained, and its limit counts no run in flight and no due task.

use std::collections::HashMap;

use super::witness::Seen;
use crate::common::Env;
use taskhost::model::{LimitScope, NewTask, Task};

/// The queue's limits, in each worker's file.
pub const CONFIG: &str = "[queues.limited]\nmax_running = 3\nmax_running_per_key = 1\nrate_limit = \"3/1s\"\n\
                          rate_burst = 1\nrate_limit_per_key = \"1/1s\"\n";
const MAX_RUNNING: usize = 3;
const MAX_RUNNING_PER_KEY: usize = 1;
/// Starts in any one second at most: the rate and its burst.
const STARTS: usize = 3 + 1;
const STARTS_PER_KEY: usize = 1;

/// Adds one task under one of three keys; returns its id.
pub async fn add(env: &Env) -> i64 {
    let key = format!("k{}", rand::random::<u8>() % 3);
    let task = NewTask::new("witness", super::witness::data().to_string())
        .with_queue("limited")
        .with_key(key)
        .with_max_attempts(20);
    env.app.client.add(task).await.expect("add a limited task").id
}

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Figures {
    pub tasks: usize,
    pub starts: usize,
    pub most_alive: usize,
    pub most_starts: usize,
}

/// The limited tasks (`ids`, among `tasks`, all final) held to their limits, by what the guests
/// saw (`seen`) and the runs the database kept.
pub async fn check(env: &Env, ids: &[i64], tasks: &[Task], seen: &HashMap<i64, Vec<Seen>>) -> Figures {
    let key_of: HashMap<i64, String> =
        tasks.iter().filter(|t| ids.contains(&t.id)).map(|t| (t.id, t.key.clone().unwrap_or_default())).collect();
    assert_eq!(key_of.len(), ids.len(), "every limited task is listed");
    let mut lives: Vec<(&str, i128, i128)> = Vec::new();
    for (task, runs) in seen {
        if let Some(key) = key_of.get(task) {
            lives.extend(runs.iter().map(|s| (key.as_str(), s.start, s.last)));
        }
    }
    let most = alive_at_once(&lives, None);
    assert!(most <= MAX_RUNNING, "{most} guests of the limited queue alive at once: {lives:?}");
    let mut starts: Vec<(String, chrono::DateTime<chrono::Utc>)> = Vec::new();
    for id in ids {
        let runs = env.app.store.runs_of(*id).await.expect("runs");
        starts.extend(runs.iter().filter_map(|r| r.started_on).map(|s| (key_of[id].clone(), s)));
    }
    starts.sort_by_key(|s| s.1);
    let most_starts = most_in_a_second(starts.iter().map(|s| s.1));
    assert!(most_starts <= STARTS, "{most_starts} starts in a second: {starts:?}");
    for key in ["k0", "k1", "k2"] {
        let alive = alive_at_once(&lives, Some(key));
        assert!(alive <= MAX_RUNNING_PER_KEY, "{alive} guests of key {key} alive at once");
        let mine = most_in_a_second(starts.iter().filter(|s| s.0 == key).map(|s| s.1));
        assert!(mine <= STARTS_PER_KEY, "{mine} starts of key {key} in a second: {starts:?}");
    }
    let limits = env.app.client.limits().await.expect("limits");
    let queue = limits.iter().find(|l| l.scope == LimitScope::Queue && l.target == "limited");
    let queue = queue.unwrap_or_else(|| panic!("the workers' files set queue:limited: {limits:?}"));
    assert_eq!((queue.running, queue.due, queue.held_back), (0, 0, 0), "nothing leaked: {queue:?}");
    Figures { tasks: ids.len(), starts: starts.len(), most_alive: most, most_starts }
}

/// The most guests alive at once (of `key`, or of all), each from its start to its last sign.
fn alive_at_once(lives: &[(&str, i128, i128)], key: Option<&str>) -> usize {
    let mut events: Vec<(i128, i32)> = Vec::new();
    for (_, start, last) in lives.iter().filter(|l| key.is_none_or(|key| l.0 == key)) {
        events.extend([(*start, 1), (*last, -1)]);
    }
    // An end and a start at one moment: the end first.
    events.sort();
    let (mut alive, mut most) = (0i32, 0i32);
    for (_, step) in events {
        alive += step;
        most = most.max(alive);
    }
    most.max(0) as usize
}

/// The most starts (in order) within any one second, from a start on.
fn most_in_a_second(starts: impl Iterator<Item = chrono::DateTime<chrono::Utc>>) -> usize {
    let starts: Vec<_> = starts.collect();
    let second = chrono::Duration::seconds(1);
    (0..starts.len()).map(|i| starts[i..].iter().take_while(|s| **s < starts[i] + second).count()).max().unwrap_or(0)
}
