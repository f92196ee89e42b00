//! Wiring: a store, a sandbox with its plugin catalog, and a clock, opened from one config.

use std::path::PathBuf;
use std::sync::Arc;

use crate::client::Client;
use crate::clock::{ServerClock, SharedClock, SystemClock};
use crate::config::Policy;
use crate::error::{Error, Result};
use crate::plugins::{self, Catalog};
use crate::runner::{Worker, WorkerConfig};
use crate::sandbox::{Sandbox, SandboxConfig};
use crate::store::{self, DataLimitWrite, SharedStore, StoreOptions};

/// What [`App::open`] needs: the database, the plugins directory, the sandbox and the operator's policy.
#[derive(Clone)]
pub struct AppConfig {
    /// `sqlite://PATH`.
    pub database_url: String,
    /// The plugins directory (`NAME.wasm`, `NAME.toml`).
    pub plugins_dir: PathBuf,
    /// Compiled-artifact cache; None = [`plugins::default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// Apply migrations when opening the database.
    pub migrate: bool,
    /// The sandbox's engine and pool.
    pub sandbox: SandboxConfig,
    /// The operator's limits and grants ([`Policy::load`] reads them from a file).
    pub policy: Policy,
    /// How long the first connection to a database server may take.
    pub connect_timeout: std::time::Duration,
}

impl std::fmt::Debug for AppConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppConfig")
            .field("database_url", &store::redact(&self.database_url))
            .field("plugins_dir", &self.plugins_dir)
            .field("cache_dir", &self.cache_dir)
            .field("migrate", &self.migrate)
            .finish_non_exhaustive()
    }
}

