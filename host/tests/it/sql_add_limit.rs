//! `taskhost_add` bounds task data by the operator's `[tasks] max_data_bytes`, as every other way
//! of queueing does (docs/clients.md): the database's functions cannot read the file, so a
//! worker or `serve` started with it, and `taskhost migrate`, write the limit where they read it.

use crate::common;

use std::time::Duration;

use common::process::{signal, spawn_worker, stderr, stdout, wait_exit};
use common::{taskhost_command, wait_until, Db, Env};
use serde_json::json;
use taskhost::store::DataLimitWrite;

use super::sql_add::{add_in_shell, add_sql, shell};

/// A JSON string of `n` bytes.
fn data(n: usize) -> String {
    format!("\"{}\"", "x".repeat(n - 2))
}

/// The limit `taskhost_add` reads, as the database holds it.
fn held(db: Db, env: &Env) -> String {
    let o = shell(db, env, &["SELECT v FROM task_counters WHERE name = 'max_data_bytes'"]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).trim().to_string()
}

fn refused(db: Db, env: &Env, data: &str, options: serde_json::Value) -> String {
    let statements = add_sql(db, "echo", data, options.clone());
    let o = shell(db, env, &statements.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success(), "{} bytes with {options} were taken: {}", data.len(), stdout(&o));
    stderr(&o)
}

