//! The command line: arguments and one function per command.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand};
use taskhost::model::{NewTask, RunStatus, TaskFilter};
use taskhost::overseer::{Overseer, OverseerConfig};
use taskhost::runner::WorkerConfig;
use taskhost::{App, AppConfig};

use crate::output;

// No Debug: the database URL may hold a password.
#[derive(Parser)]
#[command(
    name = "taskhost",
    version,
    about = "A durable SQL task queue whose handlers are sandboxed WebAssembly components"
)]
pub struct Cli {
    /// Database URL: sqlite://PATH (created if missing).
    #[arg(long, global = true, env = "TASKHOST_DATABASE_URL", default_value = "sqlite://taskhost.db")]
    pub database_url: String,
    /// Directory of handler components (NAME.wasm, optional NAME.toml manifest).
    #[arg(long = "plugins", global = true, env = "TASKHOST_PLUGINS", default_value = "target/plugins")]
    pub plugins_dir: PathBuf,
    /// Where compiled components are cached [default: $XDG_CACHE_HOME/taskhost or ~/.cache/taskhost].
    #[arg(long, global = true, env = "TASKHOST_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The operator's configuration file: handler grants, limits above the defaults, plugin
    /// size and cache limits (see the README's Trust model).
    #[arg(long, global = true, env = "TASKHOST_CONFIG")]
    pub config: Option<PathBuf>,
    /// How long the first connection to a database server may take.
    #[arg(long, global = true, value_parser = humantime::parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// Do not create or update the tables at start.
    #[arg(long, global = true)]
    pub no_migrate: bool,
    /// Log filter (tracing's EnvFilter syntax), e.g. "info" or "taskhost=debug".
    #[arg(long, global = true, env = "TASKHOST_LOG", default_value = "warn")]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or update the tables, then exit.
    Migrate,
    /// Queue a task; prints its id.
    Add(AddArgs),
    /// Claim and run tasks until stopped (SIGINT/SIGTERM; SIGHUP reloads plugins).
    Worker(WorkerArgs),
    /// Run the maintenance services (liveness, run timeouts, retries, rotation).
    Overseer {
        /// Run each service once and exit.
        #[arg(long)]
        once: bool,
    },
    /// List tasks.
    List(ListArgs),
    /// Show a task with its runs.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Replay a dead letter (a task given up on).
    Retry { id: i64 },
    /// Load every plugin and say whether it can be used.
    Plugins {
        #[arg(long)]
        json: bool,
    },
    /// Run one task in the sandbox without a database and print the outcome.
    RunOnce {
        handler: String,
        #[arg(long, default_value = "{}")]
        data: String,
    },
    /// Queue a few example tasks, run a worker until they are done and show the outcome.
    Demo,
    /// Compile a component read on stdin and write the artifact on stdout: the bounded child
    /// process a worker compiles in (internal).
    #[command(hide = true)]
    CompileComponent {
        #[arg(long)]
        max_wasm_stack: usize,
    },
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The handler: a plugin name (NAME.wasm in the plugins directory).
    pub handler: String,
    /// The task's data, a JSON document.
    #[arg(long, default_value = "{}")]
    pub data: String,
    /// Run at this time (RFC 3339, e.g. 2026-01-02T03:04:05Z).
    #[arg(long, conflicts_with = "in_")]
    pub at: Option<DateTime<Utc>>,
    /// Run after this delay (e.g. 90s, 5m, 1h 30m).
    #[arg(long = "in", value_parser = humantime::parse_duration)]
    pub in_: Option<Duration>,
    #[arg(long, default_value_t = taskhost::model::DEFAULT_MAX_RETRIES)]
    pub max_retries: u32,
    #[arg(long, default_value = taskhost::model::DEFAULT_QUEUE)]
    pub queue: String,
    /// Lower runs first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// While a task with this key is unfinished, adding another returns the existing one.
    #[arg(long)]
    pub unique_key: Option<String>,
    #[arg(long)]
    pub queued_by: Option<String>,
    /// Time out a run after this long [default: 1 day].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub run_timeout: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Runs executed at once.
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Queues to claim from, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = taskhost::model::DEFAULT_QUEUE)]
    pub queues: Vec<String>,
    /// Most runs claimed in one round trip.
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_CLAIM_BATCH)]
    pub claim_batch: usize,
    /// Exit 0 once nothing is due or running.
    #[arg(long)]
    pub drain: bool,
    /// With --drain, also wait for runs due within this time (pending retries).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pub drain_horizon: Duration,
    /// Do not run the maintenance services in this process.
    #[arg(long)]
    pub no_overseer: bool,
    /// Rescan the plugins directory this often ("0s": only on SIGHUP).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub watch_plugins: Duration,
    /// How often an idle worker looks for due runs (SQLite, MySQL).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "50ms")]
    pub poll_interval: Duration,
    /// The same on PostgreSQL, where LISTEN/NOTIFY wakes idle workers: a safety net.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub notified_poll_interval: Duration,
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub heartbeat_interval: Duration,
    /// Time in-flight runs get to finish after SIGINT/SIGTERM.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub shutdown_grace: Duration,
    /// Guest memory in use at once, in MiB: each run holds its memory limit while it runs
    /// [default: concurrency × the default memory limit].
    #[arg(long)]
    pub memory_budget_mb: Option<u64>,
    /// Finish and exit when resident memory passes this many MiB [default: the memory budget + 512].
    #[arg(long)]
    pub rss_cap_mb: Option<u64>,
    /// At most this many runners live at once.
    #[arg(long, default_value_t = WorkerConfig::DEFAULT_RUNNER_LIMIT)]
    pub runner_limit: u32,
    /// A runner whose heartbeat is older than this is declared dead.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub heartbeat_horizon: Duration,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    pub status: Option<RunStatus>,
    #[arg(long)]
    pub queue: Option<String>,
    #[arg(long)]
    pub handler: Option<String>,
    /// Only dead letters: tasks given up on, with their last error.
    #[arg(long)]
    pub dead: bool,
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    #[arg(long)]
    pub json: bool,
}

