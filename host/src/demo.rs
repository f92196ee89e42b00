//! `taskhost demo`: queue a few example tasks, run a worker until they are done, show the outcome.

use std::time::Duration;

use anyhow::{bail, Result};
use taskhost::model::{BackoffSettings, NewTask, TaskFilter};
use taskhost::runner::WorkerConfig;
use taskhost::App;

use crate::output;

const NEEDED: [&str; 4] = ["word-count", "fail", "noop", "echo"];

pub async fn run(app: &App) -> Result<()> {
    println!("== plugins in {}", app.catalog.dir().display());
    let catalog = app.catalog.clone();
    let reports = tokio::task::spawn_blocking(move || catalog.reload()).await?;
    print!("{}", output::plugin_table(&reports, app.catalog.dir(), &app.catalog.policy().run_limits));
    for name in NEEDED {
        if app.catalog.get(name).is_none() {
            bail!("plugin {name:?} is missing from {}: run `make plugins` first", app.catalog.dir().display());
        }
    }

    println!("\n== bad input is refused with a clear error, and nothing is written");
    for (handler, data) in [("no-such-handler", "{}"), ("word-count", "{not json")] {
        match app.client.add(NewTask::new(handler, data)).await {
            Ok(a) => println!("  unexpectedly added task {}", a.id),
            Err(e) => println!("  add {handler} {data:?}: {e}"),
        }
    }

    println!("\n== queueing tasks");
    let text = "It was the best of times, it was the worst of times,\n".repeat(400);
    let quick_retries = BackoffSettings { base_ms: Some(200), max_ms: Some(1_000) };
    let mut tasks = vec![
        NewTask::new("word-count", serde_json::json!({ "text": text }).to_string()).with_queued_by("demo"),
        NewTask::new("word-count", r#"{"text": "the quick brown fox jumps over the lazy dog"}"#).with_queued_by("demo"),
        NewTask::new("echo", r#"{"progress": [25, 50, 75], "partial": {"step": "halfway"}, "hello": "world"}"#),
        NewTask::new("noop", "{}").with_priority(-5),
        NewTask::new("fail", "{}").with_max_attempts(3).with_backoff(quick_retries),
        NewTask::new("fail", r#"{"retryable": false}"#),
        NewTask::new("word-count", r#"{"text": 42}"#),
        NewTask::new("noop", "{}").with_scheduled_on(app.client.now() + chrono::Duration::hours(1)),
    ];
    tasks.extend((0..5).map(|_| NewTask::new("noop", "{}").with_priority(1)));
    let added = app.client.add_many(tasks).await?;
    let queued = taskhost::text::count(added.len() as u64, "task");
    println!("  queued {queued} (ids {}..={})", added[0].id, added[added.len() - 1].id);

    println!("\n== running a worker until nothing is due (retries included)");
    let started = std::time::Instant::now();
    let cfg = WorkerConfig {
        concurrency: 4,
        drain: true,
        drain_horizon: Duration::from_secs(5),
        poll_interval: Duration::from_millis(50),
        ..WorkerConfig::default()
    };
    let report = app.worker(cfg).run(crate::shutdown::shutdown_signal()).await?;
    println!("  runner {} finished {} runs in {:.2?}", report.runner_id, report.runs_finished, started.elapsed());

    println!("\n== outcome");
    let ids: Vec<i64> = added.iter().map(|a| a.id).collect();
    let mut rows = Vec::new();
    for t in app.client.list(&TaskFilter::default()).await? {
        if ids.contains(&t.id) {
            let runs = app.store.runs_of(t.id).await?;
            rows.push((t, runs));
        }
    }
    print!("{}", output::task_table(&rows));
    let c = app.store.counts().await?;
    println!(
        "\n{} success, {} error, {} timeout, {} scheduled, {} running; {} dead letters (`taskhost list --dead`)",
        c.success, c.error, c.timeout, c.scheduled, c.running, c.dead
    );
    println!("Inspect one: taskhost --database-url <url> show ID");
    println!("In a browser: taskhost --database-url <url> serve, then open the address it prints (`make dashboard`)");
    Ok(())
}
