//! `cargo bench -p taskhost --bench workflows`: what workflows cost (issue 47), on a fresh SQLite
//! file or BENCH_DATABASE_URL (an empty PostgreSQL or MySQL database). Needs the example plugins
//! (`make plugins`).
//!
//! - children: BENCH_ROUNDS rounds, each a `fan-out` run in the sandbox that queues 1,000 tasks
//!   (less one that queues none) and its end written with them (less an end with none), beside a
//!   bulk add of 1,000 (`Client::add_many`): the cost of 1,000 children against adding 1,000;
//! - join: one `fan-out` run queuing BENCH_PARTS (10,000) `noop` parts and a `join` after them, all
//!   run by one worker: from the join's becoming due (the last part's end) to its run's start, by
//!   the database's times, and what the join read;
//! - waiting: claim and finish 20,000 due tasks (the store alone, no wasm), twice with none waiting,
//!   then three times beside BENCH_WAITING (100,000) tasks in the same queue waiting for a task
//!   that never runs, then twice more once that task is cancelled (and they with it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use taskhost::bench::{self, env_num};
use taskhost::model::{NewTask, RunEnd, RunOutcome, TaskFilter};
use taskhost::runner::WorkerConfig;
use taskhost::sandbox::{GuestOutcome, RunInput};
use taskhost::{App, AppConfig};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The middle of `values` and its range, in ms.
fn spread(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let (lo, mid, hi) = (values[0], values[values.len() / 2], values[values.len() - 1]);
    format!("median {mid:.1} ms (range {lo:.1} – {hi:.1})")
}

async fn run() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let plugins = root.join("target/plugins");
    assert!(plugins.join("join.wasm").exists(), "run `make plugins` first");
    let dir = tempfile::tempdir().expect("temp dir");
    let url = std::env::var("BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("bench.db").display()));
    let parts = env_num("BENCH_PARTS", 10_000);
    let mut config = AppConfig::new(&url, &plugins);
    config.cache_dir = Some(root.join("target/bench-cache"));
    config.policy.limits.max_children = (parts + 1).max(1000);
    let app = App::open(&config).await.expect("open");
    let catalog = app.catalog.clone();
    tokio::task::spawn_blocking(move || catalog.reload()).await.expect("load the plugins");
    println!("taskhost workflows bench: {}", url.split('?').next().unwrap_or(""));
    children(&app).await;
    join(&app, parts).await;
    waiting(&app).await;
}

/// A worker's drain of `queue`, holding `tasks` tasks, running at most `concurrency` at once.
async fn drain(app: &App, queue: &str, tasks: u64, concurrency: usize) -> Duration {
    let config = WorkerConfig { concurrency, poll_interval: Duration::from_millis(5), ..WorkerConfig::default() };
    bench::drain(app, queue, config, tasks, None).await.expect("drain").took
}

async fn children(app: &App) {
    let fan_out = app.catalog.load("fan-out").expect("fan-out");
    let runner = app.store.register_runner(1, "bench-children", app.clock.now(), 100).await.expect("runner");
    let sandbox = app.catalog.sandbox();
    let (mut guest, mut write, mut bulk) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..env_num("BENCH_ROUNDS", 9) {
        // The run: 1,000 enqueue calls, less a run that makes none.
        let mut took = [Duration::ZERO; 2];
        let mut queued = None;
        for (i, n) in [0, 1000].into_iter().enumerate() {
            let data = json!({"items": vec![0; n], "handler": "noop", "queue": format!("kids-{round}")});
            let input = RunInput {
                task_id: 1,
                run_id: 1,
                attempt: 1,
                handler: "fan-out".into(),
                data: data.to_string(),
                queued_by: None,
                queueing: Default::default(),
            };
            let t = Instant::now();
            let r = sandbox.run(&fan_out.pre, fan_out.limits, &fan_out.grants, input, Default::default()).await;
            took[i] = t.elapsed();
            assert!(matches!(r.outcome, GuestOutcome::Success(_)), "{:?}", r.outcome);
            queued = Some(r.children);
        }
        guest.push(ms(took[1].saturating_sub(took[0])));
        // Its end: written with 1,000 children, less an end with none.
        let kids: Vec<NewTask> = queued.unwrap_or_default().into_iter().map(|c| c.task).collect();
        for (i, children) in [Vec::new(), kids].into_iter().enumerate() {
            app.client.add(NewTask::new("fan-out", "{}").with_queue("parents")).await.expect("add");
            let c = app.store.claim(runner, &["parents".into()], 1, app.clock.now(), Duration::from_secs(60)).await;
            let c = c.expect("claim").pop().expect("claimed");
            let end = RunEnd::Success { results: None, children: children.into() };
            let outcome = RunOutcome {
                run_id: c.run_id,
                task_id: c.task_id,
                end,
                percents_completed: None,
                finished_on: app.clock.now(),
                duration_ms: 1,
                component_digest: Some(fan_out.digest.clone()),
                fuel_used: Some(1),
                logs: None,
                fuel_key: None,
                delete_on_success: false,
            };
            let t = Instant::now();
            app.store.finish_runs(&[outcome]).await.expect("finish");
            took[i] = t.elapsed();
        }
        write.push(ms(took[1].saturating_sub(took[0])));
        let batch = (0..1000).map(|_| NewTask::new("noop", "{}").with_queue("bulk")).collect();
        let t = Instant::now();
        app.client.add_many(batch).await.expect("add");
        bulk.push(ms(t.elapsed()));
    }
    println!("children       1,000 from one run: the run's 1,000 enqueue calls {}", spread(guest));
    println!("               and its end's write of them                      {}", spread(write));
    println!("bulk add       1,000 tasks (Client::add_many)                   {}", spread(bulk));
}

