//! [`SqlStore`]: the one [`Store`](super::super::interface::Store) implementation (its methods are
//! in `mod.rs`), and what it offers besides them.

use chrono::{DateTime, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::{ConnOf, SqlxDialect};
use super::tasks;
use crate::error::Result;
use crate::model::*;

/// A [`Store`](super::super::interface::Store) over one database's [`Dialect`].
#[derive(Debug, Clone)]
pub struct SqlStore<D> {
    pub(super) db: D,
    /// Counts the times this store queued tasks ([`Store::added_here`](super::super::interface::Store::added_here)).
    pub(super) added: tokio::sync::watch::Sender<u64>,
    /// Where the limited claims' deeper reads of each queue go on from (see `key_reads`).
    pub(super) deep: std::sync::Arc<super::key_reads::DeepPlaces>,
}

impl<D: Dialect> SqlStore<D> {
    /// The store over `db`.
    pub fn new(db: D) -> Self {
        SqlStore { db, added: tokio::sync::watch::Sender::new(0), deep: Default::default() }
    }

    /// `done` as it is, once this process's workers are told of any tasks it queued (`queued`
    /// says, of what it did).
    pub(super) fn telling<T>(&self, done: Result<T>, queued: impl FnOnce(&T) -> bool) -> Result<T> {
        if matches!(&done, Ok(what) if queued(what)) {
            self.added.send_modify(|n| *n = n.wrapping_add(1));
        }
        done
    }

    /// The database's part (its pool, for queueing tasks in a transaction of your own).
    pub fn dialect(&self) -> &D {
        &self.db
    }

    /// The connection pool, for callers that queue tasks in their own transaction.
    pub fn pool(&self) -> &sqlx::Pool<<D as SqlxDialect>::Db>
    where
        D: SqlxDialect,
    {
        self.db.pool()
    }

    /// Queue validated tasks on the caller's connection or transaction: they are committed
    /// (or rolled back) with the caller's own writes. Keyed tasks take their turns exactly only
    /// in a transaction (it holds their keys' rows; on a bare connection two adds of one key at
    /// once may take the same turns).
    pub async fn add_tasks_in(conn: &mut ConnOf<D>, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        tasks::add_tasks_in::<D>(conn, tasks, now).await
    }
}
