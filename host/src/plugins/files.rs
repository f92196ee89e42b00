//! Reading files of the plugins directory, which are untrusted: never through a link, never more
//! than a bound, and never quoted back in an error.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::config::Policy;
use crate::sandbox::{Grants, LimitOverrides, Limits};

/// The `NAME.wasm` files of the plugins directory, by name. Symbolic links are listed too, to be
/// reported as refused.
pub(super) fn list_dir(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
        .collect();
    files.sort();
    Ok(files)
}

/// Whether `dir` can be read as a plugins directory; the error says why not (missing, not a
/// directory, not allowed).
pub fn check_dir(dir: &Path) -> crate::error::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(_) => Ok(()),
        Err(e) => {
            let reason = match e.kind() {
                std::io::ErrorKind::NotFound => "it does not exist".to_string(),
                _ => e.to_string(),
            };
            Err(crate::error::Error::PluginsDir { dir: dir.to_path_buf(), reason })
        }
    }
}

/// Read a file of the plugins directory: a regular file, never through a symbolic link, at most
/// `max` bytes (checked before reading). None when there is no such file.
pub(super) fn read_plugin_file(path: &Path, max: u64) -> std::result::Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    // The file's name alone: these reasons reach API callers, who need not know the server's paths.
    let shown = file_name(path);
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {shown}: {e}")),
    };
    if meta.file_type().is_symlink() {
        return Err(format!("{shown} is a symbolic link: nothing in the plugins directory is followed through links"));
    }
    let too_large = |len: u64| format!("{shown} is {len} bytes, over the limit of {max} bytes");
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Swapped for a link or a FIFO since the check above: refuse, and never block.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("{shown} is not a regular file"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// A file's name without its directory.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// A manifest's parse error without quoting the manifest: the message with quoted values left
/// out, and where it is.
pub(super) fn toml_error(e: &toml::de::Error, text: &str) -> String {
    let mut message = String::new();
    let mut quoted = false;
    for c in e.message().trim().chars() {
        if c == '"' {
            quoted = !quoted;
            if quoted {
                message.push_str("\"…\"");
            }
        } else if !quoted {
            message.push(c);
        }
    }
    let message = crate::text::bounded(&crate::text::one_line(&message), 300, "…");
    crate::located::describe_message(e, text, &message)
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    limits: LimitOverrides,
    /// Refused when present: only the operator grants.
    grants: Option<toml::Value>,
}

/// A plugin's files as read, before compiling.
pub(super) struct Source {
    pub bytes: Vec<u8>,
    pub digest: String,
    pub manifest_text: Option<String>,
    pub limits: Limits,
    pub grants: Grants,
}

/// Most bytes of a manifest.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 64 << 10;

/// Read a component and its manifest, within the operator's bounds, and work out its limits
/// and grants.
pub(super) fn read_source(policy: &Policy, name: &str, path: &Path) -> std::result::Result<Source, String> {
    let bytes =
        read_plugin_file(path, policy.max_component_bytes)?.ok_or_else(|| format!("{} is gone", file_name(path)))?;
    let digest = hex::encode(Sha256::digest(&bytes));
    let manifest_path = path.with_extension("toml");
    let shown = file_name(&manifest_path);
    let bad_manifest = |reason: String| format!("invalid manifest {shown}: {reason}");
    let manifest_text = match read_plugin_file(&manifest_path, MAX_MANIFEST_BYTES).map_err(bad_manifest)? {
        Some(b) => Some(String::from_utf8(b).map_err(|_| bad_manifest("not UTF-8 text".into()))?),
        None => None,
    };
    let (limits, grants) = limits_of(policy, name, &digest, manifest_text.as_deref(), &shown)?;
    if !bytes.starts_with(b"\0asm") {
        return Err("not a WebAssembly file (bad magic number)".into());
    }
    Ok(Source { bytes, digest, manifest_text, limits, grants })
}

/// The limits and grants of the handler `name`'s component `digest` with its manifest (`shown`
/// so in errors): the operator's, lowered by the manifest, which may grant nothing.
pub(super) fn limits_of(
    policy: &Policy,
    name: &str,
    digest: &str,
    manifest_text: Option<&str>,
    shown: &str,
) -> std::result::Result<(Limits, Grants), String> {
    let bad_manifest = |reason: String| format!("invalid manifest {shown}: {reason}");
    if manifest_text.is_some_and(|t| t.len() as u64 > MAX_MANIFEST_BYTES) {
        return Err(bad_manifest(format!("over {MAX_MANIFEST_BYTES} bytes")));
    }
    let manifest: Manifest = match manifest_text {
        Some(t) => toml::from_str(t).map_err(|e| bad_manifest(toml_error(&e, t)))?,
        None => Manifest::default(),
    };
    if manifest.grants.is_some() {
        return Err(bad_manifest(
            "a manifest cannot grant anything ([grants]): only the operator grants, in the configuration \
             file (--config)"
                .into(),
        ));
    }
    let (ceiling, grants) = policy.for_handler(name, digest)?;
    let limits = ceiling.lowered_by(&manifest.limits).map_err(|e| bad_manifest(format!("[limits] {e}")))?;
    Ok((limits, grants))
}
