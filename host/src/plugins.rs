//! The plugins directory: every `NAME.wasm` in it is a handler named `NAME`.
//!
//! Loading a plugin reads it, takes its sha256, compiles it (or loads the compiled artifact this
//! host cached for that digest and engine), checks it against the `task-handler` world and reads
//! its optional manifest `NAME.toml`:
//!
//! ```toml
//! [limits]            # every key optional; defaults in the README
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
use std::time::{Duration, Instant};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::error::{Error, Result};
use crate::sandbox::{Grants, GrantsManifest, HostState, LimitOverrides, Limits, Sandbox, TaskHandlerPre};

/// A loaded, checked handler.
pub struct Plugin {
    pub name: String,
    pub path: PathBuf,
    /// sha256 of the component file, hex.
    pub digest: String,
    pub limits: Limits,
    /// What the manifest grants; nothing by default.
    pub grants: Grants,
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
    pub name: String,
    pub digest: Option<String>,
    /// Ok, or why the plugin cannot be used.
    pub status: std::result::Result<(), String>,
    /// The compiled artifact came from the cache.
    pub cached: bool,
    pub load_time: Duration,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    limits: LimitOverrides,
    #[serde(default)]
    grants: GrantsManifest,
}

/// Whether `name` can name a plugin: letters, digits, `-` and `_` (no paths).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The plugins of one directory, loaded into one sandbox.
pub struct Catalog {
    sandbox: Arc<Sandbox>,
    dir: PathBuf,
    cache_dir: Option<PathBuf>,
    default_limits: Limits,
    loaded: RwLock<HashMap<String, Arc<Plugin>>>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Catalog {
    /// `cache_dir`: where compiled artifacts are kept (None = compile on every load).
    pub fn new(
        sandbox: Arc<Sandbox>,
        dir: impl Into<PathBuf>,
        cache_dir: Option<PathBuf>,
        default_limits: Limits,
    ) -> Self {
        Catalog { sandbox, dir: dir.into(), cache_dir, default_limits, loaded: RwLock::new(HashMap::new()) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
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
        if !valid_name(name) {
            return Err(Error::invalid("handler name", format!("{name:?}: use letters, digits, '-' and '_'")));
        }
        let path = self.dir.join(format!("{name}.wasm"));
        if !path.is_file() {
            return Err(Error::UnknownHandler { name: name.to_string(), dir: self.dir.clone() });
        }
        let (plugin, _) =
            self.load_file(name, &path).map_err(|reason| Error::BrokenHandler { name: name.into(), reason })?;
        self.loaded.write().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), plugin.clone());
        Ok(plugin)
    }

