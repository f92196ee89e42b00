//! A connection of the test's own holding a table locked against writes (reads go on) until
//! [`Locker::unlock`]: what a database that keeps a worker's writes waiting looks like. On
//! SQLite, a write transaction held open, which holds back every write.

use super::Db;

pub enum Locker {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
    MySql(sqlx::MySqlConnection),
}

impl Locker {
    /// Lock `table` of the database at `url` against other sessions' writes.
    pub async fn lock(db: Db, url: &str, table: &str) -> Locker {
        use sqlx::{Connection, Executor};
        match db {
            Db::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
                c.execute("BEGIN IMMEDIATE").await.expect("lock");
                Locker::Sqlite(c)
            }
            Db::Postgres => {
                let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
                c.execute("BEGIN").await.expect("begin");
                c.execute(format!("LOCK TABLE {table} IN EXCLUSIVE MODE").as_str()).await.expect("lock");
                Locker::Postgres(c)
            }
            Db::MySql => {
                let mut c = sqlx::MySqlConnection::connect(url).await.expect("connect");
                c.execute(format!("LOCK TABLES {table} READ").as_str()).await.expect("lock");
                Locker::MySql(c)
            }
        }
    }

    pub async fn unlock(self) {
        use sqlx::Executor;
        match self {
            Locker::Sqlite(mut c) => drop(c.execute("COMMIT").await.expect("unlock")),
            Locker::Postgres(mut c) => drop(c.execute("COMMIT").await.expect("unlock")),
            Locker::MySql(mut c) => drop(c.execute("UNLOCK TABLES").await.expect("unlock")),
        }
    }
}

/// One statement on a connection of the test's own, outside the application's pools.
pub async fn execute(db: Db, url: &str, sql: &str) {
    use sqlx::{Connection, Executor};
    match db {
        Db::Sqlite => drop(sqlx::SqliteConnection::connect(url).await.expect("connect").execute(sql).await.expect(sql)),
        Db::Postgres => drop(sqlx::PgConnection::connect(url).await.expect("connect").execute(sql).await.expect(sql)),
        Db::MySql => drop(sqlx::MySqlConnection::connect(url).await.expect("connect").execute(sql).await.expect(sql)),
    }
}
