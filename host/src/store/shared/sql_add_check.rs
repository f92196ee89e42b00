//! The database's check of handlers queued in SQL (`[tasks] sql_add_handlers = "deployed"`,
//! docs/clients.md): a trigger by which `taskhost_add` refuses a handler not deployed into the
//! database, made and dropped by `taskhost migrate` alone (it is DDL, which waits for callers'
//! transactions), and there only while asked for.
//!
//! - What `migrate` made is written in `task_counters` (`sql_add_handlers`: the check's version, 0
//!   for none), read by a worker or `serve` starting (a role without the TRIGGER privilege sees no
//!   trigger in MySQL's catalog) and compared with the version here, so a later release's check
//!   replaces an older one.
//! - The host's own inserts are not checked: the host knows its plugins directories too, and a
//!   run's children must never fail their run's end. On PostgreSQL its sessions say
//!   `taskhost.host = on`, on MySQL and MariaDB `@taskhost_host = 1` (each set as a connection
//!   opens); on SQLite the host never inserts through the `taskhost_add` view the trigger is on.
//!   [`read`] tells whether this process's sessions say so (a pooler in transaction mode may
//!   hand a statement a session that never did).
//! - A migration that makes SQLite's view again drops its triggers: after migrations are applied,
//!   [`after_migrations`] makes the check again where `task_counters` says it was made.

use super::super::dialect::Dialect;
use super::super::interface::SqlAddCheck;
use super::super::plumbing::Cells;
use super::super::types::Backend;
use crate::error::Result;

/// The check's version: a change to its SQL below is a new version, made again by `migrate`.
const VERSION: i64 = 1;

/// Each database's SQL: `found` reads whether the trigger is there, `make` and `drop` change it,
/// `marked` reads whether a pooled session is the host's.
struct Sql {
    found: &'static str,
    make: &'static [&'static str],
    drop: &'static [&'static str],
    marked: &'static str,
}

// DDL waits at most 10 s for a caller's transaction holding `task_queue`; while it waits,
// writes to the table wait behind it. The function runs with its owner's rights (a role
// granted the tasks' tables alone may queue), reading this schema's tables alone
// (`pg_temp` last in its path, as PostgreSQL advises for SECURITY DEFINER).
const POSTGRES: Sql = Sql {
    found: "SELECT 1 AS found FROM pg_trigger WHERE tgname = 'taskhost_sql_add_handlers'
            AND tgrelid = 'task_queue'::regclass",
    make: &[
        "SET LOCAL lock_timeout = '10s'",
        r#"CREATE OR REPLACE FUNCTION taskhost_sql_add_handlers() RETURNS trigger
           LANGUAGE plpgsql SECURITY DEFINER AS $fn$
           BEGIN
               IF NOT EXISTS (SELECT 1 FROM task_handler_releases WHERE handler = NEW.task_handler_class) THEN
                   RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
                       'taskhost_add: invalid handler: %s is not deployed ([tasks] sql_add_handlers = "deployed")',
                       NEW.task_handler_class);
               END IF;
               RETURN NEW;
           END
           $fn$"#,
        "DO $do$
         BEGIN
             EXECUTE format('ALTER FUNCTION taskhost_sql_add_handlers() SET search_path = %I, pg_temp',
                 current_schema());
             IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'taskhost_sql_add_handlers'
                     AND tgrelid = 'task_queue'::regclass) THEN
                 CREATE TRIGGER taskhost_sql_add_handlers BEFORE INSERT ON task_queue FOR EACH ROW
                 WHEN (current_setting('taskhost.host', true) IS DISTINCT FROM 'on')
                 EXECUTE FUNCTION taskhost_sql_add_handlers();
             END IF;
         END
         $do$",
    ],
    drop: &[
        "SET LOCAL lock_timeout = '10s'",
        "DO $do$
         BEGIN
             IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'taskhost_sql_add_handlers'
                     AND tgrelid = 'task_queue'::regclass) THEN
                 DROP TRIGGER taskhost_sql_add_handlers ON task_queue;
             END IF;
         END
         $do$",
        "DROP FUNCTION IF EXISTS taskhost_sql_add_handlers()",
    ],
    marked: "SELECT CASE WHEN current_setting('taskhost.host', true) = 'on' THEN 1 ELSE 0 END AS ok",
};

// (A message of at most 128 characters, MySQL's bound: the name's first 40.)
const MYSQL: Sql = Sql {
    found: "SELECT 1 AS found FROM information_schema.TRIGGERS
            WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = 'taskhost_sql_add_handlers'",
    make: &[
        "SET SESSION lock_wait_timeout = 10",
        "DROP TRIGGER IF EXISTS taskhost_sql_add_handlers",
        r#"CREATE TRIGGER taskhost_sql_add_handlers BEFORE INSERT ON task_queue FOR EACH ROW
           BEGIN
               DECLARE v_msg VARCHAR(128) CHARACTER SET utf8mb4;
               IF NOT (@taskhost_host <=> 1) THEN
                   IF NOT EXISTS (SELECT 1 FROM task_handler_releases WHERE handler = NEW.task_handler_class) THEN
                       SET v_msg = CONCAT('taskhost_add: invalid handler: ',
                           LEFT(COALESCE(NEW.task_handler_class, ''), 40),
                           ' is not deployed ([tasks] sql_add_handlers = "deployed")');
                       SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
                   END IF;
               END IF;
           END"#,
        "SET SESSION lock_wait_timeout = DEFAULT",
    ],
    drop: &[
        "SET SESSION lock_wait_timeout = 10",
        "DROP TRIGGER IF EXISTS taskhost_sql_add_handlers",
        "SET SESSION lock_wait_timeout = DEFAULT",
    ],
    marked: "SELECT CASE WHEN @taskhost_host <=> 1 THEN 1 ELSE 0 END AS ok",
};

