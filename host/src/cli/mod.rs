//! The command line: one function per command; the arguments are in [`args`].

use anyhow::{bail, Context, Result};
use chrono::Utc;
use taskhost::model::{TaskFilter, TaskState};
use taskhost::overseer::OverseerConfig;
use taskhost::{App, AppConfig};

use crate::output;
use crate::shutdown::shutdown_signal;

mod args;
mod bench;
mod bulk;
mod commands;
mod deploy;
mod dev;
pub mod file;
mod limits;
mod many;
mod migrate;
mod new;
mod progress;
mod schedule;
mod task_args;
pub mod telemetry;
mod values;
mod worker_args;
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
        let concurrency = match &self.command {
            Command::Worker(w) => Some(w.concurrency),
            Command::Bench(b) => Some(b.concurrency),
            _ => None,
        };
        if let Some(concurrency) = concurrency {
            // One pool slot per concurrent run, with room to spare.
            c.sandbox.pool_instances = c.sandbox.pool_instances.max((concurrency as u32).saturating_mul(2));
        }
        Ok(c)
    }
}

/// The overseer's settings: the file's `[overseer]` (or the defaults), the command's flags, and
/// the schedules the file declares (when there is a file: one without schedules declares none).
fn overseer_config(cli: &Cli, app: &App) -> OverseerConfig {
    let policy = app.catalog.policy();
    let mut c = policy.overseer.clone();
    c.schedules.declared = cli.config.is_some().then(|| policy.schedules.clone());
    let (retention, horizon) = match &cli.command {
        Command::Worker(w) => (w.retention, w.heartbeat_horizon),
        Command::Overseer { retention, .. } => (*retention, None),
        _ => (None, None),
    };
    c.rotation.retention = retention.unwrap_or(c.rotation.retention);
    c.liveness.heartbeat_horizon = horizon.unwrap_or(c.liveness.heartbeat_horizon);
    c
}

/// A spinner while a plugin compiles, on a terminal.
fn show_compiles(catalog: &taskhost::plugins::Catalog) {
    if let Some(p) = progress::on_terminal() {
        catalog.set_compile_progress(p);
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
                catalog.clone().reload_and_log().await;
            }
        });
    }
}

/// The plugins directory of a demo, or of a worker whose SQLite file does not exist yet, is
/// checked before the database is opened: opening a SQLite file makes it. (A worker of a database
/// that exists may run the handlers deployed into it alone: it asks once the database is open.)
fn check_dir_before_opening(command: &Command, config: &AppConfig) -> Result<()> {
    let new_file = taskhost::store::opening_makes_a_file(&config.database_url);
    if matches!(command, Command::Demo) || (matches!(command, Command::Worker(_)) && new_file) {
        taskhost::plugins::check_dir(&config.plugins_dir)?;
    }
    Ok(())
}

pub async fn run(cli: Cli) -> Result<()> {
    if let Command::CompileComponent { max_wasm_stack, incremental_cache, incremental_max_bytes } = &cli.command {
        let incremental = incremental_cache
            .clone()
            .map(|dir| taskhost::sandbox::compile::Incremental { dir, max_bytes: *incremental_max_bytes });
        return Ok(taskhost::sandbox::compile::compile_stdin_to_stdout(*max_wasm_stack, incremental)?);
    }
    if let Command::New { language, name, dir, http } = &cli.command {
        return new::run(*language, name, dir.as_deref(), *http);
    }
    let config = cli.app_config()?;
    if let Command::Bench(b) = cli.command {
        // It opens the database itself: with no handler named, on a plugins directory of its own.
        return bench::run(config, cli.config.as_deref(), b).await;
    }
    // Commands that need no database do not open one.
    match &cli.command {
        Command::RunOnce { handler, data } => return run_once(&config, handler, &read_data(data)?, None).await,
        Command::Dev(args) => return dev::run(args, &config).await,
        Command::Plugins { json } => return plugins(&config, *json).await,
        Command::Migrate => return migrate::migrate(&config).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut command, "taskhost", &mut std::io::stdout());
            return Ok(());
        }
        _ => {}
    }
    check_dir_before_opening(&cli.command, &config)?;
    let app = App::open(&config).await?;
    show_compiles(&app.catalog);
    // The processes that queue with this file's limit tell SQL's `taskhost_add` it; a command run
    // once, perhaps without the file, does not.
    if matches!(cli.command, Command::Worker(_) | Command::Serve { .. }) {
        App::tell_sql_data_limit(&*app.store, config.policy.max_data_bytes).await;
        App::warn_sql_add_handlers(&*app.store, config.policy.sql_add_handlers).await;
    }
    let overseer_config = overseer_config(&cli, &app);
    on_app(&app, cli.command, overseer_config, cli.log_format).await
}

