//! What a database's refusal means to the host: contention (wait and try again), the data
//! itself (writing it again cannot succeed), a missing table, a refused login, an unknown
//! database. Each database's codes are in a file of their own here; this file asks those of
//! the databases compiled in, and gives [`Error`] its questions.

use sqlx::error::{DatabaseError, ErrorKind};

use crate::error::Error;

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

/// What a database's refusal means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// For want of a lock another session holds (busy, lock wait timeout, deadlock,
    /// serialization failure): waiting and trying again is the cure.
    Contention,
    /// The data itself (a value too long, invalid text, a packet over the server's limit, a
    /// constraint): writing the same again cannot succeed.
    Data,
    /// A table does not exist (not migrated).
    MissingTable,
    /// The login was refused (a server's).
    #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
    Authentication,
    /// The database named does not exist (on a server).
    #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
    NoDatabase,
    /// The server's state, not the call: shutting down, out of connections, space or memory,
    /// read-only, the session ended by an administrator.
    Unavailable,
    /// Anything else: waited out by whoever retries, and to an API's caller a fault of this
    /// program's (a statement the database cannot run), not the database's state.
    Other,
}

/// What `db`'s refusal means, as the database that gave it says.
pub(crate) fn refusal(db: &dyn DatabaseError) -> Refusal {
    #[cfg(feature = "sqlite")]
    if let Some(r) = sqlite::refusal(db) {
        return r;
    }
    #[cfg(feature = "postgres")]
    if let Some(r) = postgres::refusal(db) {
        return r;
    }
    #[cfg(feature = "mysql")]
    if let Some(r) = mysql::refusal(db) {
        return r;
    }
    by_kind(db).unwrap_or(Refusal::Other)
}

/// The refusals every database reports alike (constraints), and the SQLSTATE classes of data
/// exceptions (22), integrity (23) and program limits (54).
fn by_kind(db: &dyn DatabaseError) -> Option<Refusal> {
    match db.kind() {
        ErrorKind::UniqueViolation
        | ErrorKind::ForeignKeyViolation
        | ErrorKind::NotNullViolation
        | ErrorKind::CheckViolation => return Some(Refusal::Data),
        _ => {}
    }
    let state = db.code()?;
    ["22", "23", "54"].iter().any(|class| state.starts_with(class)).then_some(Refusal::Data)
}

fn of(e: &Error) -> Option<Refusal> {
    match e {
        Error::Database(sqlx::Error::Database(db)) => Some(refusal(db.as_ref())),
        _ => None,
    }
}

impl Error {
    /// Whether trying the same operation again later may succeed (a busy or unreachable
    /// database), as opposed to a request that is wrong in itself.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Database(
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
                | sqlx::Error::Protocol(_),
            ) => true,
            Error::Database(sqlx::Error::Database(_)) => self.is_contention(),
            Error::Io { .. } => true,
            _ => false,
        }
    }

    /// Whether the database refused for want of a lock another session holds (busy, lock wait
    /// timeout, deadlock, serialization failure): waiting and trying again is the cure.
    pub fn is_contention(&self) -> bool {
        of(self) == Some(Refusal::Contention)
    }

    /// Whether the database refused the data itself (a value too long, invalid text, a packet
    /// over the server's limit, a constraint): writing the same again cannot succeed. Anything
    /// else that fails a write (the server down, read-only, out of connections, timeouts) is the
    /// database's state, and is waited out.
    pub fn is_data_error(&self) -> bool {
        of(self) == Some(Refusal::Data)
    }

    /// Whether the database could not serve a call for its own state, as opposed to a fault
    /// of this program's: unreachable, busy, refusing the login, its database or tables gone,
    /// shutting down, full or read-only. What the API answers 503 `unavailable`, not 500.
    pub fn is_unavailable(&self) -> bool {
        self.is_retryable()
            || matches!(self, Error::Connect { .. } | Error::NotMigrated)
            || matches!(
                of(self),
                Some(
                    Refusal::Contention
                        | Refusal::MissingTable
                        | Refusal::Authentication
                        | Refusal::NoDatabase
                        | Refusal::Unavailable
                )
            )
    }

    /// Whether the database said a table does not exist.
    pub fn is_missing_table(&self) -> bool {
        of(self) == Some(Refusal::MissingTable)
    }
}