// A name that is no handler's is left to the view's own trigger, which says so, whichever
// of the two SQLite fires first (it promises no order; either's RAISE undoes the
// statement whole). RAISE takes no name.
const SQLITE: Sql = Sql {
    found: "SELECT 1 AS found FROM sqlite_master WHERE type = 'trigger' AND name = 'taskhost_sql_add_handlers'",
    make: &[
        "DROP TRIGGER IF EXISTS taskhost_sql_add_handlers",
        r#"CREATE TRIGGER taskhost_sql_add_handlers INSTEAD OF INSERT ON taskhost_add
           WHEN typeof(NEW.handler) = 'text' AND length(NEW.handler) BETWEEN 1 AND 128
               AND NEW.handler NOT GLOB '*[^A-Za-z0-9_-]*'
               AND NOT EXISTS (SELECT 1 FROM task_handler_releases WHERE handler = NEW.handler)
           BEGIN
               SELECT RAISE(ABORT, 'taskhost_add: invalid handler: not deployed ([tasks] sql_add_handlers = "deployed")');
           END"#,
    ],
    drop: &["DROP TRIGGER IF EXISTS taskhost_sql_add_handlers"],
    marked: "SELECT 1 AS ok",
};

fn sql(backend: Backend) -> &'static Sql {
    match backend {
        Backend::Postgres => &POSTGRES,
        Backend::MySql => &MYSQL,
        Backend::Sqlite => &SQLITE,
    }
}

/// The version `task_counters` says `migrate` made (0: none).
async fn made<D: Dialect>(db: &D) -> Result<i64> {
    let rows = db.rows(None, "SELECT v FROM task_counters WHERE name = 'sql_add_handlers'", &[]).await?;
    Ok(rows.first().map(|r| r.int("v")).transpose()?.flatten().unwrap_or(0))
}

async fn found<D: Dialect>(db: &D) -> Result<bool> {
    Ok(!db.rows(None, sql(D::BACKEND).found, &[]).await?.is_empty())
}

/// Make (`deployed_only`) or drop the check, and write what was done where workers read it.
async fn apply<D: Dialect>(db: &D, deployed_only: bool) -> Result<()> {
    let (statements, version) = if deployed_only { (sql(D::BACKEND).make, VERSION) } else { (sql(D::BACKEND).drop, 0) };
    let row = format!("INSERT INTO task_counters (name, v) VALUES ('sql_add_handlers', {version})");
    let mut all = statements.to_vec();
    all.extend(["DELETE FROM task_counters WHERE name = 'sql_add_handlers'", row.as_str()]);
    db.script(&all).await
}

/// Make the database refuse, in `taskhost_add`, a handler not deployed into it (`deployed_only`),
/// or take any again; whether that changed anything (nothing is written when it did not).
pub async fn set<D: Dialect>(db: &D, deployed_only: bool) -> Result<bool> {
    let want = if deployed_only { VERSION } else { 0 };
    if made(db).await? == want && found(db).await? == deployed_only {
        return Ok(false);
    }
    apply(db, deployed_only).await?;
    Ok(true)
}

/// After migrations were applied (`applied` not empty): the check made again where `migrate` made
/// it and it is gone (a migration that made SQLite's view again dropped it). A failure is said,
/// not returned: a role that may migrate but not make triggers still opens the store.
pub async fn after_migrations<D: Dialect>(db: &D, applied: &[String]) {
    if applied.is_empty() {
        return;
    }
    if let Err(e) = keep(db).await {
        tracing::warn!("making the check of handlers queued in SQL ([tasks] sql_add_handlers) again failed: {e}");
    }
}

async fn keep<D: Dialect>(db: &D) -> Result<()> {
    if made(db).await? > 0 && !found(db).await? {
        tracing::info!("the check of handlers queued in SQL ([tasks] sql_add_handlers) made again after migrations");
        apply(db, true).await?;
    }
    Ok(())
}

/// Whether `migrate` made the check (what a worker or `serve` compares with its file), and whether
/// this process's pooled sessions are marked as the host's, so the check lets its own inserts by.
pub async fn read<D: Dialect>(db: &D) -> Result<SqlAddCheck> {
    let rows = db.rows(None, sql(D::BACKEND).marked, &[]).await?;
    let host_marked = rows.first().map(|r| r.int("ok")).transpose()?.flatten() == Some(1);
    Ok(SqlAddCheck { deployed_only: made(db).await? > 0, host_marked })
}