impl Cli {
    fn app_config(&self) -> Result<AppConfig> {
        let mut c = AppConfig::new(&self.database_url, &self.plugins_dir);
        c.connect_timeout = self.connect_timeout;
        if let Some(path) = &self.config {
            c.policy = taskhost::config::Policy::load(path)?;
        }
        // Compile in a bounded child process of this same binary (by /proc/self/exe, which still
        // works after the file was replaced by an upgrade).
        let this = std::path::Path::new("/proc/self/exe");
        c.policy.compile.program = if this.exists() { Some(this.to_path_buf()) } else { std::env::current_exe().ok() };
        c.cache_dir = self.cache_dir.clone();
        c.migrate = !self.no_migrate;
        if let Command::Worker(w) = &self.command {
            // One pool slot per concurrent run, with room to spare.
            c.sandbox.pool_instances = c.sandbox.pool_instances.max((w.concurrency as u32).saturating_mul(2));
        }
        Ok(c)
    }
}

/// SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Reload plugins on SIGHUP.
fn reload_on_hangup(app: &App) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let catalog = app.catalog.clone();
        tokio::spawn(async move {
            let Ok(mut hup) = signal(SignalKind::hangup()) else {
                return;
            };
            while hup.recv().await.is_some() {
                let c = catalog.clone();
                if let Ok(reports) = tokio::task::spawn_blocking(move || c.reload()).await {
                    for r in reports {
                        match r.status {
                            Ok(()) => tracing::info!(plugin = %r.name, "plugin loaded"),
                            Err(e) => tracing::error!(plugin = %r.name, "plugin unusable: {e}"),
                        }
                    }
                }
            }
        });
    }
}

