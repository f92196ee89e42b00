//! Running shared statements through sqlx, written once for every database.
//!
//! A database's part gives a [`SqlxDialect`]: its sqlx database, its pool, its migrations and
//! `bind`, which spells a shared statement its way ([`super::sql::render`]) and binds its
//! arguments. [`Plumbing`] (transactions, statements on a transaction, the pool or a caller's
//! connection, migrations) follows for every such dialect, and [`Cells`] reads a row.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::{Migrate, Migrator};
use sqlx::{Database, Executor, IntoArguments};

use super::migrations::Embedded;
use super::sql::Arg;
use crate::error::{Error, Result};

/// A row as the shared code reads it: each column by name (or by where a name was found once,
/// see [`Col`]), NULL as `None`.
pub trait Cells {
    /// An integer cell.
    fn int<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<i64>>;
    /// A text cell.
    fn text<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<String>>;
    /// A time cell.
    fn time<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<DateTime<Utc>>>;
    /// A bytes cell.
    fn bytes<'c>(&self, col: impl Into<Col<'c>>) -> Result<Option<Vec<u8>>>;
}

/// A column to read: by its name, or at the position its name was found at in a result's first
/// row. A driver finds a name by hashing it, for every cell: read so, a claim's hundreds of rows
/// cost a worker 6 % of its CPU, 4.7 % by position (BENCHMARKS.md, session 81).
#[derive(Clone, Copy, Debug)]
pub struct Col<'a> {
    pub name: &'a str,
    pub at: Option<usize>,
}

impl<'a> From<&'a str> for Col<'a> {
    fn from(name: &'a str) -> Self {
        Col { name, at: None }
    }
}

impl<'a> From<&'a String> for Col<'a> {
    fn from(name: &'a String) -> Self {
        Col { name, at: None }
    }
}

impl<'a> Col<'a> {
    /// The column `name` where it sits in `row`, and in every row of its result (by name again
    /// if `row` lacks it, to fail so).
    pub fn found<R>(row: &R, name: &'a str) -> Self
    where
        R: sqlx::Row,
        for<'c> &'c str: sqlx::ColumnIndex<R>,
    {
        use sqlx::Column as _;
        Col { name, at: row.try_column(name).ok().map(|c| c.ordinal()) }
    }
}

/// A cell as sqlx decodes it, its type checked.
pub fn decoded<'r, R, T>(row: &'r R, col: Col<'_>) -> Result<Option<T>>
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    usize: sqlx::ColumnIndex<R>,
    Option<T>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    caught(col, || match col.at {
        Some(i) => row.try_get(i),
        None => row.try_get(col.name),
    })
}

/// A cell as sqlx decodes it, its type not checked (for drivers that report a column's type
/// otherwise than it is stored, and SQLite's text read as bytes).
#[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
pub fn unchecked<'r, R, T>(row: &'r R, col: Col<'_>) -> Result<Option<T>>
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    usize: sqlx::ColumnIndex<R>,
    Option<T>: sqlx::Decode<'r, R::Database>,
{
    caught(col, || match col.at {
        Some(i) => row.try_get_unchecked(i),
        None => row.try_get_unchecked(col.name),
    })
}

/// The cell `get` reads, its error naming `col` (as sqlx names a column read by name, not one
/// read by position), and a panic of the driver's decoding taken as its error: sqlx's
/// PostgreSQL driver panics on a time chrono cannot hold, such as `-infinity`, and a value
/// written past the host must fail its own read, not the worker's task that reads it.
fn caught<T>(col: Col<'_>, get: impl FnOnce() -> std::result::Result<T, sqlx::Error>) -> Result<T> {
    let source = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(get)) {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(sqlx::Error::ColumnDecode { source, .. })) => source,
        Ok(Err(e)) => return Err(e.into()),
        Err(panic) => crate::error::panic_text(&*panic).into(),
    };
    Err(sqlx::Error::ColumnDecode { index: format!("{:?}", col.name), source }.into())
}

/// What a writer holds while it writes, given up when dropped (SQLite's write turn).
pub type Held = Box<dyn Send + Sync>;

