//! Key fuel: the turns of a key's due tasks laid again by the fuel its runs burn (fair shares
//! weighed by fuel, a queue's `fuel_per_turn`, docs/queue.md).
//!
//! An add spaces a key's tasks by its runs' average fuel until then, so a key that queues a
//! backlog before any of its runs has ended is given a turn a task, and a key whose runs grow
//! dearer keeps the turns its queued tasks were given. Each pass finds the keys whose average
//! has moved to more than twice, or under half, what their due tasks were laid by, and lays
//! those tasks' turns again by it (`store/shared/relay.rs`), `batch` tasks a transaction and at
//! most `batch` × `max_batches` a pass, each key's read in one statement; a key not done goes on
//! from where it stopped at the next pass.
//!
//! A key's runs are a guest's to make cheap or dear: a key laid to the end is not laid again
//! within `again_after`, so a tenant swinging its runs' cost cannot keep the database rewriting
//! its backlog. (A key only marked, its turns found as they ask already, is not held.)
//!
//! A key's weight, or a queue's fuel per turn, changed live (`limits set key:K --weight N`,
//! `limits set queue:Q --fuel-per-turn N`, or cleared) is the operator's word: in every queue,
//! fuel-weighed or not, the due tasks it touches are laid again by what is in force now at the
//! next pass, whatever `again_after` says.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::{RelayCursor, SharedStore};

/// The `[overseer.key_fuel]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// How long a key laid to the end waits before it may be laid again.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub again_after: Duration,
    /// Tasks read and moved per transaction.
    pub batch: u32,
    /// Batches per run, so one run stays short; the rest waits for the next interval.
    pub max_batches: u32,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
    /// Its default wait before a key is laid again.
    pub const DEFAULT_AGAIN_AFTER: Duration = Duration::from_secs(30);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 1_000;
    /// Its default batches a pass.
    pub const DEFAULT_MAX_BATCHES: u32 = 100;
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Self::DEFAULT_INTERVAL,
            again_after: Self::DEFAULT_AGAIN_AFTER,
            batch: Self::DEFAULT_BATCH,
            max_batches: Self::DEFAULT_MAX_BATCHES,
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Keys whose turns were laid again to the end.
    pub keys: u64,
    /// Tasks given another turn.
    pub tasks_moved: u64,
    /// Transactions it took.
    pub batches: u32,
}

/// The service (see the module's documentation).
pub struct KeyFuel {
    store: SharedStore,
    config: Config,
    /// Keys a pass left half done, and where they stopped.
    unfinished: Mutex<HashMap<Slot, RelayCursor>>,
    /// Keys laid to the end within `again_after`, and when.
    laid: Mutex<HashMap<Slot, DateTime<Utc>>>,
}

/// A key in a queue.
type Slot = (String, String);

/// Keys read a pass at most (those laid lately among them are passed over).
const KEYS_A_PASS: u32 = 1_000;

impl KeyFuel {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        KeyFuel { store, config, unfinished: Mutex::default(), laid: Mutex::default() }
    }
}

#[async_trait]
impl Service for KeyFuel {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let mut report = Report::default();
        let keys = self.store.keys_to_relay(KEYS_A_PASS).await?;
        let mut left = std::mem::take(&mut *self.unfinished.lock().unwrap_or_else(|e| e.into_inner()));
        let mut laid = std::mem::take(&mut *self.laid.lock().unwrap_or_else(|e| e.into_inner()));
        let lately = super::ago(now, self.config.again_after);
        laid.retain(|_, at| *at > lately);
        let mut stopped = HashMap::new();
        // Tasks a pass reads at most, in one statement a key (a read walks the key's tasks).
        let mut room = u64::from(self.config.batch) * u64::from(self.config.max_batches);
        for key in &keys {
            let slot = (key.queue.clone(), key.key.clone());
            // (A weight or fuel per turn the operator changed is laid at once.)
            if laid.contains_key(&slot) && key.asked.is_none() {
                continue;
            }
            // Gone on only at the stride it began with: a key whose average moved again starts over.
            let mut at = left.remove(&slot).filter(|c| c.stride_ps() == key.stride_ps);
            // Tasks read for it (one gone on with: some, before): a key only marked, its turns
            // as they ask already, is not held.
            let mut read = u64::from(at.is_some());
            loop {
                if room == 0 {
                    stopped.extend(at.map(|c| (slot.clone(), c)));
                    break;
                }
                let limit = u32::try_from(room).unwrap_or(u32::MAX);
                let done = self.store.relay_turns(key, at, now, limit, self.config.batch).await?;
                // A key only marked costs a statement: counted as a task read.
                room = room.saturating_sub(done.read.max(1));
                report.batches +=
                    u32::try_from(done.read.div_ceil(u64::from(self.config.batch)).max(1)).unwrap_or(u32::MAX);
                report.tasks_moved += done.moved;
                at = done.next;
                read += done.read;
                if at.is_none() {
                    report.keys += 1;
                    if read > 0 {
                        laid.insert(slot.clone(), now);
                    }
                    break;
                }
            }
        }
        *self.unfinished.lock().unwrap_or_else(|e| e.into_inner()) = stopped;
        *self.laid.lock().unwrap_or_else(|e| e.into_inner()) = laid;
        Ok(report)
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.tasks_moved > 0).then(|| {
            let tasks = crate::text::count(self.tasks_moved, "task");
            format!(
                "gave {tasks} the turns their keys' fuel and weight ask ({} done)",
                crate::text::count(self.keys, "key")
            )
        })
    }
}
