//! The tables: the migrations applied (and after them, what they may have dropped of the
//! operator's check of handlers queued in SQL made again), whether they exist, and whether the
//! database answers at all.

use super::super::dialect::Dialect;
use super::sql_add_check;
use crate::error::{Error, Result};

/// Apply the migrations not applied yet; those applied now (`0005 registration`).
pub async fn migrate<D: Dialect>(db: &D) -> Result<Vec<String>> {
    let applied = db.migrate().await?;
    sql_add_check::after_migrations(db, &applied).await;
    Ok(applied)
}

/// The database answers: a statement that reads no table, so that a health probe neither waits
/// for a lock on one nor costs more as the tasks grow.
pub async fn ping<D: Dialect>(db: &D) -> Result<()> {
    db.rows(None, "SELECT 1 AS one", &[]).await.map(|_| ())
}

/// [`Error::NotMigrated`] when the tables do not exist.
pub async fn check_migrated<D: Dialect>(db: &D) -> Result<()> {
    match db.rows(None, "SELECT id FROM task_queue WHERE id = 0", &[]).await {
        Err(e) if e.is_missing_table() => Err(Error::NotMigrated),
        other => other.map(|_| ()),
    }
}