/// A write transaction (on SQLite, with the write turn held while it lasts).
pub struct Tx<DB: sqlx::Database> {
    pub(crate) tx: sqlx::Transaction<'static, DB>,
    pub(crate) _writing: Option<Held>,
}

impl<DB: sqlx::Database> Tx<DB> {
    /// A transaction, holding `writing` (SQLite's write turn) while it lasts.
    pub fn new(tx: sqlx::Transaction<'static, DB>, writing: Option<Held>) -> Self {
        Tx { tx, _writing: writing }
    }
}

/// A dialect's connection type.
pub type ConnOf<D> = <<D as Plumbing>::Db as sqlx::Database>::Connection;
/// A dialect's transaction type.
pub type TxOf<D> = Tx<<D as Plumbing>::Db>;

/// Running a shared statement: the same on every database but for the types, so written once,
/// for every [`SqlxDialect`].
#[async_trait]
pub trait Plumbing: Send + Sync + 'static {
    /// The sqlx database.
    type Db: sqlx::Database;
    /// A row it returns.
    type Row: Cells + Send + Sync;

    /// Create or update the tables from this database's migrations folder; the migrations
    /// applied now, as `0005 registration`.
    async fn migrate(&self) -> Result<Vec<String>>;
    /// Commit `tx`.
    async fn commit(&self, tx: TxOf<Self>) -> Result<()>;
    /// Roll back at once. (A transaction merely dropped is rolled back too, but only when its
    /// connection next goes back to the pool: until then its locks, and on SQLite the write
    /// lock, stay held.)
    async fn rollback(&self, tx: TxOf<Self>) -> Result<()>;
    /// Run a shared statement on `tx` (None: on a pooled connection); rows changed.
    async fn exec(&self, tx: Option<&mut TxOf<Self>>, sql: &str, args: &[Arg<'_>]) -> Result<u64>;
    /// Run a shared statement, in `tx` or on the pool; the rows.
    async fn rows(&self, tx: Option<&mut TxOf<Self>>, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Self::Row>>;
    /// The same on a connection (the caller's own transaction, for instance).
    async fn exec_on(conn: &mut ConnOf<Self>, sql: &str, args: &[Arg<'_>]) -> Result<u64>;
    /// [`Plumbing::rows`], on a connection of the caller's.
    async fn rows_on(conn: &mut ConnOf<Self>, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Self::Row>>;
    /// Run statements as written, unprepared (DDL such as a trigger's, which MySQL does not
    /// prepare), in one transaction (MySQL commits at each DDL statement) in the write turn.
    async fn script(&self, statements: &[&str]) -> Result<()>;
}

/// What a database's part gives for its [`Plumbing`] to be written once.
#[async_trait]
pub trait SqlxDialect: Send + Sync + 'static {
    /// The sqlx database.
    type Db: Database;
    /// Its connection pool.
    fn pool(&self) -> &sqlx::Pool<Self::Db>;
    /// Its migrations, built in.
    fn migrations(&self) -> Embedded;
    /// A shared statement in this database's spelling, with its arguments bound.
    fn bind<'a>(sql: &str, args: &[Arg<'a>]) -> Result<(String, <Self::Db as Database>::Arguments<'a>)>;
    /// What a statement that writes outside a transaction holds while it runs (SQLite: the
    /// write turn, so that it queues with the other writers rather than on SQLite's lock).
    async fn write_turn(&self) -> Result<Option<Held>> {
        Ok(None)
    }
    /// Taken before migrating, held until the migrations are applied: processes starting at
    /// once on a new database apply them one after another, each reading what the one before
    /// applied. SQLite: the write turn, given up when dropped; a server: a lock of `conn`'s
    /// session, given up by [`SqlxDialect::unlock_migrations`] (or with the connection).
    async fn lock_migrations(&self, conn: &mut <Self::Db as Database>::Connection) -> Result<Option<Held>>;
    /// Give up the session's lock [`SqlxDialect::lock_migrations`] took.
    async fn unlock_migrations(&self, _conn: &mut <Self::Db as Database>::Connection) -> Result<()> {
        Ok(())
    }
}

/// The rows a statement changed: each sqlx database's result has the method, but no trait
/// names it.
pub trait RowsAffected {
    /// How many.
    fn rows_affected(&self) -> u64;
}

#[cfg(feature = "sqlite")]
impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[cfg(feature = "postgres")]
impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[cfg(feature = "mysql")]
impl RowsAffected for sqlx::mysql::MySqlQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[async_trait]
impl<D> Plumbing for D
where
    D: SqlxDialect,
    <D::Db as Database>::Row: Cells + Send + Sync,
    <D::Db as Database>::Connection: Migrate,
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    for<'q> <D::Db as Database>::Arguments<'q>: IntoArguments<'q, D::Db>,
    <D::Db as Database>::QueryResult: RowsAffected,
{
    type Db = D::Db;
    type Row = <D::Db as Database>::Row;

    async fn migrate(&self) -> Result<Vec<String>> {
        let mut migrator = Migrator::new(self.migrations()).await?;
        // The dialect's lock instead of sqlx's, which is taken after the table of migrations is
        // made and read, and on MariaDB waits for nothing.
        migrator.set_locking(false);
        // On one connection: a SQLite connection that read the tables before another changed
        // them prepares `SELECT *` with the old columns, which sqlx then reads past.
        let mut conn = self.pool().acquire().await?;
        let held = self.lock_migrations(&mut *conn).await?;
        let applied = async {
            conn.ensure_migrations_table().await?;
            let before: Vec<i64> = conn.list_applied_migrations().await?.into_iter().map(|m| m.version).collect();
            migrator.run_direct(&mut *conn).await?;
            Ok::<_, Error>(before)
        }
        .await;
        // A session's lock not given up goes with its connection, never back to the pool.
        if self.unlock_migrations(&mut *conn).await.is_err() || applied.is_err() {
            conn.close_on_drop();
        }
        drop(held);
        let before = applied?;
        Ok(migrator
            .iter()
            .filter(|m| !m.migration_type.is_down_migration() && !before.contains(&m.version))
            .map(|m| format!("{:04} {}", m.version, m.description))
            .collect())
    }

    async fn commit(&self, tx: TxOf<Self>) -> Result<()> {
        Ok(tx.tx.commit().await?)
    }

    async fn rollback(&self, tx: TxOf<Self>) -> Result<()> {
        Ok(tx.tx.rollback().await?)
    }

    async fn exec(&self, tx: Option<&mut TxOf<Self>>, sql: &str, args: &[Arg<'_>]) -> Result<u64> {
        match tx {
            Some(tx) => Self::exec_on(&mut tx.tx, sql, args).await,
            None => {
                let _turn = self.write_turn().await?;
                Self::exec_on(&mut *self.pool().acquire().await?, sql, args).await
            }
        }
    }

    async fn rows(&self, tx: Option<&mut TxOf<Self>>, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Self::Row>> {
        match tx {
            Some(tx) => Self::rows_on(&mut tx.tx, sql, args).await,
            None => Self::rows_on(&mut *self.pool().acquire().await?, sql, args).await,
        }
    }

    async fn script(&self, statements: &[&str]) -> Result<()> {
        let _turn = self.write_turn().await?;
        let mut tx = self.pool().begin().await?;
        for sql in statements {
            (&mut *tx).execute(*sql).await?;
        }
        Ok(tx.commit().await?)
    }

    async fn exec_on(conn: &mut ConnOf<Self>, sql: &str, args: &[Arg<'_>]) -> Result<u64> {
        let (sql, args) = D::bind(sql, args)?;
        Ok(sqlx::query_with(&sql, args).execute(&mut *conn).await?.rows_affected())
    }

    async fn rows_on(conn: &mut ConnOf<Self>, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Self::Row>> {
        let (sql, args) = D::bind(sql, args)?;
        Ok(sqlx::query_with(&sql, args).fetch_all(&mut *conn).await?)
    }
}
