//! SQLite's write turn: one writer at a time, taken in turn by the processes sharing a file.
//!
//! SQLite lets one transaction write at a time, and a writer that finds the lock taken waits
//! in SQLite's busy handler, which sleeps between tries (up to 100 ms apart). While one process
//! writes back to back, another one's writers found the lock taken at nearly every try: a
//! worker's outcomes and heartbeats waited for seconds, and one of two workers on a file ran
//! nothing while the other ran 1,500 tasks, although each write takes well under a millisecond.
//!
//! So writers queue instead: within a process on a mutex, and between processes on a lock on
//! a file beside the database (`DB-turn`), which the kernel gives a blocked waiter as soon as it
//! is free. A process waiting for the turn says so by a shared lock on `DB-waiting`, and a
//! process about to take the turn lets such a waiter go first (for at most
//! [`Writers::DEFER_MOST`], so that a waiter that was stopped holds nobody up for long). Two
//! processes writing at once take turns.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::{timeout_at, Instant};

use crate::error::{Error, Result};

/// The writers of one database file in this process.
#[derive(Debug, Clone)]
pub(crate) struct Writers {
    in_process: Arc<Mutex<()>>,
    /// None for a database in memory, which no other process can open.
    files: Option<Arc<TurnFiles>>,
    /// How long a writer waits for its turn before it fails as busy.
    wait_most: Duration,
    /// How long a process about to take the turn lets a waiting one go first, at most.
    defer_most: Duration,
}

/// The two lock files beside a database, open once.
#[derive(Debug)]
struct TurnFiles {
    /// Held exclusively by the writer whose turn it is.
    turn: File,
    /// Held shared by each process waiting for the turn.
    waiting: File,
    /// The database's file, for messages.
    db: PathBuf,
    /// How many times this process has said it waits: tests wait on it, as a probe of
    /// `waiting` by the waiter itself looks like a waiter for a moment.
    #[cfg(test)]
    said_waiting: std::sync::atomic::AtomicUsize,
}

/// A writer's turn: held while its transaction (or lone statement) lasts.
#[derive(Debug)]
pub(crate) struct Turn {
    _files: Option<TurnHeld>,
    _in_process: OwnedMutexGuard<()>,
}

/// The file lock of a turn, given up when dropped.
#[derive(Debug)]
struct TurnHeld(Arc<TurnFiles>);

impl Drop for TurnHeld {
    fn drop(&mut self) {
        // Closing the file would also unlock it, but it stays open for the next turn.
        let _ = self.0.turn.unlock();
    }
}

impl Writers {
    /// How long a process about to take the turn lets a waiting one go first, at most.
    pub const DEFER_MOST: Duration = Duration::from_millis(100);

    /// The writers of the database file `db` (None: in memory), waiting at most `wait_most`
    /// for a turn; the lock files are created beside it.
    pub fn open(db: Option<&Path>, wait_most: Duration) -> Result<Self> {
        let files = match db {
            Some(db) => Some(Arc::new(TurnFiles {
                turn: lock_file(db, "turn")?,
                waiting: lock_file(db, "waiting")?,
                db: db.to_path_buf(),
                #[cfg(test)]
                said_waiting: Default::default(),
            })),
            None => None,
        };
        Ok(Writers { in_process: Arc::default(), files, wait_most, defer_most: Self::DEFER_MOST })
    }

    /// Wait for this writer's turn.
    pub async fn turn(&self) -> Result<Turn> {
        let deadline = Instant::now() + self.wait_most;
        let in_process =
            timeout_at(deadline, self.in_process.clone().lock_owned()).await.map_err(|_| self.timed_out())?;
        let Some(files) = &self.files else {
            return Ok(Turn { _files: None, _in_process: in_process });
        };
        // Nobody waiting and the turn free: no thread needed.
        if !files.others_wait().map_err(|e| files.failed(e))? && files.try_take().map_err(|e| files.failed(e))? {
            return Ok(Turn { _files: Some(TurnHeld(files.clone())), _in_process: in_process });
        }
        // Blocking waits, in a thread of their own. A caller that gives up leaves the thread to
        // take the turn and give it up at once, keeping this process's writers queued meanwhile.
        let (files, defer_most) = (files.clone(), self.defer_most);
        let wait = tokio::task::spawn_blocking(move || {
            files.wait_for_turn(defer_most)?;
            Ok::<_, io::Error>(Turn { _files: Some(TurnHeld(files)), _in_process: in_process })
        });
        match timeout_at(deadline, wait).await {
            Ok(Ok(Ok(turn))) => Ok(turn),
            Ok(Ok(Err(e))) => Err(self.failed(e)),
            Ok(Err(joined)) => Err(self.failed(io::Error::other(joined.to_string()))),
            Err(_) => Err(self.timed_out()),
        }
    }

    fn timed_out(&self) -> Error {
        let why = format!("no write turn within {:?}: another writer held it all that time", self.wait_most);
        self.failed(io::Error::new(io::ErrorKind::TimedOut, why))
    }

    fn failed(&self, e: io::Error) -> Error {
        match &self.files {
            Some(files) => files.failed(e),
            None => Error::io("waiting for the write turn", e),
        }
    }
}

impl TurnFiles {
    /// Whether another process waits for the turn.
    fn others_wait(&self) -> io::Result<bool> {
        match self.waiting.try_lock() {
            Ok(()) => self.waiting.unlock().map(|()| false),
            Err(TryLockError::WouldBlock) => Ok(true),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// Take the turn if it is free.
    fn try_take(&self) -> io::Result<bool> {
        match self.turn.try_lock() {
            Ok(()) => Ok(true),
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// Let the processes already waiting go first (for a while), then wait for the turn, saying so.
    fn wait_for_turn(&self, defer_most: Duration) -> io::Result<()> {
        let until = std::time::Instant::now() + defer_most;
        while self.others_wait()? && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_micros(50));
        }
        self.waiting.lock_shared()?;
        #[cfg(test)]
        self.said_waiting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let taken = self.turn.lock();
        let told = self.waiting.unlock();
        taken?;
        if let Err(e) = told {
            let _ = self.turn.unlock();
            return Err(e);
        }
        Ok(())
    }

    fn failed(&self, e: io::Error) -> Error {
        Error::io(format!("waiting for the write turn of {}", self.db.display()), e)
    }
}

/// `DB-what`, beside the database, opened (created) for locking.
fn lock_file(db: &Path, what: &str) -> Result<File> {
    let mut name = db.as_os_str().to_owned();
    name.push(format!("-{what}"));
    let path = PathBuf::from(name);
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&path).map_err(|e| Error::io(format!("cannot open the write lock file {}", path.display()), e))
}

#[cfg(test)]
mod tests;
