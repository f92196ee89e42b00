//! Fan-out and join from a handler (issue 47, `enqueue-after` and `dependencies`): real components
//! on each SDK queue their parts and a task after all of them, through a worker on a SQLite file.
//! The join runs once, after every part succeeded, and reads their results; a part that dies
//! cancels it, unless it runs anyway; a join's numbers must name tasks queued before it.

use crate::common;

use common::{drain_config, Env};
use serde_json::{json, Value};
use taskhost::model::{codes, NewTask, RunStatus, TaskFilter, TaskState};

async fn children_of(env: &Env, id: i64) -> Vec<taskhost::model::Task> {
    let filter = TaskFilter { parent: Some(id), newest_first: false, ..TaskFilter::default() };
    env.app.client.list(&filter).await.expect("list")
}

fn results(runs: &[taskhost::model::Run]) -> Value {
    let last = runs.last().and_then(|r| r.results.as_deref()).expect("results");
    serde_json::from_str(last).expect("JSON")
}

/// Each SDK's fan-out and join: three parts, then the join, which runs after all three and reads
/// their results in the order they were queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_fans_out_and_joins_in_each_sdk_and_the_join_reads_the_parts_results() {
    let env = Env::new(&["fan-out", "join", "py-fan-out", "js-fan-out", "c-fan-out", "echo"]).await;
    let cases = [
        ("fan-out", json!({"items": [1, 2, 3], "join": "join"}), "join"),
        ("py-fan-out", json!({"items": [1, 2, 3], "join": true}), "py-fan-out"),
        ("js-fan-out", json!({"items": [1, 2, 3], "join": true}), "js-fan-out"),
        ("c-fan-out", json!({"items": [1, 2, 3], "join": true}), "c-fan-out"),
    ];
    for (handler, data, joiner) in cases {
        let id = env.app.client.add(NewTask::new(handler, data.to_string())).await.expect("add").id;
        let report = env.drain(drain_config()).await;
        assert_eq!(report.runs_finished, 5, "{handler}: the parent, three parts and the join: {report:?}");
        let kids = children_of(&env, id).await;
        let (parts, join) = kids.split_at(3);
        assert_eq!(join[0].handler, joiner, "{handler}: queued last");
        let deps = env.app.client.dependencies(join[0].id).await.expect("dependencies");
        let ids: Vec<i64> = deps.iter().map(|d| d.id).collect();
        assert_eq!(ids, parts.iter().map(|p| p.id).collect::<Vec<_>>(), "{handler}: the join runs after its parts");
        let (task, runs) = env.app.client.show(join[0].id).await.expect("show");
        assert_eq!((task.state, runs.len(), task.depth), (TaskState::Succeeded, 1, 1), "{handler}: it ran once");
        let parts_ended = parts.iter().map(|p| p.id);
        for part in parts_ended {
            let (_, part_runs) = env.app.client.show(part).await.expect("show");
            assert!(part_runs[0].finished_on <= runs[0].started_on, "{handler}: the join started after each part");
        }
        let got = results(&runs);
        assert_eq!((got["tasks"].clone(), got["succeeded"].clone()), (json!(3), json!(3)), "{handler}: {got}");
        let echoed = json!([{"item": 1}, {"item": 2}, {"item": 3}]);
        assert_eq!(got["results"], echoed, "{handler}: each part's results, in the order queued");
    }
}

/// A part that dies cancels the join waiting for it, with the reason; a join that runs anyway runs
/// and reads that its parts did not succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_part_cancels_its_join_unless_the_join_runs_anyway() {
    let env = Env::new(&["fan-out", "join", "fail"]).await;
    let dying = json!({"items": [{"retryable": false}, {"retryable": false}], "handler": "fail", "join": "join"});
    let strict = env.app.client.add(NewTask::new("fan-out", dying.to_string())).await.expect("add").id;
    let mut anyway = dying.clone();
    anyway["run_anyway"] = json!(true);
    let lenient = env.app.client.add(NewTask::new("fan-out", anyway.to_string())).await.expect("add").id;
    env.drain(drain_config()).await;

    let join = children_of(&env, strict).await.pop().expect("join");
    let (task, runs) = env.app.client.show(join.id).await.expect("show");
    let seen = (task.state, runs[0].status, runs[0].error_code.as_deref());
    assert_eq!(seen, (TaskState::Cancelled, RunStatus::Cancelled, Some(codes::DEPENDENCY_FAILED)));

    let join = children_of(&env, lenient).await.pop().expect("join");
    let (task, runs) = env.app.client.show(join.id).await.expect("show");
    assert_eq!(task.state, TaskState::Succeeded, "it runs anyway");
    let got = results(&runs);
    assert_eq!((got["tasks"].clone(), got["succeeded"].clone()), (json!(2), json!(0)), "{got}");
}

/// A join that calls `dependencies` in a loop makes the host copy what it read at each call: past
/// 64 MiB handed over (or four times its results limit) the call is refused, and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_rereading_its_dependencies_in_a_loop_is_refused_past_its_bound() {
    let env = Env::new(&["echo", "probe"]).await;
    let big = json!({ "text": "x".repeat(60_000) }).to_string();
    let part = env.app.client.add(NewTask::new("echo", big.clone())).await.expect("add").id;
    let looped = NewTask::new("probe", json!({ "reread": 5_000 }).to_string()).with_after([part]);
    let id = env.app.client.add(looped).await.expect("add").id;
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, 2, "{report:?}");
    let (task, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!(task.state, TaskState::Succeeded, "{:?}", runs.last().and_then(|r| r.error_message.clone()));
    let got = results(&runs);
    // Each call hands over the part's results and its handler's name, and 32 bytes for the rest.
    let each = (big.len() + "echo".len() + 32) as u64;
    let calls = got["calls"].as_u64().expect("calls");
    assert_eq!(calls, (64 << 20) / each, "{got}");
    let refused = got["refused"].as_str().expect("refused");
    assert!(refused.contains("keep what a call returns"), "{refused}");
}
