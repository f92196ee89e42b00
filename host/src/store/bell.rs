//! A bell that rings when a database's files are written: SQLite's commits append to its
//! write-ahead log, so a reader waiting for commits (the waits' watcher, `api/wait.rs`) hears
//! one at once rather than at its next tick, and costs nothing while nothing is written. It is
//! Linux's inotify on the file's directory, ringing only for the file and those named after it
//! (its `-wal`, `-journal`); elsewhere there is none, and readers tick.

use std::io;
use std::path::Path;

/// Rings ([`CommitBell::rung`] returns) once for whatever was written to its file, or a file
/// named after it, since the last ring.
#[derive(Debug)]
pub struct CommitBell {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
    /// The watched file's name: events for names that do not start with it are not rings.
    #[cfg(target_os = "linux")]
    name: Vec<u8>,
}

#[cfg(target_os = "linux")]
impl CommitBell {
    /// A bell for `file` and the files named after it; Err where the system will not (inotify's
    /// limit of instances reached, a directory gone) and outside a Tokio runtime.
    pub fn watch(file: &Path) -> io::Result<Self> {
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        // AsyncFd's registration panics outside a runtime: refused here instead.
        tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
        let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file's path"));
        };
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a system call with constant flags; the descriptor it returns is owned below.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor no one else holds; `fd` closes it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        if unsafe { libc::inotify_add_watch(raw, path.as_ptr(), libc::IN_MODIFY) } < 0 {
            return Err(io::Error::last_os_error());
        }
        use tokio::io::{unix::AsyncFd, Interest};
        // SAFETY: `fd` is open and owned by the AsyncFd from here on, so its number stays its own.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)?;
        Ok(CommitBell { fd, name: name.as_bytes().to_vec() })
    }

    /// Wait until the file (or one named after it) was written since the last ring; many writes
    /// ring once.
    pub async fn rung(&mut self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // Room for many events (one is 16 bytes and a name of at most 256).
        let mut buf = [0u8; 4096];
        loop {
            let mut ready = self.fd.readable().await?;
            let mut heard = false;
            loop {
                // SAFETY: reads at most `buf.len()` bytes into `buf`, which outlives the call.
                let n = unsafe { libc::read(self.fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n > 0 {
                    let n = usize::try_from(n).unwrap_or(0).min(buf.len());
                    heard |= names(&buf[..n]).any(|name| name.is_empty() || name.starts_with(&self.name));
                    continue;
                }
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => {
                        ready.clear_ready();
                        break;
                    }
                    _ => return Err(e),
                }
            }
            if heard {
                return Ok(());
            }
        }
    }
}

/// The names of the inotify events in `buf` (empty for an event of the directory itself, or the
/// queue's overflow), each event a 16-byte head (watch, mask, cookie, the name's length) and
/// its name padded with NULs. A truncated event ends the list.
#[cfg(target_os = "linux")]
fn names(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        let len = rest.get(12..16)?;
        let len = usize::try_from(u32::from_ne_bytes([len[0], len[1], len[2], len[3]])).ok()?;
        let name = rest.get(16..16usize.checked_add(len)?)?;
        rest = &rest[16 + len..];
        Some(name.split(|b| *b == 0).next().unwrap_or_default())
    })
}

#[cfg(not(target_os = "linux"))]
impl CommitBell {
    /// None here: readers tick.
    pub fn watch(_file: &Path) -> io::Result<Self> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "no inotify on this system"))
    }

    /// Never rings.
    pub async fn rung(&mut self) -> io::Result<()> {
        std::future::pending().await
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bell_rings_once_for_the_writes_to_its_files_and_not_for_others_beside_them() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (db, wal, log) = (dir.path().join("q.db"), dir.path().join("q.db-wal"), dir.path().join("worker.log"));
        for file in [&db, &wal, &log] {
            std::fs::write(file, b"").expect("a file");
        }
        let mut bell = CommitBell::watch(&db).expect("a bell");
        std::fs::write(&log, b"a line").expect("a write beside");
        let quiet = tokio::time::timeout(std::time::Duration::from_millis(50), bell.rung()).await;
        assert!(quiet.is_err(), "rang for another file's write, or for nothing");
        for _ in 0..3 {
            std::fs::write(&wal, b"frame").expect("a write");
        }
        let rang = tokio::time::timeout(std::time::Duration::from_secs(5), bell.rung()).await;
        assert!(matches!(rang, Ok(Ok(()))), "the writes did not ring: {rang:?}");
        let again = tokio::time::timeout(std::time::Duration::from_millis(50), bell.rung()).await;
        assert!(again.is_err(), "the writes before the ring rang twice");
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_sqlite_store_rings_its_bell_when_a_task_is_committed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("q.db").display());
        let store = crate::store::open(&url, &crate::store::StoreOptions::default()).await.expect("a store");
        store.migrate().await.expect("migrated");
        let mut bell = store.commit_bell().expect("a bell for a file's database");
        let task = crate::model::NewTask::new("noop", "{}");
        store.add_tasks(&[task], chrono::Utc::now()).await.expect("added");
        let rang = tokio::time::timeout(std::time::Duration::from_secs(5), bell.rung()).await;
        assert!(matches!(rang, Ok(Ok(()))), "the commit did not ring: {rang:?}");
        let memory =
            crate::store::open("sqlite::memory:", &crate::store::StoreOptions::default()).await.expect("a store");
        assert!(memory.commit_bell().is_none(), "a database in memory has no file to hear");
    }
}
