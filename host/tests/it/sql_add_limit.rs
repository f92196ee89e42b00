//! `taskhost_add` bounds task data by the operator's `[tasks] max_data_bytes`, as every other way
//! of queueing does (docs/clients.md): the database's functions cannot read the file, so a
//! worker or `serve` started with it, and `taskhost migrate`, write the limit where they read it.

use crate::common;

use std::time::Duration;

use common::process::{signal, spawn_worker, stderr, stdout, wait_exit};
use common::{taskhost_command, wait_until, Db, Env};
use serde_json::json;

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
    let mut all: Vec<_> =
        env.app.store.list_tasks(&Default::default()).await.expect("list").iter().map(|t| t.id).collect();
    all.sort();
    assert_eq!(all, added, "only the tasks taken");
}

crate::on_every_database!(taskhost_add_takes_data_up_to_the_operators_max_data_bytes_and_refuses_more);