async fn taskhost_add_takes_data_up_to_the_operators_max_data_bytes_and_refuses_more(db: Db) {
    let mut env = Env::on(db, &["echo"]).await;
    // Each way a call goes on MariaDB: the short path without options and with them, and the
    // whole procedure (`run_anyway` is its alone).
    let ways = [json!({}), json!({"queue": "mail"}), json!({"run_anyway": false})];
    let mut added = Vec::new();
    // The least limit (under which MariaDB reads none), then one over the default.
    for limit in [1024, 1_572_864] {
        env.set_config(&format!("[tasks]\nmax_data_bytes = {limit}\n")).await;
        let worker = spawn_worker(&env, &[]);
        wait_until(Duration::from_secs(60), "the worker wrote the file's limit", || async {
            held(db, &env) == limit.to_string()
        })
        .await;
        signal(&worker, "TERM");
        wait_exit(worker, Duration::from_secs(30)).await;
        for options in &ways {
            let id = add_in_shell(db, &env, "echo", &data(limit), options.clone(), true);
            let task = env.app.store.get_task(id).await.expect("get").expect("the task added");
            assert_eq!(task.data.len(), limit, "the data whole");
            added.push(id);
            let said = refused(db, &env, &data(limit + 1), options.clone());
            assert!(said.contains("taskhost_add: invalid data: ") && said.contains("max_data_bytes"), "{said}");
            // (SQLite's RAISE takes no number.)
            if db != Db::Sqlite {
                assert!(said.contains(&format!("{} bytes, over the limit of {limit} bytes", limit + 1)), "{said}");
            }
        }
    }
    // A command run once with a file that leaves it out changes nothing; `taskhost migrate` with
    // it puts the default back.
    std::fs::write(env.config.as_ref().expect("a config file"), "").expect("write the config");
    let o = taskhost_command(&env).arg("list").output().expect("taskhost list");
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(held(db, &env), "1572864");
    let o = taskhost_command(&env).arg("migrate").output().expect("taskhost migrate");
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let said = "taskhost_add now takes task data of at most 1048576 bytes ([tasks] max_data_bytes; was 1572864)";
    assert!(stdout(&o).contains(said), "{}", stdout(&o));
    let said = refused(db, &env, &data(1_048_577), json!({}));
    assert!(said.contains("taskhost_add: invalid data: "), "{said}");
    // A row gone (a database migrated by hand, say) is written again.
    let o = shell(db, &env, &["DELETE FROM task_counters WHERE name = 'max_data_bytes'"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = taskhost_command(&env).arg("migrate").output().expect("taskhost migrate");
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let said = "taskhost_add now takes task data of at most 1048576 bytes ([tasks] max_data_bytes; was unset)";
    assert!(stdout(&o).contains(said), "{}", stdout(&o));
    assert_eq!(held(db, &env), "1048576");
    let mut all: Vec<_> =
        env.app.store.list_tasks(&Default::default()).await.expect("list").iter().map(|t| t.id).collect();
    all.sort();
    assert_eq!(all, added, "only the tasks taken");
}

crate::on_every_database!(
    taskhost_add_takes_data_up_to_the_operators_max_data_bytes_and_refuses_more,
    processes_starting_together_without_the_limits_row_each_write_it
);

/// A caller's transaction that queued more than 1 KiB of data holds no lock on the limit: a worker
/// starting meanwhile writes its file's limit at once (0039 read it with a locking read, and the
/// worker's write waited for the caller's commit, up to the lock wait timeout, then gave up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_that_queued_data_over_1_kib_leaves_the_limit_free_to_write_on_mysql() {
    use sqlx::{Connection, Row};
    let my = common::mysql_scratch().await;
    let store = taskhost::store::open(&my, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("migrate");
    let mut caller = sqlx::MySqlConnection::connect(&my).await.expect("connect");
    for (options, limit) in [("NULL", 4096u64), (r#"'{"queue": "mail"}'"#, 8192)] {
        sqlx::raw_sql("START TRANSACTION").execute(&mut caller).await.expect("begin");
        let add = format!("CALL taskhost_add('echo', '{}', {options})", data(2000));
        let id: i64 = sqlx::raw_sql(&add).fetch_all(&mut caller).await.expect("add")[0].get(0);
        let wrote = tokio::time::timeout(Duration::from_secs(20), store.set_sql_data_limit(limit)).await;
        assert!(
            matches!(wrote, Ok(Ok(DataLimitWrite::Replaced(_)))),
            "{options}: the limit's write waited for the caller: {wrote:?}"
        );
        sqlx::raw_sql("COMMIT").execute(&mut caller).await.expect("commit");
        assert!(store.get_task(id).await.expect("get").is_some(), "{options}: the caller's task");
    }
}

/// On PostgreSQL `taskhost_add` runs with its caller's rights: a role granted what queueing needs
/// (the tasks' tables, not `task_counters`) may queue more than 1 KiB of data (0036 refused it:
/// permission denied), and a table of its own named `task_counters` does not raise its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_granted_the_tasks_tables_queues_data_over_1_kib_and_cannot_raise_its_limit_on_postgres() {
    use sqlx::{Connection, Row};
    let pg = common::postgres_scratch().await;
    let store = taskhost::store::open(&pg, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("migrate");
    let role = format!("taskhost app {:08x}", rand::random::<u32>());
    let mut conn = sqlx::PgConnection::connect(&pg).await.expect("connect");
    let schema: String =
        sqlx::query("SELECT current_schema() AS s").fetch_one(&mut conn).await.expect("schema").get("s");
    let setup = format!(
        "CREATE ROLE \"{role}\"; GRANT USAGE ON SCHEMA {schema} TO \"{role}\"; \
         GRANT SELECT, INSERT, UPDATE ON task_queue, task_deps TO \"{role}\"; \
         GRANT SELECT ON task_handler_versions TO \"{role}\"; \
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO \"{role}\"; SET ROLE \"{role}\""
    );
    sqlx::raw_sql(&setup).execute(&mut conn).await.expect(&setup);
    let add = |n: usize| format!("SELECT taskhost_add('echo', '{}') AS id", data(n));
    let taken = sqlx::query(&add(2000)).fetch_one(&mut conn).await.map(|r| r.get::<i64, _>("id"));
    let shadow = "CREATE TEMP TABLE task_counters (name text, v bigint); \
                  INSERT INTO task_counters VALUES ('max_data_bytes', 100000000)";
    sqlx::raw_sql(shadow).execute(&mut conn).await.expect(shadow);
    let over = sqlx::query(&add(1_048_577)).fetch_one(&mut conn).await.map(|r| r.get::<i64, _>("id"));
    let cleanup =
        format!("RESET ROLE; DROP TABLE pg_temp.task_counters; DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\"");
    sqlx::raw_sql(&cleanup).execute(&mut conn).await.expect(&cleanup);
    let id = taken.expect("2,000 bytes taken from the role");
    assert!(store.get_task(id).await.expect("get").is_some());
    let said = over.expect_err("over the limit, its own task_counters beside").to_string();
    assert!(said.contains("1048577 bytes, over the limit of 1048576 bytes ([tasks] max_data_bytes)"), "{said}");
}

/// Processes opening a database whose limit's row is gone, together, each write their limit: the
/// one that finds the row written by another meanwhile writes over it (the first write of the row
/// refused the others for its name, and they did not start).
async fn processes_starting_together_without_the_limits_row_each_write_it(db: Db) {
    let env = Env::on(db, &[]).await;
    let o = shell(db, &env, &["DELETE FROM task_counters WHERE name = 'max_data_bytes'"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let options = taskhost::store::StoreOptions::default();
    let mut stores = Vec::new();
    for _ in 0..6 {
        stores.push(taskhost::store::open(&env.db_url, &options).await.expect("open"));
    }
    let starts = stores.iter().enumerate().map(|(i, s)| s.set_sql_data_limit(4096 + i as u64));
    let wrote = futures::future::join_all(starts).await;
    for (i, w) in wrote.iter().enumerate() {
        assert!(w.is_ok(), "process {i}: {w:?}");
    }
    let limit: u64 = held(db, &env).parse().expect("a number");
    assert!((4096..4102).contains(&limit), "{limit}");
}

/// On SQLite a limit's row holding text (written by hand: the host writes a number) reads as the
/// least limit, 1 KiB, until a host writes the file's limit again (0037 compared the data's length
/// with the text, which SQLite orders after every number, and took data of any length).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limits_row_holding_text_bounds_sql_data_at_1_kib_on_sqlite() {
    let env = Env::on(Db::Sqlite, &["echo"]).await;
    let o = shell(Db::Sqlite, &env, &["UPDATE task_counters SET v = 'lots' WHERE name = 'max_data_bytes'"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = refused(Db::Sqlite, &env, &data(1025), json!({}));
    assert!(said.contains("taskhost_add: invalid data: over the limit of [tasks] max_data_bytes"), "{said}");
    let id = add_in_shell(Db::Sqlite, &env, "echo", &data(1024), json!({}), true);
    assert_eq!(env.app.store.get_task(id).await.expect("get").expect("the task").data.len(), 1024);
    assert_eq!(env.app.store.set_sql_data_limit(4096).await.expect("write the limit"), DataLimitWrite::WasUnset);
    let id = add_in_shell(Db::Sqlite, &env, "echo", &data(4096), json!({}), true);
    assert_eq!(env.app.store.get_task(id).await.expect("get").expect("the task").data.len(), 4096);
}
