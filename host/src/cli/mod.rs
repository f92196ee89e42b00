//! The command line: one function per command; the arguments are in [`args`].

use anyhow::{bail, Context, Result};
use chrono::Utc;
use taskhost::model::{NewTask, TaskFilter};
use taskhost::overseer::{Overseer, OverseerConfig};
use taskhost::runner::WorkerConfig;
use taskhost::{App, AppConfig};

use crate::output;

mod args;
pub use args::*;

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
