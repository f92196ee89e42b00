//! What this database's refusals mean.

use super::Refusal;

/// What a MySQL or MariaDB refusal means, by its error number (its SQLSTATE lumps a lock wait
/// timeout, a bad string and many more together as `HY000`).
pub(super) fn refusal(db: &dyn sqlx::error::DatabaseError) -> Option<Refusal> {
    let e = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()?;
    Some(match e.number() {
        // Deadlock, lock wait timeout (MariaDB's answer to `NOWAIT` too), a deadlock on the
        // auto-increment lock, MySQL's answer to `NOWAIT`.
        1213 | 1205 | 1467 | 3572 => Refusal::Contention,
        // Data too long, bad string, out of range, null, packet too large, bad value.
        1406 | 1366 | 1264 | 1048 | 1153 | 1301 | 1292 => Refusal::Data,
        1146 => Refusal::MissingTable,
        // Access denied (with a password, or without one: 1698), the account locked (MySQL's
        // number, MariaDB's).
        1045 | 1698 | 3118 | 4151 => Refusal::Authentication,
        1049 => Refusal::NoDatabase,
        // Too many connections (the server's, the user's), shutting down, read-only, the
        // connection killed or the query interrupted, a table or disk full.
        1040 | 1203 | 1226 | 1053 | 1290 | 1836 | 1927 | 1317 | 1114 | 1021 => Refusal::Unavailable,
        _ => super::by_kind(db).unwrap_or(Refusal::Other),
    })
}
