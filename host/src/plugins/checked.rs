//! What queueing a task needs to know of its handler, remembered: whether the component
//! implements the world (see [`super::world`]), with the digest, limits and grants its files
//! give. Checking an 18 MB Python component's types takes a quarter of a second, so a web
//! application queueing one task per request would pay that each time; instead each handler is
//! checked once per version of its files.
//!
//! A version is told apart by each file's identity (device, inode, size, modification and change
//! times, to the nanosecond), read before the file is: a file replaced or written since has
//! another, and is read again. A file read again with the same digest and manifest is not
//! checked again.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use super::files::{list_dir, read_source, Source};
use super::{valid_name, Catalog};
use crate::config::Policy;
use crate::error::{Error, Result};
use crate::sandbox::{Grants, Limits};

/// One file's identity, or None when there is no such file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<[i64; 7]>);

/// How long after a file's last change its stamp is trusted to tell a later change apart.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

impl Stamp {
    /// Changed (or made) long enough ago that a change now would move its times; a missing file
    /// is settled (a component missing when stamped is never cached).
    fn settled(&self) -> bool {
        let Some(s) = self.0 else { return true };
        let changed =
            std::time::UNIX_EPOCH + std::time::Duration::new(s[5].max(0) as u64, s[6].clamp(0, 999_999_999) as u32);
        std::time::SystemTime::now().duration_since(changed).is_ok_and(|ago| ago >= SETTLE)
    }

    fn of(path: &Path) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp(std::fs::symlink_metadata(path).ok().map(|m| {
            let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            [n(m.dev()), n(m.ino()), n(m.size()), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()]
        }))
    }
}

/// What one version of a handler's files gave.
#[derive(Debug, Clone)]
pub struct Checked {
    /// sha256 of the component, hex.
    pub digest: String,
    /// The limits its runs get.
    pub limits: Limits,
    /// What the operator grants it.
    pub grants: Grants,
    /// Whether it implements the world; why not otherwise.
    pub types: std::result::Result<(), String>,
}

#[derive(Debug)]
struct Entry {
    stamps: (Stamp, Stamp),
    manifest_text: Option<String>,
    checked: Checked,
}

/// The checks made so far, by handler name (a name whose files are gone is dropped when next
/// asked for).
#[derive(Debug, Default)]
pub(super) struct CheckCache {
    entries: Mutex<HashMap<String, Entry>>,
}

impl CheckCache {
    /// The handler `name` at `path`, checked, or why its files cannot be used. Blocking.
    pub(super) fn check(&self, policy: &Policy, name: &str, path: &Path) -> std::result::Result<Checked, String> {
        let stamps = (Stamp::of(path), Stamp::of(&path.with_extension("toml")));
        if let Some(e) = self.lock().get(name).filter(|e| e.stamps == stamps) {
            return Ok(e.checked.clone());
        }
        let source = match read_source(policy, name, path) {
            Ok(s) => s,
            Err(e) => {
                self.lock().remove(name);
                return Err(e);
            }
        };
        let Source { bytes, digest, manifest_text, limits, grants } = source;
        let same = |e: &Entry| e.checked.digest == digest && e.manifest_text == manifest_text;
        let known = self.lock().get(name).filter(|e| same(e)).map(|e| e.checked.types.clone());
        let types = known.unwrap_or_else(|| super::world::check_types(&bytes));
        let checked = Checked { digest, limits, grants, types };
        // Not remembered while a file may still change unseen: file times move in coarse ticks,
        // so one rewritten in the same tick as this read would keep its stamp (git's "racy" rule).
        if stamps.0 .0.is_some() && stamps.0.settled() && stamps.1.settled() {
            let entry = Entry { stamps, manifest_text, checked: checked.clone() };
            self.lock().insert(name.to_string(), entry);
        } else {
            self.lock().remove(name);
        }
        Ok(checked)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One handler file as [`Catalog::survey`] found it.
#[derive(Debug, Clone)]
pub struct Surveyed {
    /// Its name.
    pub name: String,
    /// Its digest, limits, grants and whether it implements the world; or why its files cannot be
    /// used.
    pub checked: std::result::Result<Checked, String>,
    /// This host's cache holds its compiled code.
    pub compiled: bool,
}

impl Catalog {
    /// Every handler file of the directory as queueing sees it (checked from its types, never
    /// compiled), with whether this host holds its compiled artifact. Blocking.
    pub fn survey(&self) -> Result<Vec<Surveyed>> {
        let files =
            list_dir(&self.dir).map_err(|e| Error::PluginsDir { dir: self.dir.clone(), reason: e.to_string() })?;
        let fingerprint = self.sandbox.engine_fingerprint();
        let compiled = |digest: &str| {
            let file = format!("{digest}-{fingerprint}.cwasm");
            self.cache_dir.as_ref().is_some_and(|d| d.join(file).is_file())
        };
        let survey = files.into_iter().map(|(name, path)| {
            let checked = match valid_name(&name) {
                true => self.checks.check(&self.policy, &name, &path),
                false => Err("invalid plugin name: use letters, digits, '-' and '_'".into()),
            };
            let compiled = checked.as_ref().is_ok_and(|c| compiled(&c.digest));
            Surveyed { name, checked, compiled }
        });
        Ok(survey.collect())
    }
}
