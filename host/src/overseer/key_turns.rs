//! Key turns: the rows of `task_keys` (each key's last turn in each queue, fair shares, see
//! docs/queue.md) whose turn is more than a day old and whose key has no unfinished task in that
//! queue are deleted, in bounded batches, so the table grows with the keys active lately, not
//! with every key ever queued (a platform's users, say).
//!
//! A key's row only puts its next task's turn after its last one. A turn is not a clock (in a
//! queue with a backlog, turns read as far back as its head), so a key with tasks waiting or
//! running keeps its row, whatever its turn: its next task stays behind them. A key with none
//! starts at its queue's head when it comes back, as a new key does. A row an add holds is
//! skipped; an add waits for one held here, and queues its task once it is gone.
//!
//! The same pass deletes the pace marks of keys (`task_key_paces`, a queue's rate per key) older
//! than `idle_for` (a mark in the past allows what no mark does), and the fuel averages of keys
//! (`task_key_fuel`, a queue's `fuel_per_turn`) with neither a turn nor an unfinished task left.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Service, Summary};
use crate::error::Result;
use crate::store::SharedStore;

/// The `[overseer.key_turns]` settings.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// How often it runs.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub interval: Duration,
    /// Rows whose turn is older than this are deleted.
    #[serde(deserialize_with = "crate::sandbox::limits::duration")]
    pub idle_for: Duration,
    /// Rows deleted per transaction.
    pub batch: u32,
    /// Batches per run, so one run stays short; the rest waits for the next interval.
    pub max_batches: u32,
}

impl Config {
    /// Its default interval.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);
    /// Its default idle time.
    pub const DEFAULT_IDLE_FOR: Duration = Duration::from_secs(24 * 3600);
    /// Its default batch.
    pub const DEFAULT_BATCH: u32 = 1_000;
    /// Its default batches a pass.
    pub const DEFAULT_MAX_BATCHES: u32 = 100;
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Self::DEFAULT_INTERVAL,
            idle_for: Self::DEFAULT_IDLE_FOR,
            batch: Self::DEFAULT_BATCH,
            max_batches: Self::DEFAULT_MAX_BATCHES,
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Rows deleted.
    pub rows_deleted: u64,
    /// Transactions it took.
    pub batches: u32,
}

/// The service (see the module's documentation).
pub struct KeyTurns {
    store: SharedStore,
    config: Config,
}

impl KeyTurns {
    /// The service over `store`, set by `config`.
    pub fn new(store: SharedStore, config: Config) -> Self {
        KeyTurns { store, config }
    }
}

#[async_trait]
impl Service for KeyTurns {
    type Report = Report;

    async fn run_once(&self, now: DateTime<Utc>) -> Result<Report> {
        let before = super::ago(now, self.config.idle_for);
        let (rows_deleted, batches) = super::in_batches(self.config.batch, self.config.max_batches, || {
            self.store.prune_key_turns(before, self.config.batch)
        })
        .await?;
        Ok(Report { rows_deleted, batches })
    }
}

impl Summary for Report {
    fn summary(&self) -> Option<String> {
        (self.rows_deleted > 0).then(|| format!("deleted {}", crate::text::count(self.rows_deleted, "idle key's turn")))
    }
}
