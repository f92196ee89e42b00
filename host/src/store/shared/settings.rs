//! What the operator's configuration tells the database's own functions, which cannot read the
//! file: `[tasks] max_data_bytes`, the data `taskhost_add` takes in SQL (docs/clients.md), kept in
//! `task_counters` as `max_data_bytes` (a row the migrations made with the default).

use super::super::dialect::Dialect;
use super::super::interface::DataLimitWrite;
use super::super::plumbing::Cells;
use super::super::sql::args;
use crate::error::Result;

/// Write `bytes` as the data limit of `taskhost_add` where it differs (a row that was missing or
/// held no number is written all the same, so that what SQL takes follows the file).
pub async fn set_sql_data_limit<D: Dialect>(db: &D, bytes: u64) -> Result<DataLimitWrite> {
    // (`+ 0`: a value SQLite holds as text reads as a number, 0, and is written over. A limit is
    // never under 1 KiB.)
    let found = db.rows(None, "SELECT v + 0 AS v FROM task_counters WHERE name = 'max_data_bytes'", &[]).await?;
    let row = found.first().map(|r| r.int("v")).transpose()?;
    let was = row.flatten().and_then(|v| u64::try_from(v).ok()).filter(|&v| v > 0);
    let bytes_i = i64::try_from(bytes).unwrap_or(i64::MAX);
    // (Read first: a process opening the database with the limit written, the usual case, writes
    // nothing, and SQLite's one write turn is not taken for it.)
    if was == Some(bytes) {
        return Ok(DataLimitWrite::Unchanged);
    }
    if row.is_none() {
        let sql = "INSERT INTO task_counters (name, v) VALUES ('max_data_bytes', $1)";
        match db.exec(None, sql, args![bytes_i]).await {
            Ok(_) => return Ok(DataLimitWrite::WasUnset),
            // Another process starting wrote it meanwhile: this one's file is written over it, as
            // if it had been read.
            Err(e) if e.is_unique_violation() => {}
            Err(e) => return Err(e),
        }
    }
    db.exec(None, "UPDATE task_counters SET v = $1 WHERE name = 'max_data_bytes'", args![bytes_i]).await?;
    Ok(was.map_or(DataLimitWrite::WasUnset, DataLimitWrite::Replaced))
}
