//! What this database's refusals mean.

use super::Refusal;

/// What a SQLite refusal means (by its primary result code): busy and locked are contention;
/// too big, constraint and mismatch are the data; "no such table" is not migrated.
pub(super) fn refusal(db: &dyn sqlx::error::DatabaseError) -> Option<Refusal> {
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    let primary = db.code().and_then(|c| c.parse::<i32>().ok()).map(|c| c & 0xff);
    Some(match primary {
        Some(5 | 6) => Refusal::Contention,
        // Too big, constraint, mismatch.
        Some(18..=20) => Refusal::Data,
        // Read-only, an I/O error, the disk full, the file not to be opened.
        Some(8 | 10 | 13 | 14) => Refusal::Unavailable,
        _ if db.message().starts_with("no such table") => Refusal::MissingTable,
        _ => super::by_kind(db).unwrap_or(Refusal::Other),
    })
}
