//! Handlers deployed to the database (`taskhost deploy`; see [`crate::store::components`]):
//! which version of each is active, as this process last read it, and the versions it loaded.
//!
//! A deployed handler shadows a file of the same name in the plugins directory. A worker claims
//! a deployed handler's tasks only once its active version is loaded, so a new version is
//! compiled before this worker takes its tasks; each claimed run names the version it runs (the
//! claim reads it), which is loaded then if it is not yet (a pinned version, or a release this
//! worker has not read yet). Compiled code is cached by digest as the directory's is, so a
//! version compiled once on this host loads in milliseconds after.

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::files::limits_of;
use super::{Catalog, Plugin};
use crate::error::{Error, Result};
use crate::store::components::ActiveVersion;

/// What this process knows of the deployed handlers.
#[derive(Default)]
pub(super) struct Deployed {
    /// Each deployed handler's active version, as last read.
    active: HashMap<String, ActiveVersion>,
    /// The versions loaded, by handler and digest.
    loaded: HashMap<(String, String), Arc<Plugin>>,
    /// Handlers found deployed when a task was queued (a handler once deployed stays so).
    known: std::collections::HashSet<String>,
    /// The active versions were read, and each is loaded or failed to load.
    settled: bool,
    /// One turn a version at loading it from the database (runs that need it wait for it).
    turns: HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>,
}

