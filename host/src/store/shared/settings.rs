//! What the operator's configuration tells the database's own functions, which cannot read the
//! file: `[tasks] max_data_bytes`, the data `taskhost_add` takes in SQL (docs/clients.md), kept in
//! `task_counters` as `max_data_bytes` (a row the migrations made with the default).

use super::super::dialect::Dialect;
use super::super::plumbing::Cells;
use super::super::sql::args;
use crate::error::Result;

/// Write `bytes` as the data limit of `taskhost_add` where it differs; the limit it replaced, if
/// it did. Nothing when the database has no such row (migrated before it, by an older host).
pub async fn set_sql_data_limit<D: Dialect>(db: &D, bytes: u64) -> Result<Option<u64>> {
    let found = db.rows(None, "SELECT v FROM task_counters WHERE name = 'max_data_bytes'", &[]).await?;
    let Some(was) = found.first().map(|r| r.int("v")).transpose()?.flatten() else {
        return Ok(None);
    };
    let bytes_i = i64::try_from(bytes).unwrap_or(i64::MAX);
    if was == bytes_i {
        return Ok(None);
    }
    // (Read first: a process opening the database with the limit written, the usual case, writes
    // nothing, and SQLite's one write turn is not taken for it.)
    db.exec(None, "UPDATE task_counters SET v = $1 WHERE name = 'max_data_bytes'", args![bytes_i]).await?;
    Ok(Some(u64::try_from(was).unwrap_or(0)))
}