async fn join(app: &App, parts: usize) {
    let data = json!({"items": vec![0; parts], "handler": "noop", "queue": "parts", "join": "join"}).to_string();
    let parent = app.client.add(NewTask::new("fan-out", data).with_queue("parts")).await.expect("add").id;
    let t = Instant::now();
    let drained = drain(app, "parts", parts as u64 + 2, 64).await;
    let filter = TaskFilter { parent: Some(parent), newest_first: true, limit: Some(1), ..TaskFilter::default() };
    let join = app.client.list(&filter).await.expect("list").pop().expect("the join");
    let (task, runs) = app.client.show(join.id).await.expect("show");
    let started = runs.first().and_then(|r| r.started_on).expect("the join ran");
    let waited = (started - task.scheduled_on).to_std().unwrap_or_default();
    let read = runs.first().and_then(|r| r.results.clone()).unwrap_or_default();
    let (_, fanned) = app.client.show(parent).await.expect("show");
    let fanned = fanned.first().expect("the fan-out ran");
    let (began, ended) = (fanned.started_on.expect("started"), fanned.finished_on.expect("ended"));
    let ended_to_written = (join.queued_on - ended).to_std().unwrap_or_default();
    let parts_ran = (task.scheduled_on - join.queued_on).to_std().unwrap_or_default();
    let (_, parent_task) = (0, app.client.show(parent).await.expect("show").0);
    println!(
        "               queued → the fan-out's start {:.1} ms, its run {:.1} ms, its end → the join due {:.2?}, the join's run {:.1} ms, its end → drained {:.2?}",
        ms((began - parent_task.queued_on).to_std().unwrap_or_default()),
        ms((ended - began).to_std().unwrap_or_default()),
        parts_ran,
        runs[0].duration_ms.unwrap_or(0) as f64,
        (app.clock.now() - runs[0].finished_on.expect("ended")).to_std().unwrap_or_default(),
    );
    let _ = ended_to_written;
    println!(
        "join           over {parts} parts: due → started {:.1} ms; all {} runs in {:.2?} (from the add: {:.2?}); it read {}",
        ms(waited),
        parts + 2,
        drained,
        t.elapsed(),
        taskhost::text::bounded(&read, 120, "…")
    );
}

async fn waiting(app: &App) {
    let waiting = env_num("BENCH_WAITING", 100_000);
    let noop = app.catalog.load("noop").expect("noop");
    let runner = app.store.register_runner(1, "bench", app.clock.now(), 100).await.expect("runner");
    let claim_all = |label: &'static str| {
        let noop = noop.digest.clone();
        async move {
            bench::add(app, "due", "noop", "{}", 20_000, None).await.expect("add");
            let (n, claim, finish) = bench::claim_and_finish_all(app, "due", runner, &noop).await.expect("claim");
            println!(
                "{label}  claim {:.1} µs/task, finish {:.1} µs/task ({n} tasks, batches of 256)",
                claim.as_secs_f64() * 1e6 / n as f64,
                finish.as_secs_f64() * 1e6 / n as f64
            );
        }
    };
    claim_all("none waiting  ").await;
    claim_all("none waiting  ").await;
    let blocker = app.client.add(NewTask::new("noop", "{}").with_queue("never")).await.expect("add").id;
    let t = Instant::now();
    for _ in 0..waiting.div_ceil(10_000) {
        let batch = (0..10_000).map(|_| NewTask::new("noop", "{}").with_queue("due").with_after([blocker])).collect();
        app.client.add_many(batch).await.expect("add");
    }
    println!("added          {waiting} waiting tasks in {:.2?}", t.elapsed());
    for _ in 0..3 {
        claim_all("with waiting  ").await;
    }
    // Then none waiting again, the table as large: what is left is the table's growth, not them.
    let t = Instant::now();
    app.client.cancel(&[blocker]).await.expect("cancel the blocker");
    let left = TaskFilter { state: Some(taskhost::model::TaskState::Waiting), ..TaskFilter::default() };
    let left = app.client.list(&left).await.expect("list").len();
    println!("cancelled      the blocker, and so the waiting tasks ({left} left waiting), in {:.2?}", t.elapsed());
    for _ in 0..2 {
        claim_all("none, after   ").await;
    }
}
