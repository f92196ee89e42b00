//! Tasks queued by handlers (issue 47, `enqueue`): a real component (`fan-out`, on the Rust SDK)
//! queues tasks through a worker on a SQLite file. Its children are written only when its run ends
//! well, once however often it is retried, each naming its parent; the operator's bounds on how
//! many a run queues and how deep they nest are refused at the call, by name.

use crate::common;

use common::{drain_config, Env};
use serde_json::{json, Value};
use taskhost::model::{NewTask, RunStatus, TaskFilter, TaskState};

async fn add(env: &Env, data: Value) -> i64 {
    let task = NewTask::new("fan-out", data.to_string())
        .with_backoff(taskhost::model::BackoffSettings { base_ms: Some(1), max_ms: Some(1) });
    env.app.client.add(task).await.expect("add").id
}

async fn children_of(env: &Env, id: i64) -> Vec<taskhost::model::Task> {
    let filter = TaskFilter { parent: Some(id), newest_first: false, ..TaskFilter::default() };
    env.app.client.list(&filter).await.expect("list")
}

/// Each SDK's fan-out: three children, which run, each naming its parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_fans_out_in_each_sdk_and_its_children_run_each_naming_its_parent() {
    let env = Env::new(&["fan-out", "py-fan-out", "js-fan-out", "c-fan-out", "echo"]).await;
    for handler in ["fan-out", "py-fan-out", "js-fan-out", "c-fan-out"] {
        let data = json!({"items": [1, 2, 3]}).to_string();
        let id = env.app.client.add(NewTask::new(handler, data)).await.expect("add").id;
        let report = env.drain(drain_config()).await;
        assert_eq!(report.runs_finished, 4, "{handler}: the parent and its three children: {report:?}");
        let kids = children_of(&env, id).await;
        let item = |k: &taskhost::model::Task| serde_json::from_str::<Value>(&k.data).expect("JSON")["item"].clone();
        assert_eq!(kids.iter().map(item).collect::<Vec<_>>(), vec![json!(1), json!(2), json!(3)], "{handler}");
        for k in &kids {
            let seen = (k.state, k.depth, k.queued_by.clone());
            assert_eq!(seen, (TaskState::Succeeded, 1, Some(format!("task {id}"))), "{handler}");
        }
    }
}

/// A child's delay counts from its parent's run's end, by the database's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_delay_counts_from_its_parents_end() {
    let (env, clock) = Env::manual(&["py-fan-out", "echo"]).await;
    let data = json!({"items": [1], "delay": 90}).to_string();
    let id = env.app.client.add(NewTask::new("py-fan-out", data)).await.expect("add").id;
    env.drain(drain_config()).await;
    let (_, runs) = env.app.client.show(id).await.expect("show");
    let kids = children_of(&env, id).await;
    let ended = runs[0].finished_on.expect("ended");
    assert_eq!((kids[0].state, kids[0].scheduled_on), (TaskState::Scheduled, ended + chrono::Duration::seconds(90)));
    clock.advance(chrono::Duration::seconds(90));
    env.drain(drain_config()).await;
    assert_eq!(children_of(&env, id).await[0].state, TaskState::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fails_queues_nothing_and_a_retried_one_queues_once() {
    let env = Env::new(&["fan-out", "echo"]).await;
    let failed = add(&env, json!({"items": [1, 2], "fail": true})).await;
    let retried = add(&env, json!({"items": [1, 2], "fail_first": true})).await;
    let snoozed = add(&env, json!({"items": [1], "snooze_ms": 3_600_000})).await;
    env.drain(drain_config()).await;
    assert!(children_of(&env, failed).await.is_empty(), "a failed run's children are not written");
    let (task, runs) = env.app.client.show(retried).await.expect("show");
    assert_eq!((task.state, runs.len()), (TaskState::Succeeded, 2), "failed once, then succeeded");
    assert_eq!(children_of(&env, retried).await.len(), 2, "queued once, by the run that succeeded");
    let (task, runs) = env.app.client.show(snoozed).await.expect("show");
    assert_eq!((task.state, runs[0].status), (TaskState::Scheduled, RunStatus::Snoozed));
    assert_eq!(children_of(&env, snoozed).await.len(), 1, "a snoozed run's children are written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_bounds_on_children_and_depth_are_refused_by_name() {
    let mut env = Env::new(&["fan-out", "echo"]).await;
    env.set_config("[limits]\nmax_children = 2\n[tasks]\nmax_depth = 1\n").await;
    let many = add(&env, json!({"items": [1, 2, 3]})).await;
    let deep = add(&env, json!({"items": [{"items": [1]}], "handler": "fan-out"})).await;
    env.drain(drain_config()).await;
    let (task, runs) = env.app.client.show(many).await.expect("show");
    let message = runs[0].error_message.as_deref().unwrap_or("");
    assert_eq!((task.state, runs[0].error_code.as_deref()), (TaskState::Dead, Some("enqueue-refused")), "{message}");
    assert!(message.contains("queued 2 tasks already") && message.contains("max_children"), "{message}");
    assert!(children_of(&env, many).await.is_empty());
    let kids = children_of(&env, deep).await;
    assert_eq!(kids.len(), 1, "one level is allowed");
    let (_, runs) = env.app.client.show(kids[0].id).await.expect("show");
    let message = runs[0].error_message.as_deref().unwrap_or("");
    assert!(message.contains("1 deep") && message.contains("max_depth"), "{message}");
}

/// `cancel ID --with-children` cancels every unfinished task under a fan-out that succeeded (its
/// parts wait in a paused queue), saying the fan-out had finished and how many it cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_with_children_cancels_the_parts_of_a_finished_fan_out() {
    let env = Env::new(&["fan-out", "echo"]).await;
    env.app.client.pause_queue("later").await.expect("pause");
    let id = add(&env, json!({"items": [1, 2, 3], "queue": "later"})).await;
    env.drain(drain_config()).await;
    let out =
        common::taskhost_command(&env).args(["cancel", &id.to_string(), "--with-children"]).output().expect("run");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.contains(&format!("task {id} was succeeded already")) && said.contains("3 tasks under them cancelled"),
        "{said}"
    );
    let states: Vec<TaskState> = children_of(&env, id).await.iter().map(|k| k.state).collect();
    assert_eq!(states, vec![TaskState::Cancelled; 3]);
}
