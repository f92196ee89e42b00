//! What this database's refusals mean.

use super::Refusal;

/// What a PostgreSQL refusal means (by its SQLSTATE): serialization failure, deadlock and lock
/// not available are contention; classes 22, 23 and 54 the data.
pub(super) fn refusal(db: &dyn sqlx::error::DatabaseError) -> Option<Refusal> {
    let e = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
    Some(match e.code() {
        "40001" | "40P01" | "55P03" => Refusal::Contention,
        "42P01" => Refusal::MissingTable,
        "28P01" | "28000" => Refusal::Authentication,
        "3D000" => Refusal::NoDatabase,
        // Read-only; connection exceptions, insufficient resources, operator intervention (a
        // session ended, the server shutting down), system errors.
        "25006" => Refusal::Unavailable,
        c if ["08", "53", "57", "58"].iter().any(|class| c.starts_with(class)) => Refusal::Unavailable,
        _ => super::by_kind(db).unwrap_or(Refusal::Other),
    })
}
