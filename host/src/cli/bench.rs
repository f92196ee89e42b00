//! `taskhost bench`: the queue's speed on the database the user points at (see
//! [`taskhost::bench`]): bulk add, drain, enqueue-to-start latency and CPU a task, in a queue of
//! its own, removed at the end (also after Ctrl-C).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use taskhost::bench::{self, Phase};
use taskhost::model::{LimitChange, OnSuccess};
use taskhost::runner::WorkerConfig;
use taskhost::{App, AppConfig};

use crate::shutdown::shutdown_signal;

/// `taskhost bench`'s options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Tasks to queue and drain.
    #[arg(long, default_value_t = 20_000, value_parser = super::values::at_least_one)]
    pub tasks: usize,
    /// A handler of the plugins directory to run instead of the built-in no-op.
    #[arg(long)]
    pub handler: Option<String>,
    /// The tasks' data, a JSON document; @FILE reads it from a file.
    #[arg(long, default_value = "{}")]
    pub data: String,
    /// Guests running at once in each worker (a worker's --concurrency).
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CONCURRENCY, value_parser = super::values::at_least_one)]
    pub concurrency: usize,
    /// Runs a claim takes at most (a worker's --claim-batch).
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CLAIM_BATCH, value_parser = super::values::at_least_one)]
    pub claim_batch: usize,
    /// Drain with this many `taskhost worker --drain` processes (timed from their start to the
    /// last one's exit) instead of one worker in this process.
    #[arg(long, default_value_t = 0)]
    pub processes: usize,
    /// Single adds timed to an idle worker, for the latency (0: none).
    #[arg(long, default_value_t = 200)]
    pub latency_runs: usize,
    /// What the benchmark queue's successes do with their tasks: keep them (as by default), or
    /// delete them (`taskhost limits set queue:NAME --on-success delete`).
    #[arg(long, value_name = "keep|delete", default_value = "keep", value_parser = OnSuccess::parse)]
    pub on_success: OnSuccess,
    /// Leave the benchmark's tasks, runs and statistics in the database.
    #[arg(long)]
    pub keep: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What a benchmark measured, as `--json` prints it.
#[derive(Debug, Default, serde::Serialize)]
struct Figures {
    tasks: usize,
    handler: String,
    bulk_add_per_s: f64,
    drain_per_s: f64,
    /// CPU of the processes that drained (not the database server's), µs a task.
    drain_cpu_us_per_task: f64,
    latency_p50_ms: Option<f64>,
    latency_p90_ms: Option<f64>,
}

/// `bench`: open the database (with the built-in no-op in a plugins directory of its own unless
/// a handler is named), measure, print, clean up.
pub async fn run(mut config: AppConfig, cli_config: Option<&Path>, b: BenchArgs) -> Result<()> {
    let data = super::read_data(&b.data)?;
    let own_plugins = tempfile_dir()?;
    let handler = match &b.handler {
        Some(h) => h.clone(),
        None => {
            std::fs::write(own_plugins.join("noop.wasm"), bench::noop_component()?)
                .context("writing the built-in no-op")?;
            config.plugins_dir = own_plugins.clone();
            "noop".to_string()
        }
    };
    let app = App::open(&config).await?;
    // Loaded (compiled once) before anything is timed; a name that is not a plugin is refused here.
    let (catalog, name) = (app.catalog.clone(), handler.clone());
    tokio::task::spawn_blocking(move || catalog.load(&name)).await?.map_err(anyhow::Error::from)?;
    let queue = bench::queue_name();
    let what = if b.handler.is_some() { format!("handler {handler}") } else { "the built-in no-op".into() };
    if !b.json {
        let by = match b.processes {
            0 => "1 worker in this process".to_string(),
            n => format!("{n} worker processes"),
        };
        println!(
            "taskhost bench: {} tasks of {what} on {}, {by} (concurrency {}, claim batch {})",
            b.tasks,
            taskhost::store::redact(&config.database_url),
            b.concurrency,
            b.claim_batch
        );
    }
    let measured = tokio::select! {
        r = measure(&app, &config, cli_config, &b, &queue, &handler, &data) => r,
        _ = shutdown_signal() => Err(anyhow::anyhow!("interrupted")),
    };
    progress_done();
    let cleaned = if b.keep { None } else { Some(bench::clean(&app, &queue).await) };
    let _ = std::fs::remove_dir_all(&own_plugins);
    let mut figures = measured?;
    figures.handler = handler;
    if b.json {
        println!("{}", serde_json::to_string(&figures)?);
    }
    match cleaned {
        None => eprintln!("kept its tasks in queue {queue}"),
        Some(Ok(n)) if !b.json => println!("removed       {n} tasks of queue {queue}, their runs and statistics"),
        Some(Ok(_)) => {}
        Some(Err(e)) => bail!("could not remove the benchmark's tasks (queue {queue}): {e}"),
    }
    Ok(())
}

