//! The plugins directory: every `NAME.wasm` in it is a handler named `NAME`.
//!
//! Everything in the directory is untrusted: files are read only if they are regular files (never
//! through a symbolic link) no larger than the operator allows, and no error quotes what they
//! hold. Loading a plugin reads it, takes its sha256, compiles it (or loads the compiled artifact
//! this host cached for that digest and engine), checks it against the `task-handler` world and
//! reads its optional manifest `NAME.toml`, which may only lower the limits the operator's
//! configuration ([`crate::config::Policy`]) gives it:
//!
//! ```toml
//! [limits]            # every key optional
//! fuel = 500_000_000
//! memory_mb = 64
//! deadline = "10s"
//! table_elements = 10000
//! max_results_bytes = 65536
//! max_log_bytes = 16384
//! ```
//!
//! A reload keeps the previous good version of a plugin whose new file is broken.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use wasmtime::component::Component;

mod checked;
mod deployed;
mod files;
pub mod publish;
mod reload;
mod watch;
pub mod world;

pub use crate::cache::default_cache_dir;
use checked::CheckCache;
pub use checked::{Checked, Surveyed};
pub use deployed::short;
pub use files::check_dir;
#[cfg(feature = "serve")]
pub(crate) use files::MAX_MANIFEST_BYTES;

use crate::cache;
use crate::config::Policy;
use crate::error::{Error, Result};
use crate::sandbox::compile::{Compiler, Incremental};
use crate::sandbox::{Grants, HostState, Limits, Sandbox, TaskHandlerPre};

/// A loaded, checked handler.
pub struct Plugin {
    /// Its name: the file's stem.
    pub name: String,
    /// Its file.
    pub path: PathBuf,
    /// sha256 of the component file, hex.
    pub digest: String,
    /// The limits its runs get (the operator's, lowered by its manifest).
    pub limits: Limits,
    /// What the manifest grants; nothing by default.
    pub grants: Grants,
    /// The component, checked and ready to instantiate.
    pub pre: TaskHandlerPre<HostState>,
    manifest_text: Option<String>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin").field("name", &self.name).field("digest", &self.digest).finish_non_exhaustive()
    }
}

/// What loading one plugin file gave.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The plugin.
    pub name: String,
    /// The sha256 of its file, when it could be read.
    pub digest: Option<String>,
    /// Ok, or why the plugin cannot be used.
    pub status: std::result::Result<(), String>,
    /// The compiled artifact came from the cache.
    pub cached: bool,
    /// How long loading it took.
    pub load_time: Duration,
}

/// Count a load, and time a compile.
fn loaded_metrics(r: &LoadReport) {
    let m = crate::metrics::global();
    let source = if r.cached { "cache" } else { "compiled" };
    let outcome = if r.status.is_ok() { "ok" } else { "refused" };
    m.add(crate::metrics::Counter::PluginLoads, &[("outcome", outcome), ("source", source)], 1);
    if r.status.is_ok() && !r.cached {
        m.observe(crate::metrics::Histogram::CompileTime, &[], r.load_time.as_secs_f64());
    }
}

pub use crate::model::valid_handler_name as valid_name;

/// The plugins of one directory, loaded into one sandbox.
pub struct Catalog {
    sandbox: Arc<Sandbox>,
    dir: PathBuf,
    cache_dir: Option<PathBuf>,
    policy: Arc<Policy>,
    compiler: Compiler,
    loaded: RwLock<HashMap<String, Arc<Plugin>>>,
    progress: std::sync::OnceLock<CompileProgress>,
    checks: CheckCache,
    deployed: RwLock<deployed::Deployed>,
    versions_loaded: tokio::sync::watch::Sender<u64>,
}

