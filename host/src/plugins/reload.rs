//! A scan of the plugins directory: new and changed plugins loaded (those cached first, the rest
//! compiled smallest first), plugins whose file is gone dropped, and the previous good version
//! kept when a new file is broken.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::files::{list_dir, read_plugin_file, read_source, Source};
use super::{loaded_metrics, valid_name, Catalog, LoadReport, Plugin};

impl Catalog {
    /// Scan the directory: load new and changed plugins, drop plugins whose file is gone, and
    /// keep the previous version of a plugin whose new file is broken. Blocking.
    pub fn reload(&self) -> Vec<LoadReport> {
        self.reload_with(&|_| {})
    }

    /// [`Catalog::reload`], calling `each` as each plugin is ready or refused. Plugins whose
    /// compiled artifact is cached (or that did not change) come first; the rest are compiled
    /// smallest first, so one slow compile holds up as few handlers as it can, and every plugin
    /// is usable as soon as it is ready.
    pub fn reload_with(&self, each: &dyn Fn(&LoadReport)) -> Vec<LoadReport> {
        let mut reports = Vec::new();
        let files = match list_dir(&self.dir) {
            Ok(files) => files,
            // None at all: a worker of handlers deployed into the database alone (a worker is
            // refused at start without either).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.names().is_empty() => {
                tracing::debug!(dir = %self.dir.display(), "no plugins directory");
                return reports;
            }
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), "cannot read the plugins directory: {e}");
                return reports;
            }
        };
        let present: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
        let mut to_compile = Vec::new();
        for (name, path) in files {
            let started = Instant::now();
            if !valid_name(&name) {
                let report = LoadReport {
                    name,
                    digest: None,
                    status: Err("invalid plugin name: use letters, digits, '-' and '_'".into()),
                    cached: false,
                    load_time: started.elapsed(),
                };
                each(&report);
                reports.push(report);
                continue;
            }
            match self.load_file(&name, &path, false) {
                Ok(None) => to_compile.push((std::fs::symlink_metadata(&path).map_or(0, |m| m.len()), name, path)),
                loaded => reports.push(self.settle(name, &path, started, loaded, each)),
            }
        }
        to_compile.sort();
        for (_, name, path) in to_compile {
            let started = Instant::now();
            let loaded = self.load_file(&name, &path, true);
            reports.push(self.settle(name, &path, started, loaded, each));
        }
        self.loaded.write().unwrap_or_else(|p| p.into_inner()).retain(|n, _| present.contains(n));
        reports
    }
    /// Make a plugin that loaded usable (or report why it is not), and tell `each`.
    fn settle(
        &self,
        name: String,
        path: &Path,
        started: Instant,
        loaded: std::result::Result<Option<(Arc<Plugin>, bool)>, String>,
        each: &dyn Fn(&LoadReport),
    ) -> LoadReport {
        let loaded = loaded.and_then(|l| l.ok_or_else(|| "not compiled".to_string()));
        let report = match loaded {
            Ok((plugin, cached)) => {
                let report = LoadReport {
                    name: name.clone(),
                    digest: Some(plugin.digest.clone()),
                    status: Ok(()),
                    cached,
                    load_time: started.elapsed(),
                };
                self.loaded.write().unwrap_or_else(|p| p.into_inner()).insert(name, plugin);
                report
            }
            Err(reason) => {
                if self.get(&name).is_some() {
                    tracing::warn!(plugin = %name, "new version is broken, keeping the previous one: {reason}");
                }
                LoadReport {
                    name,
                    digest: read_plugin_file(path, self.policy.max_component_bytes)
                        .ok()
                        .flatten()
                        .map(|b| hex::encode(Sha256::digest(&b))),
                    status: Err(reason),
                    cached: false,
                    load_time: started.elapsed(),
                }
            }
        };
        loaded_metrics(&report);
        each(&report);
        report
    }

    /// Load one plugin file. With `may_compile` false, a component that would need compiling
    /// (no usable cached artifact) is left for later: `Ok(None)`.
    pub(super) fn load_file(
        &self,
        name: &str,
        path: &Path,
        may_compile: bool,
    ) -> std::result::Result<Option<(Arc<Plugin>, bool)>, String> {
        let source = read_source(&self.policy, name, path)?;
        if let Some(old) = self.get(name) {
            if old.digest == source.digest && old.manifest_text == source.manifest_text {
                return Ok(Some((old, true)));
            }
        }
        let Source { bytes, digest, manifest_text, limits, grants } = source;
        let compiled = self.compiler.one_at_a_time(&digest, || self.compile(name, &bytes, &digest, may_compile))?;
        let Some((component, cached)) = compiled else {
            return Ok(None);
        };
        let pre = self.sandbox.prepare(&component)?;
        for variable in &grants.unset_env {
            tracing::warn!(plugin = name, %variable, "granted environment variable is not set on this host");
        }
        let plugin =
            Plugin { name: name.to_string(), path: path.to_path_buf(), digest, limits, grants, pre, manifest_text };
        Ok(Some((Arc::new(plugin), cached)))
    }
}
