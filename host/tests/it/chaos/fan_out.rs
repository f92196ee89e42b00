//! The chaos test's fan-out workload: `fan-out` tasks, each queueing a few `witness` children and a
//! `join` after them, added beside the witness tasks while the faults go on. A run's children are
//! written in the transaction that ends it, so a run that is killed, fenced, put back or failed
//! (one parent in three fails its first attempt on purpose) leaves none, and a retried parent
//! never queues them twice. Once the queue drains, [`check`] holds each parent to that by the
//! database's accounting: one successful run, exactly its children and one join, the join run
//! once (one successful run) and only after every child succeeded (by what its run read).

use std::collections::{BTreeSet, HashMap};

use crate::common::Env;
use taskhost::model::{NewTask, RunStatus, Task, TaskState};

/// Children each parent queues, the join aside.
pub const CHILDREN: usize = 4;

/// Adds one parent; returns its id.
pub async fn add(env: &Env) -> i64 {
    let items: Vec<serde_json::Value> = (0..CHILDREN).map(|_| super::witness::data()).collect();
    let data = serde_json::json!({
        "items": items,
        "handler": "witness",
        "join": "join",
        "max_attempts": 20,
        "fail_first": rand::random::<u8>().is_multiple_of(3),
    });
    let task = NewTask::new("fan-out", data.to_string()).with_max_attempts(20);
    env.app.client.add(task).await.expect("add a fan-out").id
}

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Figures {
    pub parents: usize,
    pub parent_runs: usize,
    pub joins: usize,
    pub join_runs: usize,
}

/// Each parent, its children and its join, once `tasks` (every task of the test) are all final.
pub async fn check(env: &Env, parents: &[i64], tasks: &[Task]) -> Figures {
    let by_id: HashMap<i64, &Task> = tasks.iter().map(|t| (t.id, t)).collect();
    let mut children: HashMap<i64, Vec<&Task>> = HashMap::new();
    for t in tasks {
        if let Some(parent) = t.parent_id {
            assert!(parents.contains(&parent), "task {} has a parent {parent} no fan-out is", t.id);
            children.entry(parent).or_default().push(t);
        }
    }
    let mut figures = Figures { parents: parents.len(), ..Figures::default() };
    for parent in parents {
        let task = by_id[parent];
        let runs = env.app.store.runs_of(*parent).await.expect("runs");
        figures.parent_runs += runs.len();
        let successes = runs.iter().filter(|r| r.status == RunStatus::Success).count();
        let mine = children.remove(parent).unwrap_or_default();
        if task.state != TaskState::Succeeded {
            // Given up on: none of its runs ended well, so it queued nothing.
            assert!(task.state == TaskState::Dead && successes == 0, "fan-out {parent}: {task:?} {runs:?}");
            assert!(mine.is_empty(), "fan-out {parent} never succeeded but queued {mine:?}");
            continue;
        }
        assert_eq!(successes, 1, "fan-out {parent} succeeded once: {runs:?}");
        let parts: BTreeSet<i64> = mine.iter().filter(|t| t.handler == "witness").map(|t| t.id).collect();
        let joins: Vec<&&Task> = mine.iter().filter(|t| t.handler == "join").collect();
        assert_eq!(parts.len(), CHILDREN, "fan-out {parent} queued each child exactly once: {mine:?}");
        assert_eq!((joins.len(), mine.len()), (1, CHILDREN + 1), "fan-out {parent} queued one join: {mine:?}");
        check_join(env, joins[0], &parts, &by_id, &mut figures).await;
    }
    figures
}

/// A join ran once, after all its parts: its one successful run read each of them succeeded. When
/// a part was given up on, the join was cancelled instead and never ran.
async fn check_join(env: &Env, join: &Task, parts: &BTreeSet<i64>, by_id: &HashMap<i64, &Task>, figures: &mut Figures) {
    let deps: BTreeSet<i64> = env.app.client.dependencies(join.id).await.expect("deps").iter().map(|d| d.id).collect();
    assert_eq!(&deps, parts, "join {} runs after its siblings, and only those", join.id);
    let runs = env.app.store.runs_of(join.id).await.expect("runs");
    figures.joins += 1;
    figures.join_runs += runs.len();
    if parts.iter().any(|p| by_id[p].state != TaskState::Succeeded) {
        assert_eq!(join.state, TaskState::Cancelled, "join {} of a dead part: {join:?}", join.id);
        assert!(runs.iter().all(|r| r.started_on.is_none()), "join {} of a dead part ran: {runs:?}", join.id);
        return;
    }
    assert_eq!(join.state, TaskState::Succeeded, "join {}: {join:?} {runs:?}", join.id);
    let successes: Vec<_> = runs.iter().filter(|r| r.status == RunStatus::Success).collect();
    assert_eq!(successes.len(), 1, "join {} succeeded once: {runs:?}", join.id);
    let read: serde_json::Value =
        serde_json::from_str(successes[0].results.as_deref().expect("join results")).expect("join results are JSON");
    assert_eq!(
        (read["tasks"].as_u64(), read["succeeded"].as_u64()),
        (Some(CHILDREN as u64), Some(CHILDREN as u64)),
        "join {} ran after all its parts succeeded: {read}",
        join.id
    );
}
