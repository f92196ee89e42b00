//! Wiring: a store, a sandbox with its plugin catalog, and a clock, opened from one config.

use std::path::PathBuf;
use std::sync::Arc;

use crate::client::Client;
use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::plugins::{self, Catalog};
use crate::runner::{Worker, WorkerConfig};
use crate::sandbox::{Limits, Sandbox, SandboxConfig};
use crate::store::{self, SharedStore, StoreOptions};

#[derive(Debug, Clone)]
pub struct AppConfig {
    /// `sqlite://PATH`.
    pub database_url: String,
    pub plugins_dir: PathBuf,
    /// Compiled-artifact cache; None = [`plugins::default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    /// Apply migrations when opening the database.
    pub migrate: bool,
    pub sandbox: SandboxConfig,
    /// Limits of handlers without a manifest.
    pub limits: Limits,
}

impl AppConfig {
    pub fn new(database_url: impl Into<String>, plugins_dir: impl Into<PathBuf>) -> Self {
        AppConfig {
            database_url: database_url.into(),
            plugins_dir: plugins_dir.into(),
            cache_dir: None,
            migrate: true,
            sandbox: SandboxConfig::default(),
            limits: Limits::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct App {
    pub store: SharedStore,
    pub catalog: Arc<Catalog>,
    pub clock: SharedClock,
    pub client: Client,
}

impl App {
    /// Open the database (migrating it unless told not to) and build the sandbox. Plugins are
    /// loaded lazily; call [`Catalog::reload`] to load them all.
    pub async fn open(config: &AppConfig) -> Result<App> {
        Self::open_with_clock(config, Arc::new(SystemClock)).await
    }

    pub async fn open_with_clock(config: &AppConfig, clock: SharedClock) -> Result<App> {
        let store =
            store::open(&config.database_url, &StoreOptions { migrate: config.migrate, ..Default::default() }).await?;
        let sandbox_config = config.sandbox.clone();
        let sandbox = tokio::task::spawn_blocking(move || Sandbox::new(&sandbox_config))
            .await
            .map_err(|e| Error::Engine(format!("building the engine panicked: {e}")))??;
        let cache = config.cache_dir.clone().unwrap_or_else(plugins::default_cache_dir);
        let catalog = Arc::new(Catalog::new(Arc::new(sandbox), &config.plugins_dir, Some(cache), config.limits));
        let client = Client::new(store.clone(), catalog.clone(), clock.clone());
        Ok(App { store, catalog, clock, client })
    }

    pub fn worker(&self, config: WorkerConfig) -> Worker {
        Worker::new(self.store.clone(), self.catalog.clone(), self.clock.clone(), config)
    }
}
