//! What the operator's configuration tells the database's own functions, which cannot read the
//! file: `[tasks] max_data_bytes`, the data `taskhost_add` takes in SQL (docs/clients.md), kept in
//! `task_counters` as `max_data_bytes` (a row the migrations made with the default).

use super::super::dialect::Dialect;
use super::super::interface::DataLimitWrite;
use super::super::plumbing::Cells;
use super::super::sql::args;
use super::super::types::Backend;
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

/// The trigger by which the database refuses, in SQL's `taskhost_add`, a handler not deployed
/// into it (`[tasks] sql_add_handlers = "deployed"`), on each database: `found` reads whether it
/// is there, `make` and `drop` change it. It exists only while asked for, so a database told
/// `any` (the default) pays nothing for it. The host's own inserts are not checked (they were,
/// as the host knows its plugins directories too, and a run's children must never fail their
/// run's end): on PostgreSQL its sessions say `taskhost.host = on` (a startup option), on
/// MySQL and MariaDB `@taskhost_host` (set at connect); on SQLite the host never inserts
/// through the `taskhost_add` view the trigger is on (a migration making that view again drops
/// it, and `taskhost migrate` makes it again after the migrations).
struct SqlAddCheck {
    found: &'static str,
    make: &'static [&'static str],
    drop: &'static [&'static str],
}

fn sql_add_check(backend: Backend) -> SqlAddCheck {
    match backend {
        // (DDL waits at most 10 s for a caller's transaction holding `task_queue`.)
        Backend::Postgres => SqlAddCheck {
            found: "SELECT 1 AS found FROM pg_trigger WHERE tgname = 'taskhost_sql_add_handlers'
                    AND tgrelid = 'task_queue'::regclass",
            make: &[
                "SET LOCAL lock_timeout = '10s'",
                // With its owner's rights: a role granted the tasks' tables alone may queue.
                r#"CREATE OR REPLACE FUNCTION taskhost_sql_add_handlers() RETURNS trigger
                   LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
                   BEGIN
                       IF NOT EXISTS (SELECT 1 FROM task_handler_releases WHERE handler = NEW.task_handler_class) THEN
                           RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
                               'taskhost_add: invalid handler: %s is not deployed ([tasks] sql_add_handlers = "deployed")',
                               NEW.task_handler_class);
                       END IF;
                       RETURN NEW;
                   END
                   $fn$"#,
                "DROP TRIGGER IF EXISTS taskhost_sql_add_handlers ON task_queue",
                "CREATE TRIGGER taskhost_sql_add_handlers BEFORE INSERT ON task_queue FOR EACH ROW
                 WHEN (current_setting('taskhost.host', true) IS DISTINCT FROM 'on')
                 EXECUTE FUNCTION taskhost_sql_add_handlers()",
            ],
            drop: &[
                "SET LOCAL lock_timeout = '10s'",
                "DROP TRIGGER IF EXISTS taskhost_sql_add_handlers ON task_queue",
                "DROP FUNCTION IF EXISTS taskhost_sql_add_handlers()",
            ],
        },
        // (A message of at most 128 characters, MySQL's bound: the name's first 40.)
        Backend::MySql => SqlAddCheck {
            found: "SELECT 1 AS found FROM information_schema.TRIGGERS
                    WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = 'taskhost_sql_add_handlers'",
            make: &[
                "SET SESSION lock_wait_timeout = 10",
                "DROP TRIGGER IF EXISTS taskhost_sql_add_handlers",
                r#"CREATE TRIGGER taskhost_sql_add_handlers BEFORE INSERT ON task_queue FOR EACH ROW
                   BEGIN
                       DECLARE v_msg VARCHAR(128);
                       IF @taskhost_host IS NULL THEN
                           IF NOT EXISTS (SELECT 1 FROM task_handler_releases WHERE handler = NEW.task_handler_class) THEN
                               SET v_msg = CONCAT('taskhost_add: invalid handler: ', LEFT(NEW.task_handler_class, 40),
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
        },
        // A name that is no handler's is left to the view's own trigger, which says so, whichever
        // of the two SQLite fires first (it promises no order; either's RAISE undoes the
        // statement whole). RAISE takes no name.
        Backend::Sqlite => SqlAddCheck {
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
        },
    }
}

/// Make the database refuse, in `taskhost_add`, a handler not deployed into it (`deployed_only`),
/// or take any again; whether that changed anything (nothing is written when it did not: the
/// DDL waits for callers' transactions).
pub async fn set_sql_add_handlers<D: Dialect>(db: &D, deployed_only: bool) -> Result<bool> {
    let check = sql_add_check(D::BACKEND);
    if sql_add_deployed_only(db).await? == deployed_only {
        return Ok(false);
    }
    db.script(if deployed_only { check.make } else { check.drop }).await?;
    Ok(true)
}

/// Whether the database refuses, in `taskhost_add`, a handler not deployed into it (its check is
/// there: one read of the catalog).
pub async fn sql_add_deployed_only<D: Dialect>(db: &D) -> Result<bool> {
    Ok(!db.rows(None, sql_add_check(D::BACKEND).found, &[]).await?.is_empty())
}