impl AppConfig {
    /// The defaults, with this database and plugins directory.
    pub fn new(database_url: impl Into<String>, plugins_dir: impl Into<PathBuf>) -> Self {
        AppConfig {
            database_url: database_url.into(),
            plugins_dir: plugins_dir.into(),
            cache_dir: None,
            migrate: true,
            sandbox: SandboxConfig::default(),
            policy: Policy::default(),
            connect_timeout: StoreOptions::DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// An open host: the store, the plugins, the clock and the client over them.
#[derive(Debug, Clone)]
pub struct App {
    /// The database.
    pub store: SharedStore,
    /// The plugins loaded into the sandbox.
    pub catalog: Arc<Catalog>,
    /// The time every part reads.
    pub clock: SharedClock,
    /// Queueing and reading tasks, checked.
    pub client: Client,
}

impl App {
    /// Open the database (migrating it unless told not to) and build the sandbox. Plugins are
    /// loaded lazily; call [`Catalog::reload`] to load them all. On a database server every part
    /// reads the server's time ([`ServerClock`], read now and at each heartbeat); on SQLite,
    /// this machine's.
    pub async fn open(config: &AppConfig) -> Result<App> {
        Self::open_with_clock(config, Arc::new(ServerClock::new(Arc::new(SystemClock)))).await
    }

    /// [`App::open`], every part reading the time from `clock` (tests move it; a
    /// [`ServerClock`] is set from the database's time before anything reads it).
    pub async fn open_with_clock(config: &AppConfig, clock: SharedClock) -> Result<App> {
        let store = store::open(
            &config.database_url,
            &StoreOptions {
                migrate: config.migrate,
                connect_timeout: config.connect_timeout,
                max_value_bytes: config.policy.largest_value_bytes(),
                ..Default::default()
            },
        )
        .await?;
        if !config.migrate {
            store.check_migrated().await?;
        }
        store::sync_clock(&*store, &*clock).await?;
        let catalog = Self::open_catalog(config).await?;
        let client = Client::new(store.clone(), catalog.clone(), clock.clone());
        Ok(App { store, catalog, clock, client })
    }

    /// Write the configuration's `[tasks] max_data_bytes` where `taskhost_add` in SQL reads it
    /// (the database's functions cannot read the file), saying so when it changes: what the
    /// `worker`, `serve` and `migrate` commands do, not a command run once (whose file may leave
    /// the limit out). A failure is said and stops nothing: a role that may not write it still
    /// runs tasks.
    /// What it says, when it changed.
    pub async fn tell_sql_data_limit(store: &dyn store::Store, bytes: usize) -> Option<String> {
        let was = match store.set_sql_data_limit(bytes as u64).await {
            Ok(DataLimitWrite::Unchanged) => return None,
            Ok(DataLimitWrite::Replaced(was)) => was.to_string(),
            Ok(DataLimitWrite::WasUnset) => "unset".to_string(),
            Err(e) => {
                tracing::warn!(
                    "telling taskhost_add in SQL the limit of [tasks] max_data_bytes failed (it keeps the limit the \
                     database holds): {e}"
                );
                return None;
            }
        };
        let said =
            format!("taskhost_add now takes task data of at most {bytes} bytes ([tasks] max_data_bytes; was {was})");
        tracing::info!("{said}");
        Some(said)
    }

    /// Say, as a warning, when the database's check of handlers queued in SQL is not what the
    /// file's `[tasks] sql_add_handlers` asks (only `taskhost migrate` changes it: it is DDL, which
    /// waits for callers' transactions): what the `worker` and `serve` commands do. What it said.
    pub async fn warn_sql_add_handlers(
        store: &dyn store::Store,
        asked: crate::config::SqlAddHandlers,
    ) -> Option<String> {
        let deployed_only = asked == crate::config::SqlAddHandlers::Deployed;
        let (there, marked) = match store.sql_add_check().await {
            Ok(check) => (check.deployed_only, check.host_marked),
            Err(e) => {
                tracing::warn!("reading the database's check of handlers queued in SQL failed: {e}");
                return None;
            }
        };
        if there && !marked {
            tracing::error!(
                "the database refuses tasks queued for handlers not deployed, and this process's sessions are not \
                 marked as taskhost's (taskhost.host = on on PostgreSQL, set as a connection opens, which a pooler \
                 in transaction mode does not keep): its own tasks for a plugin's handler, a run's children among them, would be refused"
            );
        }
        if there == deployed_only {
            return None;
        }
        let said = if deployed_only {
            "[tasks] sql_add_handlers = \"deployed\", but taskhost_add in SQL takes any handler: run `taskhost \
             migrate` with this file"
        } else {
            "[tasks] sql_add_handlers = \"any\", but taskhost_add in SQL refuses a handler not deployed: run \
             `taskhost migrate` with this file to take any"
        };
        tracing::warn!("{said}");
        Some(said.to_string())
    }

    /// The sandbox and the plugins directory alone, without a database (for checking plugins or
    /// running a handler once).
    pub async fn open_catalog(config: &AppConfig) -> Result<Arc<Catalog>> {
        let sandbox_config = config.sandbox.clone();
        let sandbox = tokio::task::spawn_blocking(move || Sandbox::new(&sandbox_config))
            .await
            .map_err(|e| Error::Engine(format!("building the engine panicked: {e}")))??;
        let cache = config.cache_dir.clone().or_else(plugins::default_cache_dir);
        Ok(Arc::new(Catalog::new(Arc::new(sandbox), &config.plugins_dir, cache, config.policy.clone())))
    }

    /// Read the database's time again every `every`, for a long-lived process that neither
    /// heartbeats nor holds a lease (`serve`); ends when the returned handle is aborted.
    pub fn follow_server_time(&self, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let (store, clock) = (self.store.clone(), self.clock.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                if let Err(e) = store::sync_clock(&*store, &*clock).await {
                    tracing::warn!("reading the database's time failed: {e}");
                }
            }
        })
    }

    /// A worker over this app's store and plugins.
    pub fn worker(&self, config: WorkerConfig) -> Worker {
        Worker::new(self.store.clone(), self.catalog.clone(), self.clock.clone(), config)
    }
}
