//! `cargo bench -p taskhost` (or `make bench`): the SQLite queue's throughput and the sandbox's
//! per-run overhead. Needs the example plugins (`make plugins`).
//!
//! Measures, on a fresh SQLite file in a temporary directory:
//! - bulk add: N no-op tasks queued with `Client::add_many` (validated, one transaction);
//! - drain: one worker running them all (tasks/s from the first claim to the last write);
//! - wasm overhead: one no-op run (new store + instantiate + call + result check), repeated.
//!
//! Environment: BENCH_TASKS (default 20000), BENCH_CONCURRENCY (default 1024), BENCH_CLAIM_BATCH (256),
//! BENCH_RUNS (20000), BENCH_LATENCY_RUNS (200), BENCH_DATABASE_URL (a new SQLite file),
//! BENCH_PREFILL (0: finished tasks written before anything is measured, to show the cost of a full
//! table), BENCH_WORKERS (0: the drain runs in this process; N: it runs in N `taskhost worker
//! --drain` processes, timed from their start to the last one's exit), BENCH_QUEUE_LIMIT (none: the
//! queue's concurrency limit across workers, `[queues.default] max_running`, for the cost of the
//! limited claim), BENCH_KEYS (10000: the store-only claim again with the tasks spread over this
//! many keys, 0: not).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use taskhost::bench::{self, env_num};
use taskhost::model::NewTask;
use taskhost::runner::WorkerConfig;
use taskhost::sandbox::{GuestOutcome, RunInput};
use taskhost::{App, AppConfig};

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing we need.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let tasks = env_num("BENCH_TASKS", 20_000);
    let concurrency = env_num("BENCH_CONCURRENCY", 1024);
    let runs = env_num("BENCH_RUNS", 20_000);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let plugins = root.join("target/plugins");
    assert!(plugins.join("noop.wasm").exists(), "run `make plugins` first");
    let dir = tempfile::tempdir().expect("temp dir");
    // BENCH_DATABASE_URL: an empty PostgreSQL or MySQL database instead of a new SQLite file.
    let url = std::env::var("BENCH_DATABASE_URL")
        .unwrap_or_else(|_| format!("sqlite://{}", dir.path().join("bench.db").display()));
    let mut config = AppConfig::new(&url, &plugins);
    config.cache_dir = Some(root.join("target/bench-cache"));
    config.sandbox.pool_instances = (concurrency as u32 * 2).max(100);
    let queue_limit = env_num("BENCH_QUEUE_LIMIT", 0) as u32;
    let operator_file = dir.path().join("operator.toml");
    if queue_limit > 0 {
        let limit = taskhost::model::Limit { max_running: Some(queue_limit), ..Default::default() };
        config.policy.run_limits.queues.insert("default".into(), limit);
        std::fs::write(&operator_file, format!("[queues.default]\nmax_running = {queue_limit}\n")).expect("config");
    }
    let app = App::open(&config).await.expect("open");
    // Every plugin of the directory compiled (or read from the cache) before anything is timed:
    // a worker loads them all when it starts, and with a cold cache it would compile them (a
    // Python component takes seconds) on the same cores as the drain being measured.
    let catalog = app.catalog.clone();
    tokio::task::spawn_blocking(move || catalog.reload()).await.expect("load the plugins");
    let noop = app.catalog.load("noop").expect("noop plugin");

    println!(
        "taskhost bench: {tasks} no-op tasks, worker concurrency {concurrency}, {}{}",
        url.split('?').next().unwrap_or(""),
        if queue_limit > 0 { format!(", at most {queue_limit} runs in flight") } else { String::new() }
    );

    let prefill = env_num("BENCH_PREFILL", 0);
    if prefill > 0 {
        let t = Instant::now();
        let runner = app.store.register_runner(1, "bench-prefill", app.clock.now(), 100).await.expect("runner");
        let mut left = prefill;
        while left > 0 {
            let n = left.min(10_000);
            app.client.add_many((0..n).map(|_| NewTask::new("noop", "{}")).collect()).await.expect("add");
            bench::claim_and_finish_all(&app, "default", runner, &noop.digest).await.expect("claim and finish");
            left -= n;
        }
        app.store.finish_runner(runner, taskhost::model::RunnerStatus::Success, app.clock.now()).await.expect("runner");
        println!("prefill        {prefill} finished tasks kept in the tables ({:.1?})", t.elapsed());
    }

    // Bulk add (as `taskhost bench` does it).
    let add = bench::add(&app, "default", "noop", "{}", tasks, None).await.expect("add");
    println!("bulk add       {:>10.0} tasks/s  ({tasks} in {add:.2?})", tasks as f64 / add.as_secs_f64());

    // Drain.
    let cfg = WorkerConfig {
        concurrency,
        drain: true,
        overseer: None,
        poll_interval: Duration::from_millis(5),
        claim_batch: env_num("BENCH_CLAIM_BATCH", WorkerConfig::DEFAULT_CLAIM_BATCH),
        ..WorkerConfig::default()
    };
    let workers = env_num("BENCH_WORKERS", 0);
    if workers == 0 {
        let drained = bench::drain(&app, "default", cfg, tasks as u64, None).await.expect("worker");
        assert_eq!(drained.report.runs_finished as usize, tasks);
        println!(
            "drain          {:>10.0} tasks/s  ({tasks} in {:.2?}; CPU {:.0} µs/task)",
            tasks as f64 / drained.took.as_secs_f64(),
            drained.took,
            drained.cpu.as_secs_f64() * 1e6 / tasks as f64
        );
    } else {
        let t = Instant::now();
        let procs: Vec<_> = (0..workers)
            .map(|_| {
                std::process::Command::new(env!("CARGO_BIN_EXE_taskhost"))
                    .args(["worker", "--drain", "--no-overseer", "--watch-plugins", "0s", "--poll-interval", "5ms"])
                    .args(["--concurrency", &concurrency.to_string(), "--rss-cap-mb", "4096"])
                    .args(["--claim-batch", &cfg.claim_batch.to_string()])
                    .args(if queue_limit > 0 { vec!["--config".into(), operator_file.clone()] } else { vec![] })
                    .env("TASKHOST_DATABASE_URL", &url)
                    .env("TASKHOST_PLUGINS", &plugins)
                    .env("TASKHOST_CACHE_DIR", root.join("target/bench-cache"))
                    .spawn()
                    .expect("start a worker process")
            })
            .collect();
        for mut p in procs {
            assert!(p.wait().expect("worker").success(), "a worker process failed");
        }
        let drain = t.elapsed();
        let counts = app.store.counts().await.expect("counts");
        assert_eq!(counts.success as usize, prefill + tasks, "{counts:?}");
        println!(
            "drain          {:>10.0} tasks/s  ({tasks} in {drain:.2?} by {workers} worker processes, from their start)",
            tasks as f64 / drain.as_secs_f64()
        );
    }

    // Statistics, with every task above (and the prefill) finished and kept.
    let mut took = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let stats = app.client.stats(None, None).await.expect("stats");
        took.push(t.elapsed());
        assert!(stats.iter().map(|s| s.runs.succeeded as usize).sum::<usize>() >= tasks);
    }
    took.sort();
    println!(
        "stats          {:>10.1} ms  (fastest {:.1} ms of 5; {} finished tasks kept)",
        took[2].as_secs_f64() * 1e3,
        took[0].as_secs_f64() * 1e3,
        prefill + tasks
    );

    // Enqueue → start latency with an idle worker: single adds, one at a time.
    let latency_runs = env_num("BENCH_LATENCY_RUNS", 200);
    if latency_runs > 0 {
        let lat = bench::latency(&app, "default", "noop", "{}", latency_runs, None).await.expect("latency");
        let ms = |q: f64| bench::quantile(&lat, q).as_secs_f64() * 1e3;
        println!(
            "enqueue→start  p50 {:.2} ms, p90 {:.2} ms  ({latency_runs} single adds, idle worker, default poll)",
            ms(0.5),
            ms(0.9)
        );
    }

    // The store alone: claim and finish in batches, no wasm; with BENCH_KEYS, keyless and keyed
    // tasks (spread over that many keys: fair shares, each keyed add takes its turn, the claim is
    // the same statement) in turn, keyless, keyed, keyed, keyless, so the table's growth weighs
    // on both alike; compared within this run.
    let runner = app.store.register_runner(1, "bench", app.clock.now(), 100).await.expect("runner");
    let keys = env_num("BENCH_KEYS", 10_000);
    let order: &[bool] = if keys > 0 { &[false, true, true, false] } else { &[false] };
    let mut claims = [(0.0, 0usize); 2];
    for &keyed in order {
        let task = |i: usize| {
            let t = NewTask::new("noop", "{}");
            if keyed {
                t.with_key(format!("k{}", i % keys))
            } else {
                t
            }
        };
        let t = Instant::now();
        app.client.add_many((0..tasks).map(task).collect()).await.expect("add");
        let add = t.elapsed();
        let (n, claim_t, finish_t) =
            bench::claim_and_finish_all(&app, "default", runner, &noop.digest).await.expect("claim and finish");
        claims[usize::from(keyed)].0 += claim_t.as_secs_f64();
        claims[usize::from(keyed)].1 += n;
        println!(
            "store only{} {:>10.0} tasks/s  (claim {:.1} µs/task, finish {:.1} µs/task, batches of 256; add {:.0} tasks/s)",
            if keyed { format!(", {keys} keys") } else { String::new() },
            n as f64 / (claim_t + finish_t).as_secs_f64(),
            claim_t.as_secs_f64() * 1e6 / n as f64,
            finish_t.as_secs_f64() * 1e6 / n as f64,
            tasks as f64 / add.as_secs_f64()
        );
    }
    if keys > 0 {
        let per = |(t, n): (f64, usize)| t * 1e6 / n as f64;
        let (plain, keyed) = (per(claims[0]), per(claims[1]));
        println!("claim, {keys} keys {:.2}x keyless  ({keyed:.1} against {plain:.1} µs/task)", keyed / plain);
    }

    // Wasm overhead per run, sequential.
    let sandbox = app.catalog.sandbox();
    let input = |i: usize| RunInput {
        task_id: i as i64,
        run_id: i as i64,
        attempt: 1,
        handler: "noop".into(),
        data: "{}".into(),
        queued_by: None,
        queueing: Default::default(),
    };
    for i in 0..1_000 {
        let _ = sandbox.run(&noop.pre, noop.limits, &noop.grants, input(i), Default::default()).await;
    }
    let t = Instant::now();
    for i in 0..runs {
        let r = sandbox.run(&noop.pre, noop.limits, &noop.grants, input(i), Default::default()).await;
        assert!(matches!(r.outcome, GuestOutcome::Success(_)));
    }
    let per = t.elapsed() / runs as u32;
    println!("wasm overhead  {:>10.1} µs/run   (new store + instantiate + call, {runs} runs)", per.as_secs_f64() * 1e6);
    // Handlers in other languages: load time from the cache (a second catalog, as a restarted
    // worker would), and one run (instantiate + call) each.
    for (name, data) in [
        ("word-count", r#"{"text": "a b c"}"#),
        ("c-checksum", r#"{"text": "a b c"}"#),
        ("py-stats", r#"{"numbers": [1, 2, 3]}"#),
        ("js-words", r#"{"text": "a b c"}"#),
    ] {
        if !plugins.join(format!("{name}.wasm")).exists() {
            continue;
        }
        let _ = app.catalog.load(name); // compiles into the cache if needed
        let fresh =
            taskhost::plugins::Catalog::new(sandbox.clone(), &plugins, config.cache_dir.clone(), Default::default());
        let t = Instant::now();
        let plugin = fresh.load(name).expect("load");
        let load = t.elapsed();
        let input = || RunInput {
            task_id: 1,
            run_id: 1,
            attempt: 1,
            handler: name.into(),
            data: data.into(),
            queued_by: None,
            queueing: Default::default(),
        };
        let _ = sandbox.run(&plugin.pre, plugin.limits, &plugin.grants, input(), Default::default()).await;
        let n = 200;
        let t = Instant::now();
        for _ in 0..n {
            let r = sandbox.run(&plugin.pre, plugin.limits, &plugin.grants, input(), Default::default()).await;
            assert!(matches!(r.outcome, GuestOutcome::Success(_)), "{name}: {:?}", r.outcome);
        }
        println!(
            "{name:<14} cached load {:>7.1} ms, run {:>8.1} µs  (instantiate + call, {n} runs)",
            load.as_secs_f64() * 1e3,
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }

    let mut sys = sysinfo::System::new();
    let rss = taskhost::runner::process_rss(&mut sys, sysinfo::Pid::from_u32(std::process::id())).unwrap_or(0);
    println!("process RSS    {:>10.1} MiB after all of the above", rss as f64 / (1 << 20) as f64);
}