/// Run a command that works on the opened database.
async fn on_app(app: &App, command: Command, overseer_config: OverseerConfig, log_format: LogFormat) -> Result<()> {
    match command {
        Command::Add(a) => commands::add(app, a).await?,
        Command::Worker(w) => commands::worker(app, w, overseer_config, log_format).await?,
        Command::Overseer { once, apply, .. } => commands::overseer(app, overseer_config, once, apply).await?,
        Command::List(l) => list(app, l).await?,
        Command::Show { id, json } => commands::show(app, id, json).await?,
        Command::Schedule { command } => schedule::run(app, command).await?,
        Command::Queues { json, keys: false, .. } => commands::queues(app, json).await?,
        Command::Queues { json, keys: true, queue, limit } => {
            commands::keys(app, queue.as_deref(), limit, json).await?
        }
        Command::Limits { command } => {
            limits::run(app, command.unwrap_or(limits::LimitsCommand::List { json: false })).await?
        }
        Command::Deploy { path, name, compile, json } => {
            deploy::deploy(app, &path, name.as_deref(), compile, json).await?
        }
        Command::Versions { name, history, json } => deploy::versions(app, &name, history, json).await?,
        Command::Rollback { name, to } => deploy::rollback(app, &name, to.as_deref()).await?,
        Command::Pause { queue } => commands::pause(app, &queue).await?,
        Command::Resume { queue } => commands::resume(app, &queue).await?,
        Command::Stats { handler, queue, json } => commands::stats(app, handler, queue, json).await?,
        Command::Cancel(c) => bulk::cancel(app, c).await?,
        Command::Retry(r) => bulk::retry(app, r).await?,
        Command::Signal { id, name, data } => commands::signal(app, id, &name, &data).await?,
        Command::DeleteFinished(d) => bulk::delete_finished(app, d).await?,
        Command::Demo => crate::demo::run(app).await?,
        Command::Serve { listen, header_timeout, request_timeout, max_connections } => {
            let limits = taskhost::api::ServerLimits {
                header_timeout,
                request_timeout,
                max_connections: max_connections as usize,
            };
            serve(app, listen, limits).await?
        }
        // Handled before opening the database.
        Command::RunOnce { .. }
        | Command::Dev(_)
        | Command::Plugins { .. }
        | Command::Migrate
        | Command::Completions { .. }
        | Command::New { .. }
        | Command::Bench(_)
        | Command::CompileComponent { .. } => {}
    }
    Ok(())
}

/// Who may call what listens on `addr`: the file's tokens; without any, only loopback.
fn open_to(app: &App, addr: std::net::SocketAddr) -> Result<taskhost::config::api::ApiSection> {
    let access = app.catalog.policy().api.clone();
    if access.tokens.is_empty() && !addr.ip().is_loopback() {
        bail!(
            "refusing to listen on {addr} without a token: set [api] tokens in the configuration file, or listen on \
             127.0.0.1"
        );
    }
    Ok(access)
}

async fn listen(addr: std::net::SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))
}

/// A worker's `--metrics`: `/metrics` served in the background. It ends with the process, so a
/// scrape never holds up the worker's exit.
async fn serve_metrics(app: &App, addr: std::net::SocketAddr) -> Result<()> {
    let router = taskhost::api::metrics_router(app.client.clone(), open_to(app, addr)?);
    let bound = listen(addr).await?;
    eprintln!("serving metrics on http://{}/metrics", bound.local_addr()?);
    let limits = taskhost::api::ServerLimits::default();
    tokio::spawn(taskhost::api::serve(bound, router, limits, std::future::pending()));
    Ok(())
}

/// `serve`: the HTTP API until a signal. Listening beyond this machine needs tokens.
async fn serve(app: &App, addr: std::net::SocketAddr, limits: taskhost::api::ServerLimits) -> Result<()> {
    let access = open_to(app, addr)?;
    let listener = listen(addr).await?;
    let bound = listener.local_addr()?;
    let who = if access.tokens.is_empty() { "anyone on this machine" } else { "callers with a token" };
    eprintln!("serving the API on http://{bound}/api/v1 to {who}");
    let router = taskhost::api::router(app.client.clone(), access);
    let clock = app.follow_server_time(std::time::Duration::from_secs(30));
    let served = taskhost::api::serve(listener, router, limits, shutdown_signal()).await;
    clock.abort();
    Ok(served?)
}

