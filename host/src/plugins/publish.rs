//! Components read and checked for `taskhost deploy`: as a worker checks a plugin at load (its
//! size, its manifest, the `task-handler` world), without compiling it; with `compile`, compiled
//! here too, within the operator's compile bounds, into this host's cache.

use std::path::{Path, PathBuf};

use super::files::{list_dir, read_source, Source};
use super::{valid_name, Catalog};

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
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    Ok(vec![(name.unwrap_or(stem).to_string(), path.to_path_buf())])
}

impl Catalog {
    /// Read the component at `path` (and its manifest beside it) as the handler `name`, and
    /// check it as a worker would at load: a name a handler may have, its size, its manifest, the
    /// world; with `compile`, compiled (or found compiled) in this host's cache. Blocking.
    pub fn check_to_deploy(&self, name: &str, path: &Path, compile: bool) -> Result<ToDeploy, String> {
        if !valid_name(name) {
            return Err("invalid handler name: use letters, digits, '-' and '_'".into());
        }
        let Source { bytes, digest, manifest_text, .. } = read_source(&self.policy, name, path)?;
        super::world::check_types(&bytes)?;
        if compile {
            let compiled = self.compiler.one_at_a_time(&digest, || self.compile(name, &bytes, &digest, true))?;
            if let Some((component, _)) = compiled {
                self.sandbox.prepare(&component)?;
            }
        }
        Ok(ToDeploy { name: name.to_string(), bytes, digest, manifest: manifest_text })
    }
}
