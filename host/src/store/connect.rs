//! The options of opening a store, a connection to a server, and naming a URL without its
//! password.

use std::time::Duration;

/// A database URL without its password, for messages and logs: the password between `:` and
/// the last `@` (even one holding `/`, `?` or `#`) and any `password=` parameter are masked.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some(parts) => parts,
        None => ("", url),
    };
    let prefix = if scheme.is_empty() { String::new() } else { format!("{scheme}://") };
    let (creds, tail) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let creds = match creds {
        Some(c) => match c.split_once(':') {
            Some((user, _)) => format!("{user}:***@"),
            None => format!("{c}@"),
        },
        None => String::new(),
    };
    // Query parameters: password=… (and anything after it up to the next &) masked.
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{prefix}{creds}{tail}")
}

/// Connecting to a database server (PostgreSQL, MySQL/MariaDB), in builds that have one.
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod server {
    use std::time::Duration;

    use crate::error::{Error, Result};
    use crate::store::connect::redact;

    /// A pool for a database server, once a first connection showed that it answers: at least two
    /// connections (PostgreSQL's LISTEN holds one), each waited for at most ten seconds.
    /// `tune`: what a database's part adds to the pool's options.
    pub(in crate::store) async fn server_pool<DB: sqlx::Database>(
        url: &str,
        opts: <DB::Connection as sqlx::Connection>::Options,
        options: &crate::store::connect::StoreOptions,
        tune: impl FnOnce(sqlx::pool::PoolOptions<DB>) -> sqlx::pool::PoolOptions<DB>,
    ) -> Result<sqlx::Pool<DB>> {
        first_connection::<DB::Connection>(url, &opts, options.connect_timeout).await?;
        let pool = sqlx::pool::PoolOptions::<DB>::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(Duration::from_secs(10));
        Ok(tune(pool).connect_lazy_with(opts))
    }

    /// Open a first connection to a server, within `timeout`, so that a server that is down, an
    /// unknown host or wrong credentials are each told apart at once.
    async fn first_connection<C: sqlx::Connection>(url: &str, options: &C::Options, timeout: Duration) -> Result<()> {
        match tokio::time::timeout(timeout, C::connect_with(options)).await {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
                Ok(())
            }
            Ok(Err(e)) => Err(connect_error(url, &e)),
            Err(_) => Err(Error::Connect {
                url: redact(url),
                reason: format!("no answer within {} (--connect-timeout)", crate::text::duration(timeout)),
            }),
        }
    }

    fn connect_error(url: &str, e: &sqlx::Error) -> Error {
        let reason = match e {
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                "connection refused: no server is listening there".to_string()
            }
            sqlx::Error::Io(io) if io.to_string().contains("lookup") => format!("unknown host ({io})"),
            sqlx::Error::Database(db) => match crate::store::refusal::refusal(db.as_ref()) {
                crate::store::refusal::Refusal::Authentication => format!("authentication failed: {}", db.message()),
                crate::store::refusal::Refusal::NoDatabase => format!("no such database: {}", db.message()),
                _ => db.message().to_string(),
            },
            other => other.to_string(),
        };
        Error::Connect { url: redact(url), reason }
    }
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(super) use server::server_pool;

#[cfg(test)]
mod tests {
    use crate::store::connect::redact;

    #[test]
    fn passwords_are_masked_wherever_they_stand() {
        assert_eq!(redact("postgres://u:pw@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(redact("postgres://u:p/w?x#y@h/db"), "postgres://u:***@h/db");
        assert_eq!(
            redact("postgres://u@h/db?password=s3cret&sslmode=off"),
            "postgres://u@h/db?password=***&sslmode=off"
        );
        assert_eq!(redact("sqlite://queue.db"), "sqlite://queue.db");
        assert!(!redact("foo://u:sekrit@host/db").contains("sekrit"));
    }
}

/// Options for opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Apply migrations on open.
    pub migrate: bool,
    /// Connections to a database server at most.
    pub max_connections: u32,
    /// How long the first connection to a server may take before opening fails.
    pub connect_timeout: Duration,
    /// The largest value the host will write (task data, or results with logs): a server whose
    /// statements cannot hold it with [`StoreOptions::STATEMENT_MARGIN`] besides (MySQL's
    /// `max_allowed_packet`) is refused when the store opens, with what to set.
    pub max_value_bytes: usize,
}

impl StoreOptions {
    /// How long a first connection may take.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
    /// The default limits' largest value: results of 1 MiB with 64 KiB of logs.
    pub const DEFAULT_MAX_VALUE_BYTES: usize = (1 << 20) + (64 << 10);
    /// Room in a statement for everything besides its largest value (other columns, an error
    /// message, a few small outcomes batched with a large one).
    pub const STATEMENT_MARGIN: usize = 1 << 20;
    /// Most bytes of values written together in one statement by default: a chunk of a bulk
    /// add, a batch of outcomes (the worker's `finish_batch_bytes`). One value larger than this
    /// is written alone.
    pub const BATCH_BYTES: usize = 4 << 20;
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            migrate: true,
            max_connections: 4,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            max_value_bytes: Self::DEFAULT_MAX_VALUE_BYTES,
        }
    }
}
