//! A bell that rings when a file in a directory was written: SQLite's commits append to its
//! write-ahead log, so a reader waiting for commits (the waits' watcher, `api/wait.rs`) hears
//! one at once rather than at its next tick, and costs nothing while nothing is written. It is
//! Linux's inotify; elsewhere there is none, and readers tick.

use std::io;
use std::path::Path;

/// Rings ([`CommitBell::rung`] returns) once for whatever was written in its directory since
/// the last ring: a log's appends, and any other file's writes there (a reader then finds the
/// database's change marker where it was, and reads nothing).
#[derive(Debug)]
pub struct CommitBell {
    #[cfg(target_os = "linux")]
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

#[cfg(target_os = "linux")]
impl CommitBell {
    /// A bell for the files of `dir`; Err where the system will not (inotify's limit of
    /// instances reached, a directory gone).
    pub fn watch(dir: &Path) -> io::Result<Self> {
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
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
        Ok(CommitBell { fd })
    }

    /// Wait until something was written since the last ring; many writes ring once.
    pub async fn rung(&mut self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // Events are only counted, never parsed: any size that holds one will do.
        let mut buf = [0u8; 4096];
        loop {
            let mut ready = self.fd.readable().await?;
            let mut heard = false;
            loop {
                // SAFETY: reads at most `buf.len()` bytes into `buf`, which outlives the call.
                let n = unsafe { libc::read(self.fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n > 0 {
                    heard = true;
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

#[cfg(not(target_os = "linux"))]
impl CommitBell {
    /// None here: readers tick.
    pub fn watch(_dir: &Path) -> io::Result<Self> {
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
    async fn a_bell_rings_once_for_the_writes_to_a_file_in_its_directory_and_not_before() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("db-wal");
        std::fs::write(&file, b"").expect("a file");
        let mut bell = CommitBell::watch(dir.path()).expect("a bell");
        let quiet = tokio::time::timeout(std::time::Duration::from_millis(50), bell.rung()).await;
        assert!(quiet.is_err(), "rang with nothing written");
        for _ in 0..3 {
            std::fs::write(&file, b"frame").expect("a write");
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
