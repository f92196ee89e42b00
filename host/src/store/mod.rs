//! Persistence: one [`Store`] trait, implemented once ([`shared::SqlStore`]) over a small
//! part per database ([`dialect::Dialect`]: `sqlite.rs`, `postgres.rs`, `mysql.rs`).
//!
//! All SQL lives here. Statements shared by every database are written once, in PostgreSQL's
//! spelling, and each database's part renders them (`sql.rs`); that part holds only what truly
//! differs: adding tasks, the claim, the batched write of successes, wake-ups. The tables are
//! described once in [`schema`] and each database's migrations are checked against it. The
//! store knows nothing of wasmtime; retry decisions are made by the caller ([`crate::retry`])
//! and handed in as [`NextStep`](crate::model::NextStep)s.
//!
//! The modules form layers, each using only those below it by the path of the module that
//! defines what it uses (checked by `host/tests/it/layers.rs`): `types`, `components`, `sql`, `schema`,
//! `refusal` → `plumbing`, `connect` → `rows` → `dialect` → `interface` (the trait), `stats` →
//! `transitions` → `shared` → `sqlite`, `postgres`, `mysql` → this file, the entry.

use std::sync::Arc;

use crate::error::{Error, Result};

mod bell;
pub mod components;
mod connect;
pub mod dialect;
mod interface;
mod migrations;
#[cfg(feature = "mysql")]
pub mod mysql;
mod plumbing;
#[cfg(feature = "postgres")]
pub mod postgres;
pub(crate) mod refusal;
pub(crate) mod rows;
pub mod schema;
pub mod shared;
mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod stats;
mod transitions;
mod types;

pub use bell::CommitBell;
pub use components::Components;
pub use connect::{redact, StoreOptions};
pub use dialect::{ClaimRequest, Claimed};
pub use interface::{DataLimitWrite, SharedStore, SqlAddCheck, Store};
/// Ids a row of a queue's deleted successes spans at most (see `transitions::ends`).
pub use transitions::ends::SPAN as ENDS_SPAN;
pub use types::*;

/// Set `clock` from the database's time, when it follows the database's (a [`ServerClock`](crate::clock::ServerClock)) and
/// the database has a clock of its own; one round trip.
pub async fn sync_clock(store: &dyn Store, clock: &dyn crate::clock::Clock) -> Result<()> {
    let Some(server_clock) = clock.follows_server() else { return Ok(()) };
    let sent = std::time::Instant::now();
    if let Some(server) = store.server_time().await? {
        server_clock.observe(sent, server, std::time::Instant::now());
    }
    Ok(())
}

/// A URL of a database this build leaves out (a cargo feature), refused by name.
#[cfg(not(all(feature = "sqlite", feature = "postgres", feature = "mysql")))]
fn left_out(url: &str, name: &str, feature: &str) -> Error {
    Error::BadUrl {
        url: redact(url),
        reason: format!("this build of taskhost has no {name} support: build it with the cargo feature {feature:?}"),
    }
}

// One per database, not generic: a crate that made a `SharedStore` of a concrete store itself
// would compile every `Store` method of it again (as it would any generic it instantiates).
macro_rules! shared_store {
    ($feature:literal, $store:ty) => {
        #[cfg(feature = $feature)]
        impl $store {
            /// This store as the rest of taskhost holds it (sharing its pool).
            #[inline(never)]
            pub fn shared(&self) -> SharedStore {
                Arc::new(self.clone())
            }
        }
    };
}
shared_store!("sqlite", sqlite::SqliteStore);
shared_store!("postgres", postgres::PostgresStore);
shared_store!("mysql", mysql::MySqlStore);

/// Whether opening the store `url` names would make a file: a SQLite database whose file does
/// not exist yet (nothing can be deployed in it).
pub fn opening_makes_a_file(url: &str) -> bool {
    #[cfg(feature = "sqlite")]
    if url.starts_with("sqlite:") {
        return sqlite::makes_a_file(url);
    }
    let _ = url;
    false
}

/// Open the store a URL names: `sqlite://PATH`, `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` or
/// `mysql://` (also `mariadb://`) `USER[:PASSWORD]@HOST[:PORT]/DB`.
// Boxed here, not `async fn`: a crate awaiting an `async fn` of this one compiles its body (and
// every store it makes) again, as it would a generic; a boxed future is compiled once, here.
#[inline(never)]
pub fn open<'a>(url: &'a str, options: &'a StoreOptions) -> futures::future::BoxFuture<'a, Result<SharedStore>> {
    Box::pin(open_now(url, options))
}

async fn open_now(url: &str, options: &StoreOptions) -> Result<SharedStore> {
    let scheme = url.split_once("://").map(|(s, _)| s).or_else(|| url.split_once(':').map(|(s, _)| s));
    let store: SharedStore = match scheme {
        #[cfg(feature = "sqlite")]
        Some("sqlite") => sqlite::SqliteStore::connect(url, options).await?.shared(),
        #[cfg(feature = "postgres")]
        Some("postgres") | Some("postgresql") => postgres::PostgresStore::connect(url, options).await?.shared(),
        #[cfg(feature = "mysql")]
        Some("mysql") | Some("mariadb") => mysql::MySqlStore::connect(url, options).await?.shared(),
        #[cfg(not(feature = "sqlite"))]
        Some("sqlite") => return Err(left_out(url, "SQLite", "sqlite")),
        #[cfg(not(feature = "postgres"))]
        Some("postgres") | Some("postgresql") => return Err(left_out(url, "PostgreSQL", "postgres")),
        #[cfg(not(feature = "mysql"))]
        Some("mysql") | Some("mariadb") => return Err(left_out(url, "MySQL/MariaDB", "mysql")),
        Some(other) => {
            return Err(Error::BadUrl {
                url: redact(url),
                reason: format!(
                    "unknown scheme {other:?}; use sqlite://PATH, postgres://USER@HOST/DB or mysql://USER@HOST/DB"
                ),
            })
        }
        None => {
            return Err(Error::BadUrl {
                url: redact(url),
                reason: "expected a URL such as sqlite://taskhost.db".into(),
            })
        }
    };
    if options.migrate {
        let applied = store.migrate().await?;
        if !applied.is_empty() {
            tracing::info!(?applied, "migrations applied");
        }
    }
    Ok(store)
}