impl Catalog {
    fn deployed(&self) -> std::sync::RwLockReadGuard<'_, Deployed> {
        self.deployed.read().unwrap_or_else(|p| p.into_inner())
    }

    fn deployed_mut(&self) -> std::sync::RwLockWriteGuard<'_, Deployed> {
        self.deployed.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Take the database's active versions as read. Versions loaded that are no longer active
    /// are dropped (runs under way keep theirs); a pinned run loads its version again, from this
    /// host's compiled cache.
    pub fn set_active(&self, active: Vec<ActiveVersion>) {
        let mut d = self.deployed_mut();
        d.active = active.into_iter().map(|v| (v.handler.clone(), v)).collect();
        let Deployed { active, loaded, turns, settled, .. } = &mut *d;
        loaded.retain(|(name, digest), p| {
            active.get(name).is_some_and(|a| &a.digest == digest && a.manifest == p.manifest_text)
        });
        turns.retain(|_, t| Arc::strong_count(t) > 1);
        // A version to load: not settled until it is loaded (a draining worker waits for it).
        *settled &= active.values().all(|a| loaded.contains_key(&(a.handler.clone(), a.digest.clone())));
    }

    /// The turn at loading the version `digest` of `name`: held while it is read and compiled.
    pub fn load_turn(&self, name: &str, digest: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.deployed_mut().turns.entry((name.to_string(), digest.to_string())).or_default().clone()
    }

    /// Say whether every active version was read and is loaded or failed to load (a draining
    /// worker counts the due tasks of the handlers it has only then).
    pub fn set_deploys_settled(&self, settled: bool) {
        self.deployed_mut().settled = settled;
    }

    /// See [`Catalog::set_deploys_settled`].
    pub fn deploys_settled(&self) -> bool {
        self.deployed().settled
    }

    /// Changes each time a deployed version is loaded: an idle worker claims its tasks then.
    pub fn versions_loaded(&self) -> tokio::sync::watch::Receiver<u64> {
        self.versions_loaded.subscribe()
    }

    /// Whether `name` is deployed to the database (as last read).
    pub fn is_deployed(&self, name: &str) -> bool {
        self.deployed().active.contains_key(name)
    }

    /// Whether `name` was found deployed before (by [`Catalog::note_deployed`] or as read).
    pub fn known_deployed(&self, name: &str) -> bool {
        let d = self.deployed();
        d.known.contains(name) || d.active.contains_key(name)
    }

    /// Remember that `name` is deployed: queueing its tasks needs no lookup again.
    pub fn note_deployed(&self, name: &str) {
        self.deployed_mut().known.insert(name.to_string());
    }

    /// The active versions not loaded yet.
    pub fn to_load(&self) -> Vec<ActiveVersion> {
        let d = self.deployed();
        let mut missing: Vec<ActiveVersion> = d
            .active
            .values()
            .filter(|a| !d.loaded.contains_key(&(a.handler.clone(), a.digest.clone())))
            .cloned()
            .collect();
        missing.sort_by(|a, b| a.handler.cmp(&b.handler));
        missing
    }

    /// The deployed handlers whose active version is loaded, each with its digest.
    pub(super) fn deployed_ready(&self) -> Vec<(String, String)> {
        let d = self.deployed();
        let ready = d.active.values().filter(|a| d.loaded.contains_key(&(a.handler.clone(), a.digest.clone())));
        ready.map(|a| (a.handler.clone(), a.digest.clone())).collect()
    }

    /// The loaded version `digest` of the handler `name`.
    pub fn version(&self, name: &str, digest: &str) -> Option<Arc<Plugin>> {
        self.deployed().loaded.get(&(name.to_string(), digest.to_string())).cloned()
    }

    /// Whether this host's cache holds the compiled code of `digest` for this engine (then no
    /// bytes need be read from the database to load it).
    pub fn is_compiled(&self, digest: &str) -> bool {
        let file = format!("{digest}-{}.cwasm", self.sandbox.engine_fingerprint());
        self.cache_dir
            .as_ref()
            .is_some_and(|d| crate::cache::usable_dir(d) && crate::cache::trusted_artifact(&d.join(file)))
    }

    /// Load the version `digest` of the handler `name`, deployed with `manifest`, from `bytes`
    /// (checked against the digest) or, without them, from this host's compiled cache. Blocking
    /// (it may compile).
    pub fn load_version(
        &self,
        name: &str,
        digest: &str,
        manifest: Option<&str>,
        bytes: Option<&[u8]>,
    ) -> Result<Arc<Plugin>> {
        let broken = |reason: String| Error::BrokenHandler { name: name.to_string(), reason };
        if let Some(b) = bytes {
            if hex::encode(Sha256::digest(b)) != digest {
                return Err(broken(format!("the database's copy of version {} is not what it was", short(digest))));
            }
            if b.len() as u64 > self.policy.max_component_bytes {
                let max = self.policy.max_component_bytes;
                return Err(broken(format!("version {} is {} bytes, over the limit of {max}", short(digest), b.len())));
            }
        }
        let shown = format!("of version {}", short(digest));
        let (limits, grants) = limits_of(&self.policy, name, digest, manifest, &shown).map_err(broken)?;
        let may_compile = bytes.is_some();
        let compiled = self
            .compiler
            .one_at_a_time(digest, || self.compile(name, bytes.unwrap_or_default(), digest, may_compile))
            .map_err(broken)?;
        let Some((component, cached)) = compiled else {
            return Err(broken(format!("version {} is not compiled on this host", short(digest))));
        };
        let pre = self.sandbox.prepare(&component).map_err(broken)?;
        let plugin = Arc::new(Plugin {
            name: name.to_string(),
            path: std::path::PathBuf::new(),
            digest: digest.to_string(),
            limits,
            grants,
            pre,
            manifest_text: manifest.map(str::to_string),
        });
        tracing::info!(plugin = name, version = short(digest), cached, "deployed version ready");
        let mut d = self.deployed_mut();
        // Kept unless a release read meanwhile gave this active version another manifest (its
        // runs take the new one once loaded).
        let stale = d.active.get(name).is_some_and(|a| a.digest == digest && a.manifest.as_deref() != manifest);
        if !stale {
            d.loaded.insert((name.to_string(), digest.to_string()), plugin.clone());
            drop(d);
            self.versions_loaded.send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(plugin)
    }
}

/// A digest as shown: its first 12 characters.
pub fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}