async fn measure(
    app: &App,
    config: &AppConfig,
    cli_config: Option<&Path>,
    b: &BenchArgs,
    queue: &str,
    handler: &str,
    data: &str,
) -> Result<Figures> {
    let bar = progress_bar();
    let progress = bar.as_ref().map(|b| b as &(dyn Fn(Phase, u64, u64) + Sync));
    let mut f = Figures { tasks: b.tasks, ..Default::default() };
    let add = bench::add(app, queue, handler, data, b.tasks, progress).await?;
    f.bulk_add_per_s = b.tasks as f64 / add.as_secs_f64();
    line(b, &format!("bulk add   {:>10.0} tasks/s   {} in {}", f.bulk_add_per_s, b.tasks, secs(add)));

    if b.on_success != OnSuccess::Keep {
        let change = LimitChange { on_success: Some(b.on_success), ..LimitChange::default() };
        app.client.set_limit(&format!("queue:{queue}"), &change).await?;
    }
    let worker = WorkerConfig { concurrency: b.concurrency, claim_batch: b.claim_batch, ..WorkerConfig::default() };
    let (took, cpu) = if b.processes == 0 {
        let d = bench::drain(app, queue, worker, b.tasks as u64, progress).await?;
        (d.took, d.cpu)
    } else {
        drain_in_processes(app, config, cli_config, b, queue, progress).await?
    };
    let succeeded: u64 = app.client.stats(None, Some(queue)).await?.iter().map(|s| s.runs.succeeded).sum();
    if succeeded != b.tasks as u64 {
        bail!(
            "{} of the {} runs did not succeed: see `taskhost list --queue {queue}` (with --keep)",
            b.tasks as u64 - succeeded.min(b.tasks as u64),
            b.tasks
        );
    }
    f.drain_per_s = b.tasks as f64 / took.as_secs_f64();
    f.drain_cpu_us_per_task = cpu.as_secs_f64() * 1e6 / b.tasks as f64;
    let whose = if b.processes == 0 { "this process" } else { "the worker processes" };
    line(
        b,
        &format!(
            "drain      {:>10.0} tasks/s   {} in {}, CPU {:.0} µs a task ({whose}; not the database server's)",
            f.drain_per_s,
            b.tasks,
            secs(took),
            f.drain_cpu_us_per_task
        ),
    );

    if b.latency_runs > 0 {
        let took = bench::latency(app, queue, handler, data, b.latency_runs, progress).await?;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (p50, p90) = (ms(bench::quantile(&took, 0.5)), ms(bench::quantile(&took, 0.9)));
        (f.latency_p50_ms, f.latency_p90_ms) = (Some(p50), Some(p90));
        line(
            b,
            &format!(
                "latency    p50 {p50:.2} ms, p90 {p90:.2} ms   enqueue to start, {} single adds to an idle worker",
                b.latency_runs
            ),
        );
    }
    Ok(f)
}

/// Drain with `b.processes` worker processes of this same program; their time and CPU.
async fn drain_in_processes(
    app: &App,
    config: &AppConfig,
    cli_config: Option<&Path>,
    b: &BenchArgs,
    queue: &str,
    progress: bench::Progress<'_>,
) -> Result<(Duration, Duration)> {
    let exe = std::env::current_exe().context("finding this program to start workers")?;
    let (started, cpu) = (std::time::Instant::now(), bench::children_cpu_time());
    let mut children = Vec::new();
    for _ in 0..b.processes {
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.args(["worker", "--drain", "--no-overseer", "--watch-plugins", "0s", "--queues", queue])
            .args(["--concurrency", &b.concurrency.to_string(), "--claim-batch", &b.claim_batch.to_string()])
            .env("TASKHOST_DATABASE_URL", &config.database_url)
            .env("TASKHOST_PLUGINS", &config.plugins_dir)
            .kill_on_drop(true);
        if let Some(cache) = &config.cache_dir {
            cmd.env("TASKHOST_CACHE_DIR", cache);
        }
        if let Some(file) = cli_config {
            cmd.env("TASKHOST_CONFIG", file);
        }
        children.push(cmd.spawn().context("starting a worker process")?);
    }
    let all = async {
        for child in &mut children {
            let status = child.wait().await.context("waiting for a worker process")?;
            if !status.success() {
                bail!("a worker process failed ({status})");
            }
        }
        anyhow::Ok(())
    };
    bench::watch_progress(app, queue, b.tasks as u64, progress, all).await?;
    Ok((started.elapsed(), bench::children_cpu_time().saturating_sub(cpu)))
}

/// A directory of this user's alone for the built-in no-op.
fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("taskhost-bench-{}-{:08x}", std::process::id(), rand::random::<u32>()));
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// One figure's line, unless JSON is asked for.
fn line(b: &BenchArgs, text: &str) {
    if !b.json {
        progress_done();
        println!("{text}");
    }
}

/// A bar on standard error when it is a terminal; None otherwise.
fn progress_bar() -> Option<impl Fn(Phase, u64, u64) + Sync> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(move |phase: Phase, done: u64, total: u64| {
        if total == 0 {
            return;
        }
        let filled = (done.min(total) * 30 / total) as usize;
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(30 - filled));
        let mut err = std::io::stderr();
        let _ = write!(err, "\r\x1b[2K{:<9} [{bar}] {done}/{total}", phase.as_str());
        let _ = err.flush();
    })
}

/// End the bar's line, if one is shown.
fn progress_done() {
    if std::io::stderr().is_terminal() {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
}