    /// Scan the directory: load new and changed plugins, drop plugins whose file is gone, and
    /// keep the previous version of a plugin whose new file is broken. Blocking.
    pub fn reload(&self) -> Vec<LoadReport> {
        let mut reports = Vec::new();
        let mut present = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), "cannot read the plugins directory: {e}");
                return reports;
            }
        };
        let mut files: Vec<(String, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
            .collect();
        files.sort();
        for (name, path) in files {
            present.push(name.clone());
            let started = Instant::now();
            if !valid_name(&name) {
                reports.push(LoadReport {
                    name,
                    digest: None,
                    status: Err("invalid plugin name: use letters, digits, '-' and '_'".into()),
                    cached: false,
                    load_time: started.elapsed(),
                });
                continue;
            }
            match self.load_file(&name, &path) {
                Ok((plugin, cached)) => {
                    reports.push(LoadReport {
                        name: name.clone(),
                        digest: Some(plugin.digest.clone()),
                        status: Ok(()),
                        cached,
                        load_time: started.elapsed(),
                    });
                    self.loaded.write().unwrap_or_else(|p| p.into_inner()).insert(name, plugin);
                }
                Err(reason) => {
                    if self.get(&name).is_some() {
                        tracing::warn!(plugin = %name, "new version is broken, keeping the previous one: {reason}");
                    }
                    reports.push(LoadReport {
                        name,
                        digest: file_digest(&path).ok(),
                        status: Err(reason),
                        cached: false,
                        load_time: started.elapsed(),
                    });
                }
            }
        }
        self.loaded.write().unwrap_or_else(|p| p.into_inner()).retain(|n, _| present.contains(n));
        reports
    }

    fn load_file(&self, name: &str, path: &Path) -> std::result::Result<(Arc<Plugin>, bool), String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let digest = hex::encode(Sha256::digest(&bytes));
        let manifest_path = path.with_extension("toml");
        let manifest_text = match std::fs::read_to_string(&manifest_path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read {}: {e}", manifest_path.display())),
        };
        if let Some(old) = self.get(name) {
            if old.digest == digest && old.manifest_text == manifest_text {
                return Ok((old, true));
            }
        }
        let manifest: Manifest = match &manifest_text {
            Some(t) => toml::from_str(t).map_err(|e| format!("invalid manifest {}: {e}", manifest_path.display()))?,
            None => Manifest::default(),
        };
        if !bytes.starts_with(b"\0asm") {
            return Err("not a WebAssembly file (bad magic number)".into());
        }
        let grants = manifest
            .grants
            .resolve(&self.dir)
            .map_err(|e| format!("invalid manifest {}: {e}", manifest_path.display()))?;
        let (component, cached) = self.compile(&bytes, &digest)?;
        let pre = self.sandbox.prepare(&component)?;
        let plugin = Plugin {
            name: name.to_string(),
            path: path.to_path_buf(),
            digest,
            limits: self.default_limits.with(&manifest.limits),
            grants,
            pre,
            manifest_text,
        };
        Ok((Arc::new(plugin), cached))
    }

    /// Compile, or load this host's cached artifact for the same digest and engine settings.
    fn compile(&self, bytes: &[u8], digest: &str) -> std::result::Result<(Component, bool), String> {
        let engine = self.sandbox.engine();
        let cached =
            self.cache_dir.as_ref().map(|d| d.join(format!("{digest}-{}.cwasm", self.sandbox.engine_fingerprint())));
        if let Some(path) = &cached {
            if path.is_file() {
                // SAFETY: the file name binds the source digest and the engine fingerprint, and
                // only this host writes into its cache directory (created owner-only), so the
                // artifact is one wasmtime produced for this engine.
                match unsafe { Component::deserialize_file(engine, path) } {
                    Ok(c) => return Ok((c, true)),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "ignoring unusable cached artifact: {e:#}")
                    }
                }
            }
        }
        let component = Component::new(engine, bytes).map_err(|e| format!("invalid component: {e:#}"))?;
        if let Some(path) = &cached {
            if let Err(e) = write_artifact(path, &component) {
                tracing::warn!(path = %path.display(), "cannot cache the compiled component: {e}");
            }
        }
        Ok((component, false))
    }
}

/// What the directory looks like: names, sizes and modification times of `*.wasm` and `*.toml`.
fn dir_fingerprint(dir: &Path) -> Vec<(String, u64, Option<std::time::SystemTime>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "wasm" || x == "toml"))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), meta.len(), meta.modified().ok()))
        })
        .collect();
    out.sort();
    out
}

impl Catalog {
    /// Watch the directory: every `interval`, if any component or manifest was added, replaced
    /// or removed, reload (new runs use the new versions; a broken file keeps the previous
    /// good version). Polling keeps it portable and cheap: one directory listing per interval.
    pub async fn watch(self: Arc<Self>, interval: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut seen = dir_fingerprint(&self.dir);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let now = dir_fingerprint(&self.dir);
            if now == seen {
                continue;
            }
            seen = now;
            let catalog = self.clone();
            if let Ok(reports) = tokio::task::spawn_blocking(move || catalog.reload()).await {
                for r in reports {
                    match r.status {
                        Ok(()) => tracing::debug!(plugin = %r.name, "plugin ready"),
                        Err(e) => tracing::warn!(plugin = %r.name, "plugin unusable: {e}"),
                    }
                }
            }
        }
    }
}

fn write_artifact(path: &Path, component: &Component) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let bytes = component.serialize().map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    // Write then rename: a reader never sees half a file.
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("artifact");
    let tmp = dir.join(format!(".{name}.{}.{:016x}.tmp", std::process::id(), rand::random::<u64>()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

fn file_digest(path: &Path) -> std::io::Result<String> {
    Ok(hex::encode(Sha256::digest(std::fs::read(path)?)))
}

/// The default place for compiled artifacts: `$XDG_CACHE_HOME/taskhost`, else
/// `~/.cache/taskhost`, else a folder in the system's temporary directory.
pub fn default_cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("taskhost");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h).join(".cache").join("taskhost");
    }
    std::env::temp_dir().join("taskhost-cache")
}
