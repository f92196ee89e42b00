//! `taskhost bench` as a user runs it, on every database: it measures with the no-op it carries
//! or a handler named, in worker processes when asked, and leaves the database as it found it;
//! bad input and failing runs are one clear line each.

use crate::common;

use common::process::{run, stderr, stdout};
use common::{Db, Env};
use taskhost::model::{NewTask, TaskFilter};

/// The number after `label` on the line that starts with it.
fn figure(out: &str, label: &str) -> f64 {
    let line = out.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no {label} line in:\n{out}"));
    let rest = line[label.len()..].trim_start();
    let rest = rest.strip_prefix("p50 ").unwrap_or(rest);
    rest.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no figure in {line:?}"))
}

/// Every task of the database, and whether any statistics name a queue of the benchmark's.
async fn left_behind(env: &Env) -> (Vec<i64>, bool) {
    let all = env.app.client.list(&TaskFilter { limit: Some(10_000), ..Default::default() }).await.expect("list");
    let stats = env.app.client.stats(None, None).await.expect("stats");
    (all.iter().map(|t| t.id).collect(), stats.iter().any(|s| s.queue.starts_with("taskhost-bench")))
}

async fn bench_measures_the_no_op_it_carries_and_leaves_the_database_as_it_found_it(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let mine = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let o = run(&env, &["bench", "--tasks", "300", "--latency-runs", "5"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    assert!(out.starts_with("taskhost bench: 300 tasks of the built-in no-op on "), "{out}");
    assert!(figure(&out, "bulk add") > 0.0, "{out}");
    assert!(figure(&out, "drain") > 0.0, "{out}");
    assert!(out.contains("CPU "), "{out}");
    let p90 = out.split("p90 ").nth(1).expect("p90");
    let p90_ms: f64 = p90.split_whitespace().next().and_then(|n| n.parse().ok()).expect("a p90 figure");
    // A run's start takes some time, and no more at the median than at the 90th percentile.
    let p50 = figure(&out, "latency");
    assert!(p50 > 0.0 && p50 <= p90_ms && p90.contains(" ms"), "{out}");
    // 300, one to make the latency worker idle, and 5 timed.
    assert!(out.contains("removed       306 tasks of queue taskhost-bench-"), "{out}");
    assert_eq!(left_behind(&env).await, (vec![mine], false), "only the task that was there before");
    let (task, runs) = env.app.client.show(mine).await.expect("show");
    assert!(runs.iter().all(|r| r.started_on.is_none()), "{task:?}: the benchmark's workers left it alone");
}

async fn bench_runs_a_named_handler_in_worker_processes_and_reports_json(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let o = run(
        &env,
        &["bench", "--handler", "echo", "--data", r#"{"n": 1}"#, "--processes", "2", "--tasks", "200"]
            .iter()
            .chain(&["--latency-runs", "0", "--json", "--concurrency", "4"])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    assert_eq!((json["tasks"].as_u64(), json["handler"].as_str()), (Some(200), Some("echo")), "{json}");
    assert!(json["drain_per_s"].as_f64().expect("drain") > 0.0, "{json}");
    assert!(json["drain_cpu_us_per_task"].as_f64().expect("cpu") > 0.0, "the worker processes' CPU: {json}");
    assert!(json["latency_p50_ms"].is_null(), "{json}");
    assert_eq!(left_behind(&env).await, (vec![], false));
}

async fn bench_says_in_one_line_what_is_wrong_and_removes_what_it_added(db: Db) {
    let env = Env::on(db, &["echo", "fail"]).await;
    for (args, needle) in [
        (&["--handler", "nope"][..], "unknown handler \"nope\""),
        (&["--data", "{bad"][..], "not valid JSON"),
        (&["--handler", "fail", "--latency-runs", "0"][..], "50 of the 50 runs did not succeed"),
    ] {
        let o = run(&env, &[&["bench", "--tasks", "50"][..], args].concat());
        let err = stderr(&o);
        assert!(!o.status.success() && err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert_eq!(left_behind(&env).await, (vec![], false), "{args:?}");
    }
}

on_every_database!(
    bench_measures_the_no_op_it_carries_and_leaves_the_database_as_it_found_it,
    bench_runs_a_named_handler_in_worker_processes_and_reports_json,
    bench_says_in_one_line_what_is_wrong_and_removes_what_it_added,
);