/// `list`, once or (`--watch`) again and again until a signal.
async fn list(app: &App, l: ListArgs) -> Result<()> {
    // A dead letter is in state dead: another state with --dead would list nothing, silently.
    if let Some(state) = l.state.filter(|s| l.dead && *s != TaskState::Dead) {
        anyhow::bail!("--dead lists dead letters, which are in state dead, not {state}: give one or the other");
    }
    let filter = TaskFilter {
        status: l.status,
        state: l.state,
        queue: l.queue,
        handler: l.handler,
        dead: l.dead,
        text: l.contains,
        limit: Some(l.limit),
        offset: l.offset,
        newest_first: !l.oldest_first,
        after: None,
        parent: l.parent,
    };
    let render = || async {
        let tasks = app.client.list(&filter).await?;
        let mut rows = Vec::with_capacity(tasks.len());
        for t in tasks {
            let runs = app.store.runs_of(t.id).await?;
            rows.push((t, runs));
        }
        // Watched, JSON is one line a frame.
        anyhow::Ok(if l.json {
            output::tasks_json(&rows, l.watch.is_none())? + "\n"
        } else {
            output::task_table(&rows)
        })
    };
    let Some(every) = l.watch else {
        print!("{}", render().await?);
        return Ok(());
    };
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        let frame = render().await?;
        if terminal {
            // Home and clear, then the frame: the list redrawn in place.
            print!("\x1b[H\x1b[2J{} every {}\n{frame}", Utc::now().format("%H:%M:%S"), taskhost::text::duration(every));
        } else {
            print!("{frame}");
            if !l.json {
                println!();
            }
        }
        std::io::Write::flush(&mut std::io::stdout())?;
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// `--data`: the JSON itself, `@PATH` for a file's contents, or `-` for standard input.
fn read_data(arg: &str) -> Result<String> {
    if arg == "-" {
        let mut data = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut data)
            .context("reading the task's data from stdin")?;
        return Ok(data);
    }
    match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading the task's data from {path}")),
        None => Ok(arg.to_string()),
    }
}

/// Load every plugin and say whether each can be used.
async fn plugins(config: &AppConfig, json: bool) -> Result<()> {
    let catalog = App::open_catalog(config).await?;
    show_compiles(&catalog);
    catalog.check_dir()?;
    let limits = catalog.policy().run_limits.clone();
    let reports = tokio::task::spawn_blocking(move || catalog.reload()).await?;
    if json {
        println!("{}", output::plugins_json(&reports, &limits)?);
    } else {
        print!("{}", output::plugin_table(&reports, &config.plugins_dir, &limits));
    }
    if reports.iter().any(|r| r.status.is_err()) {
        bail!("some plugins cannot be used");
    }
    Ok(())
}

/// The command failed and already said why: exit 1 without another message.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed (reported above)")
    }
}

impl std::error::Error for Reported {}

/// Run one task without a database and print how it went; `lend` is a directory the run may read
/// at [`DEV_SOURCE`](taskhost::sandbox::grants::DEV_SOURCE) (`taskhost dev`'s handler source),
/// besides what the handler is granted.
async fn run_once(config: &AppConfig, handler: &str, data: &str, lend: Option<&std::path::Path>) -> Result<()> {
    match run_once_outcome(config, handler, data, lend).await? {
        taskhost::sandbox::GuestOutcome::Failed(_) | taskhost::sandbox::GuestOutcome::Stopped => Err(Reported.into()),
        taskhost::sandbox::GuestOutcome::Success(_)
        | taskhost::sandbox::GuestOutcome::Snoozed(_)
        | taskhost::sandbox::GuestOutcome::Awaiting(_) => Ok(()),
    }
}

/// [`run_once`], the outcome returned after it is printed.
async fn run_once_outcome(
    config: &AppConfig,
    handler: &str,
    data: &str,
    lend: Option<&std::path::Path>,
) -> Result<taskhost::sandbox::GuestOutcome> {
    serde_json::from_str::<serde::de::IgnoredAny>(data).map_err(|e| taskhost::Error::InvalidJson(e.to_string()))?;
    let catalog = App::open_catalog(config).await?;
    show_compiles(&catalog);
    let plugin = catalog.load(handler)?;
    let mut grants = plugin.grants.clone();
    if let Some(dir) = lend {
        let dir = dir.canonicalize().with_context(|| format!("cannot lend {} to the run", dir.display()))?;
        let source = taskhost::sandbox::grants::DEV_SOURCE.to_string();
        grants.dirs.push((dir, source, taskhost::sandbox::grants::DirMode::ReadOnly));
    }
    let input = taskhost::sandbox::RunInput {
        task_id: 0,
        run_id: 0,
        attempt: 1,
        handler: handler.to_string(),
        data: data.to_string(),
        queued_by: None,
        queueing: Default::default(),
    };
    let r = catalog.sandbox().run(&plugin.pre, plugin.limits, &grants, input, Default::default()).await;
    print!("{}", output::run_once(&r));
    Ok(r.outcome)
}