/// Told when a compile starts, with the plugin's name and size in bytes; what it returns is
/// dropped when the compile ends. The command line shows a spinner on a terminal with it.
pub type CompileProgress = Arc<dyn Fn(&str, usize) -> Box<dyn std::any::Any + Send> + Send + Sync>;

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Catalog {
    /// `cache_dir`: where compiled artifacts are kept (None = compile on every load); `policy`:
    /// the operator's limits and grants.
    pub fn new(sandbox: Arc<Sandbox>, dir: impl Into<PathBuf>, cache_dir: Option<PathBuf>, policy: Policy) -> Self {
        let compiler = Compiler::new(policy.compile.clone());
        Catalog {
            sandbox,
            dir: dir.into(),
            cache_dir,
            policy: Arc::new(policy),
            compiler,
            loaded: RwLock::new(HashMap::new()),
            progress: std::sync::OnceLock::new(),
            checks: CheckCache::default(),
            deployed: RwLock::default(),
            versions_loaded: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Be told of each compile (once; later calls are ignored).
    pub fn set_compile_progress(&self, progress: CompileProgress) {
        let _ = self.progress.set(progress);
    }

    /// The plugins directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The sandbox the plugins run in.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// The operator's limits and grants this catalog applies.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The names of the loaded plugins, sorted: the handlers a worker claims tasks for (a
    /// deployed handler once its active version is loaded; a file of its name is not used).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.served().into_keys().collect();
        names.sort();
        names
    }

    /// The loaded plugins with the sha256 of each component: what a runner records it serves.
    pub fn served(&self) -> crate::store::Served {
        let mut served: crate::store::Served = self.deployed_ready().into_iter().collect();
        let loaded = self.loaded.read().unwrap_or_else(|p| p.into_inner());
        let files = loaded.iter().filter(|(name, _)| !self.is_deployed(name));
        served.extend(files.map(|(name, p)| (name.clone(), p.digest.clone())));
        served
    }

    /// The loaded plugin of that name.
    pub fn get(&self, name: &str) -> Option<Arc<Plugin>> {
        self.loaded.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// The plugin of that name, loading it from the directory if it is not loaded yet.
    /// Blocking (it may compile): call from a blocking context.
    pub fn get_or_load(&self, name: &str) -> Result<Arc<Plugin>> {
        if let Some(p) = self.get(name) {
            return Ok(p);
        }
        self.load(name)
    }

    /// Load (or reload) one plugin by name.
    pub fn load(&self, name: &str) -> Result<Arc<Plugin>> {
        let path = self.path_of(name)?;
        let loaded = self.load_file(name, &path, true).and_then(|l| l.ok_or_else(|| "not compiled".to_string()));
        let (plugin, _) = loaded.map_err(|reason| Error::BrokenHandler { name: name.into(), reason })?;
        self.loaded.write().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), plugin.clone());
        Ok(plugin)
    }

    /// Check that a handler exists and implements the world without compiling it (see
    /// [`world`]): what queueing a task needs. A loaded plugin passes at once, and so does one
    /// whose files did not change since they were last checked (see `checked.rs`). Blocking (it
    /// may read and validate the file).
    pub fn check(&self, name: &str) -> Result<()> {
        if self.get(name).is_some() {
            return Ok(());
        }
        let path = self.path_of(name)?;
        let checked = self.checks.check(&self.policy, name, &path).and_then(|c| c.types);
        checked.map_err(|reason| Error::BrokenHandler { name: name.into(), reason })
    }

    /// `NAME.wasm` in the directory, if the name is a plugin name and the file is there.
    fn path_of(&self, name: &str) -> Result<PathBuf> {
        if !valid_name(name) {
            return Err(Error::HandlerName(name.to_string()));
        }
        let path = self.dir.join(format!("{name}.wasm"));
        if std::fs::symlink_metadata(&path).is_err() {
            self.check_dir()?;
            return Err(Error::UnknownHandler { name: name.to_string(), dir: self.dir.clone() });
        }
        Ok(path)
    }

    /// Whether the plugins directory can be read; the error says why not (missing, not a
    /// directory, not allowed).
    pub fn check_dir(&self) -> Result<()> {
        check_dir(&self.dir)
    }

    /// Compile, or load this host's cached artifact for the same digest and engine settings
    /// (None: not cached, and not `may_compile`).
    fn compile(
        &self,
        name: &str,
        bytes: &[u8],
        digest: &str,
        may_compile: bool,
    ) -> std::result::Result<Option<(Component, bool)>, String> {
        let engine = self.sandbox.engine();
        let cached = self
            .cache_dir
            .as_ref()
            .filter(|d| cache::usable_dir(d))
            .map(|d| d.join(format!("{digest}-{}.cwasm", self.sandbox.engine_fingerprint())));
        if let Some(path) = cached.as_ref().filter(|p| cache::trusted_artifact(p)) {
            // SAFETY: the file name binds the source digest and the engine fingerprint, and the
            // file and its directory are this user's and writable by no one else (checked just
            // above), so the artifact is one this host wrote for this engine.
            match unsafe { Component::deserialize_file(engine, path) } {
                Ok(c) => {
                    cache::touch(path);
                    return Ok(Some((c, true)));
                }
                Err(e) => tracing::warn!(path = %path.display(), "ignoring unusable cached artifact: {e:#}"),
            }
        }
        if !may_compile {
            return Ok(None);
        }
        // Tens of seconds for an interpreter's component: said at its start and end.
        let mb = bytes.len() as f64 / f64::from(1 << 20);
        tracing::info!(plugin = name, "compiling {name} ({mb:.1} MB), once: the result is cached");
        let started = std::time::Instant::now();
        let shown = self.progress.get().map(|p| p(name, bytes.len()));
        let incremental = cached.as_deref().map(|p| Incremental::beside(p, self.policy.cache_max_bytes));
        let component = self.compiler.compile(engine, bytes, self.sandbox.max_wasm_stack(), incremental.as_ref());
        drop(shown);
        let took = crate::text::duration(started.elapsed());
        match &component {
            Ok(_) => tracing::info!(
                plugin = name,
                took_ms = started.elapsed().as_millis() as u64,
                "compiled {name} in {took}"
            ),
            Err(e) => tracing::info!(plugin = name, "compiling {name} failed after {took}: {e}"),
        }
        let component = component?;
        if let Some(path) = &cached {
            if let Err(e) = cache::write(path, &component, self.policy.cache_max_bytes) {
                tracing::warn!(path = %path.display(), "cannot cache the compiled component: {e}");
            }
        }
        Ok(Some((component, false)))
    }
}
