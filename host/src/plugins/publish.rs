//! Components read and checked for `taskhost deploy`: as a worker checks a plugin at load (its
//! size, its manifest, the `task-handler` world), without compiling it; with `compile`, compiled
//! here too, within the operator's compile bounds, into this host's cache.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::files::{limits_of, list_dir, read_source, Source};
use super::{valid_name, Catalog};
use crate::sandbox::grants::Grants;
use crate::sandbox::Limits;

/// A component ready to deploy.
#[derive(Debug)]
pub struct ToDeploy {
    /// The handler's name.
    pub name: String,
    /// The component.
    pub bytes: Vec<u8>,
    /// sha256 of `bytes`, hex.
    pub digest: String,
    /// Its manifest (`NAME.toml` beside it), if any.
    pub manifest: Option<String>,
}

/// What `taskhost deploy PATH` reads: the file, as the handler `name` (its stem without it); or
/// every `NAME.wasm` of the directory. Each with its name and file.
pub fn deploy_sources(path: &Path, name: Option<&str>) -> crate::error::Result<Vec<(String, PathBuf)>> {
    if path.is_dir() {
        if name.is_some() {
            return Err(crate::error::Error::invalid("--name", "names one file's handler, not a directory's"));
        }
        let files =
            list_dir(path).map_err(|e| crate::error::Error::io(format!("cannot read {}", path.display()), e))?;
        return Ok(files);
    }
    // A file that is not there says so, not that it is "gone" (as a plugin's file removed).
    std::fs::metadata(path).map_err(|e| crate::error::Error::io(format!("cannot read {}", path.display()), e))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    Ok(vec![(name.unwrap_or(stem).to_string(), path.to_path_buf())])
}

impl Catalog {
    /// Read the component at `path` (and its manifest beside it) as the handler `name`, and
    /// check it as [`Catalog::check_deployable`] does. Blocking.
    pub fn check_to_deploy(&self, name: &str, path: &Path, compile: bool) -> Result<ToDeploy, String> {
        if !valid_name(name) {
            return Err(BAD_NAME.into());
        }
        let Source { bytes, manifest_text, .. } = read_source(&self.policy, name, path)?;
        self.check_deployable(name, bytes, manifest_text, compile)
    }

    /// Check a component (sent to the API, say) as the handler `name` with its manifest, as a
    /// worker would at load: a name a handler may have, its size, its manifest, the world; with
    /// `compile`, compiled (or found compiled) in this host's cache. Blocking.
    pub fn check_deployable(
        &self,
        name: &str,
        bytes: Vec<u8>,
        manifest: Option<String>,
        compile: bool,
    ) -> Result<ToDeploy, String> {
        if !valid_name(name) {
            return Err(BAD_NAME.into());
        }
        let max = self.policy.max_component_bytes;
        if bytes.len() as u64 > max {
            return Err(format!("{} bytes, over [plugins] max_component_mb ({} MiB)", bytes.len(), max >> 20));
        }
        let digest = hex::encode(Sha256::digest(&bytes));
        limits_of(&self.policy, name, &digest, manifest.as_deref(), &format!("{name}.toml"))?;
        if !bytes.starts_with(b"\0asm") {
            return Err("not a WebAssembly file (bad magic number)".into());
        }
        super::world::check_types(&bytes)?;
        if compile {
            let compiled = self.compiler.one_at_a_time(&digest, || self.compile(name, &bytes, &digest, true))?;
            if let Some((component, _)) = compiled {
                self.sandbox.prepare(&component)?;
            }
        }
        Ok(ToDeploy { name: name.to_string(), bytes, digest, manifest })
    }

    /// The limits and grants a deployed version of `name` runs with (its manifest lowering the
    /// operator's limits), or why it cannot run here.
    pub fn deployed_limits(
        &self,
        name: &str,
        digest: &str,
        manifest: Option<&str>,
    ) -> Result<(Limits, Grants), String> {
        limits_of(&self.policy, name, digest, manifest, &format!("{name}.toml"))
    }
}

/// Why a handler's name is refused.
pub const BAD_NAME: &str = "invalid handler name: use letters, digits, '-' and '_'";
