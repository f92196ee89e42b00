//! Cranelift's incremental compilation cache, on disk, for the compiling child: a component built
//! again after a small edit compiles only the functions that changed. A Python or JavaScript
//! handler's source is data inside an unchanged interpreter, so after a one-line edit nearly every
//! function is found here.
//!
//! Each entry is compiled code that ends up in an artifact, so the store is as private as the
//! artifacts (`crate::cache`): an owner-only directory of this user's files, anything else ignored
//! (and compiled again). Entries are files named by the SHA-256 of their key; after each compile
//! the least recently used go until the directory fits its bound.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Entries' file extension.
const EXTENSION: &str = "code";

/// The largest entry read back: one function's compiled code is far smaller.
const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// A directory of compiled functions, for `wasmtime::Config::enable_incremental_compilation`.
#[derive(Debug)]
pub(crate) struct DiskStore {
    dir: PathBuf,
}

impl DiskStore {
    /// The store in `dir`, or None when `dir` cannot be made private to this user.
    pub fn open(dir: &Path) -> Option<DiskStore> {
        crate::cache::usable_dir(dir).then(|| DiskStore { dir: dir.to_path_buf() })
    }

    fn path(&self, key: &[u8]) -> PathBuf {
        self.dir.join(format!("{}.{EXTENSION}", hex::encode(Sha256::digest(key))))
    }

    /// Keep the most recently used entries within `max_bytes`.
    pub fn evict(&self, max_bytes: u64) {
        crate::cache::evict(&self.dir, EXTENSION, max_bytes);
    }
}

impl wasmtime::CacheStore for DiskStore {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let path = self.path(key);
        let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= MAX_ENTRY_BYTES);
        if !small || !crate::cache::trusted_artifact(&path) {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        crate::cache::touch(&path);
        Some(Cow::Owned(bytes))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        crate::cache::write_private(&self.path(key), &value).is_ok()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use wasmtime::CacheStore;

    #[test]
    fn an_entry_is_read_back_only_from_a_private_file_of_this_user() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = DiskStore::open(&dir.path().join("incremental")).expect("a private directory");
        assert!(store.get(b"key").is_none());
        assert!(store.insert(b"key", b"code".to_vec()));
        assert_eq!(store.get(b"key").as_deref(), Some(&b"code"[..]));
        use std::os::unix::fs::PermissionsExt;
        let path = store.path(b"key");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(store.get(b"key").is_none(), "an entry others may write is not loaded");
    }
}