pub async fn run(cli: Cli) -> Result<()> {
    if let Command::CompileComponent { max_wasm_stack } = &cli.command {
        return Ok(taskhost::sandbox::compile::compile_stdin_to_stdout(*max_wasm_stack)?);
    }
    let config = cli.app_config()?;
    if let Command::RunOnce { handler, data } = &cli.command {
        return run_once(&config, handler, data).await;
    }
    let app = App::open(&config).await?;
    match cli.command {
        Command::Migrate => {
            if cli.no_migrate {
                app.store.migrate().await?;
            }
            println!("database is up to date");
        }
        Command::Add(a) => {
            let mut t = NewTask::new(a.handler, a.data)
                .with_max_retries(a.max_retries)
                .with_queue(a.queue)
                .with_priority(a.priority);
            t.queued_by = a.queued_by;
            t.unique_key = a.unique_key;
            t.run_timeout = a.run_timeout;
            t.scheduled_on = match (a.at, a.in_) {
                (Some(at), _) => Some(at),
                (None, Some(d)) => Some(Utc::now() + chrono::Duration::from_std(d).context("--in is too large")?),
                (None, None) => None,
            };
            let added = app.client.add(t).await?;
            println!("{}", added.id);
            if !added.created {
                eprintln!("an unfinished task with that unique key exists already: task {}", added.id);
            }
        }
        Command::Worker(w) => {
            reload_on_hangup(&app);
            // A worker that can run nothing would only turn every task it claims into a dead
            // letter: a wrong --plugins is refused at start.
            std::fs::read_dir(&cli.plugins_dir)
                .with_context(|| format!("cannot read the plugins directory {}", cli.plugins_dir.display()))?;
            let mut overseer = OverseerConfig::default();
            overseer.liveness.heartbeat_horizon = w.heartbeat_horizon;
            let cfg = WorkerConfig {
                concurrency: w.concurrency,
                claim_batch: w.claim_batch.max(1),
                queues: w.queues,
                drain: w.drain,
                drain_horizon: w.drain_horizon,
                overseer: (!w.no_overseer).then_some(overseer),
                watch_plugins: (!w.watch_plugins.is_zero()).then_some(w.watch_plugins),
                poll_interval: w.poll_interval,
                notified_poll_interval: w.notified_poll_interval,
                heartbeat_interval: w.heartbeat_interval,
                shutdown_grace: w.shutdown_grace,
                memory_budget_bytes: w.memory_budget_mb.map(|m| m.saturating_mul(1 << 20)),
                rss_cap_bytes: w.rss_cap_mb.map(|m| m.saturating_mul(1 << 20)),
                runner_limit: w.runner_limit,
                require_plugins: true,
                ..WorkerConfig::default()
            };
            let report = app.worker(cfg).run(shutdown_signal()).await?;
            eprintln!(
                "runner {} stopped ({:?}): {} runs finished, {} abandoned",
                report.runner_id, report.exit, report.runs_finished, report.runs_abandoned
            );
        }
        Command::Overseer { once } => {
            let overseer = Overseer::new(app.store.clone(), app.clock.clone(), OverseerConfig::default());
            if once {
                for (name, summary) in overseer.run_all_once().await? {
                    println!("{name}: {}", summary.unwrap_or_else(|| "nothing to do".into()));
                }
            } else {
                let (tx, rx) = tokio::sync::watch::channel(false);
                let handle = tokio::spawn(overseer.run_until(rx));
                shutdown_signal().await;
                let _ = tx.send(true);
                let _ = handle.await;
            }
        }
        Command::List(l) => {
            let filter =
                TaskFilter { status: l.status, queue: l.queue, handler: l.handler, dead: l.dead, limit: Some(l.limit) };
            let tasks = app.client.list(&filter).await?;
            let mut rows = Vec::with_capacity(tasks.len());
            for t in tasks {
                let runs = app.store.runs_of(t.id).await?;
                rows.push((t, runs));
            }
            if l.json {
                println!("{}", output::tasks_json(&rows)?);
            } else {
                print!("{}", output::task_table(&rows));
            }
        }
        Command::Show { id, json } => {
            let (task, runs) = app.client.show(id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&output::task_json(&task, &runs)?)?);
            } else {
                print!("{}", output::task_detail(&task, &runs));
            }
        }
        Command::Retry { id } => {
            let run = app.client.retry(id).await?;
            println!("task {id} scheduled again as run {run}");
        }
        Command::Plugins { json } => {
            let catalog = app.catalog.clone();
            let reports = tokio::task::spawn_blocking(move || catalog.reload()).await?;
            if json {
                println!("{}", output::plugins_json(&reports)?);
            } else {
                print!("{}", output::plugin_table(&reports, &cli.plugins_dir));
            }
            if reports.iter().any(|r| r.status.is_err()) {
                bail!("some plugins cannot be used");
            }
        }
        Command::Demo => crate::demo::run(&app).await?,
        Command::RunOnce { .. } | Command::CompileComponent { .. } => {} // handled before opening the database
    }
    Ok(())
}

/// Run one task without a database.
async fn run_once(config: &AppConfig, handler: &str, data: &str) -> Result<()> {
    serde_json::from_str::<serde::de::IgnoredAny>(data).map_err(|e| taskhost::Error::InvalidJson(e.to_string()))?;
    let sandbox = taskhost::sandbox::Sandbox::new(&config.sandbox)?;
    let cache = config.cache_dir.clone().or_else(taskhost::plugins::default_cache_dir);
    let catalog = taskhost::plugins::Catalog::new(
        std::sync::Arc::new(sandbox),
        &config.plugins_dir,
        cache,
        config.policy.clone(),
    );
    let plugin = catalog.load(handler)?;
    let input = taskhost::sandbox::RunInput {
        task_id: 0,
        run_id: 0,
        attempt: 1,
        handler: handler.to_string(),
        data: data.to_string(),
        queued_by: None,
    };
    let r = catalog.sandbox().run(&plugin.pre, plugin.limits, &plugin.grants, input, None, None).await;
    print!("{}", output::run_once(&r));
    if let taskhost::sandbox::GuestOutcome::Failed(f) = r.outcome {
        bail!("{}: {}", f.code, f.message);
    }
    Ok(())
}
