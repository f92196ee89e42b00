//! The compiled-code cache: artifacts this host wrote, loaded without compiling again.
//!
//! Loading an artifact runs the code in it, so the cache must not be plantable: the directory
//! and every artifact must belong to this user and be writable by no one else, or the cache is
//! not used (the component is compiled in memory instead). Its size is bounded: after each
//! write the least recently used artifacts are removed until it fits.

use std::path::{Path, PathBuf};

use wasmtime::component::Component;

/// Whether `dir` may hold artifacts: created owner-only if missing, then a real directory (not a
/// link) of this user that no one else may write.
pub(crate) fn usable_dir(dir: &Path) -> bool {
    if let Err(e) = create_private_dir(dir) {
        tracing::warn!(dir = %dir.display(), "compiled cache not used: cannot create it: {e}");
        return false;
    }
    match owned_and_private(dir, true) {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!(dir = %dir.display(), "compiled cache not used: {why}");
            false
        }
    }
}

/// Whether the artifact at `path` exists and may be loaded: a regular file of this user that no
/// one else may write.
pub(crate) fn trusted_artifact(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Err(_) => false,
        Ok(_) => match owned_and_private(path, false) {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!(path = %path.display(), "cached artifact not loaded: {why}");
                false
            }
        },
    }
}

#[cfg(unix)]
fn owned_and_private(path: &Path, dir: bool) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if meta.file_type().is_symlink() {
        return Err("it is a symbolic link".into());
    }
    if dir != meta.is_dir() || (!dir && !meta.is_file()) {
        return Err(if dir { "not a directory" } else { "not a regular file" }.into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!("owned by user {} rather than this user ({me})", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("writable by others (mode {:o})", meta.mode() & 0o777));
    }
    Ok(())
}

#[cfg(not(unix))]
fn owned_and_private(_path: &Path, _dir: bool) -> Result<(), String> {
    Err("ownership cannot be checked on this platform".into())
}

/// Mark an artifact as used now, for eviction order.
pub(crate) fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::options().write(true).open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// Write an artifact (write then rename, owner-only), then evict the least recently used
/// artifacts until the cache holds at most `max_bytes`.
pub(crate) fn write(path: &Path, component: &Component, max_bytes: u64) -> std::io::Result<()> {
    let bytes = component.serialize().map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    write_private(path, &bytes)?;
    evict(path.parent().unwrap_or(Path::new(".")), "cwasm", max_bytes);
    Ok(())
}

/// Write `bytes` to `path`, owner-only, by a rename: a reader sees the whole file or none.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("artifact");
    let tmp = dir.join(format!(".{name}.{}.{:016x}.tmp", std::process::id(), rand::random::<u64>()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    {
        use std::io::Write;
        let mut f = options.open(&tmp)?;
        f.write_all(bytes)?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Remove the least recently used files ending `.extension` in `dir` until they hold at most
/// `max_bytes`.
pub(crate) fn evict(dir: &Path, extension: &str, max_bytes: u64) {
    let mut artifacts: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == extension))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = artifacts.iter().map(|a| a.1).sum();
    artifacts.sort();
    let mut removed = 0usize;
    for (_, len, path) in artifacts {
        if total <= max_bytes {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
            total = total.saturating_sub(len);
        }
    }
    if removed > 0 {
        tracing::info!(dir = %dir.display(), removed, "evicted from the compiled cache");
    }
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

/// The default place for compiled artifacts: `$XDG_CACHE_HOME/taskhost`, else
/// `~/.cache/taskhost`; None (compile on every load) when neither is set: a shared fallback such
/// as `/tmp` could be planted by another user.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("taskhost"));
    }
    std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache").join("taskhost"))
}
