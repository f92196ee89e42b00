//! `[tasks] sql_add_handlers = "deployed"`: where the operator says every handler is deployed
//! into the database, `taskhost_add` refuses any other in the caller's statement, as the API
//! refuses an unknown handler (docs/clients.md). `taskhost migrate` applies it.

use crate::common;

use std::time::Duration;

use common::process::{run, signal, spawn_worker, stderr, stdout, wait_exit};
use common::{component, taskhost_command, wait_until, Db, Env};
use serde_json::json;
use taskhost::config::SqlAddHandlers;
use taskhost::model::{NewTask, TaskState};
use taskhost::App;

use super::sql_add::{add_in_shell, add_sql, shell, state};

/// `taskhost migrate` with the environment's file; what it printed.
fn migrate(env: &Env) -> String {
    let o = taskhost_command(env).arg("migrate").output().expect("taskhost migrate");
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// What the shell said refusing an add of `handler`.
fn refused(db: Db, env: &Env, handler: &str, options: serde_json::Value) -> String {
    let statements = add_sql(db, handler, "{}", options.clone());
    let o = shell(db, env, &statements.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success(), "{handler} with {options} was taken: {}", stdout(&o));
    stderr(&o)
}

async fn taskhost_add_refuses_a_handler_not_deployed_once_the_operator_says_every_handler_is(db: Db) {
    let mut env = Env::on(db, &["echo", "fan-out"]).await;
    assert!(env.app.store.sql_add_check().await.expect("read").host_marked, "the host's sessions say so");
    // By default a plugin's handler is taken (the database cannot see the plugins directory).
    add_in_shell(db, &env, "echo", "{}", json!({}), true);

    env.set_config("[tasks]\nsql_add_handlers = \"deployed\"\n").await;
    // A worker or `serve` started with the file before `taskhost migrate` says what to do.
    let warned = App::warn_sql_add_handlers(&*env.app.store, SqlAddHandlers::Deployed).await;
    assert!(warned.is_some_and(|w| w.contains("run `taskhost migrate` with this file")), "warned");
    assert_eq!(App::warn_sql_add_handlers(&*env.app.store, SqlAddHandlers::Any).await, None);
    let said = migrate(&env);
    assert!(said.contains("taskhost_add now refuses a handler not deployed into the database"), "{said}");
    assert!(!migrate(&env).contains("taskhost_add now"), "told again, it changes nothing");
    assert_eq!(App::warn_sql_add_handlers(&*env.app.store, SqlAddHandlers::Deployed).await, None);
    let warned = App::warn_sql_add_handlers(&*env.app.store, SqlAddHandlers::Any).await;
    assert!(warned.is_some_and(|w| w.contains("refuses a handler not deployed")), "warned");
    // A check dropped by hand (as a migration making SQLite's view again would) is made again.
    let drop = if db == Db::Sqlite {
        "DROP TRIGGER taskhost_sql_add_handlers"
    } else {
        "DROP TRIGGER taskhost_sql_add_handlers ON task_queue"
    };
    let drop = if db == Db::MySql { "DROP TRIGGER taskhost_sql_add_handlers" } else { drop };
    let o = shell(db, &env, &[drop]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(migrate(&env).contains("taskhost_add now refuses a handler not deployed"), "made again");
    let before = env.app.store.list_tasks(&Default::default()).await.expect("list").len();
    // Each way a call goes on MariaDB: the short path without options and with them, and the
    // whole procedure (`run_anyway` is its alone).
    for options in [json!({}), json!({"queue": "mail"}), json!({"run_anyway": false})] {
        let said = refused(db, &env, "echo", options);
        assert!(said.contains("taskhost_add: invalid handler: "), "{said}");
        // (SQLite's RAISE takes no name.)
        let not = if db == Db::Sqlite { "not deployed" } else { "echo is not deployed" };
        assert!(said.contains(not) && said.contains("sql_add_handlers"), "{said}");
    }
    let said = refused(db, &env, "no such", json!({}));
    assert!(said.contains("not a handler name"), "a name no handler has is told as that: {said}");
    // The longest name, told within MySQL's 128 characters a message.
    let long = "h".repeat(128);
    let said = refused(db, &env, &long, json!({}));
    assert!(said.contains("taskhost_add: invalid handler: ") && said.contains("sql_add_handlers"), "{said}");
    // An application's own INSERT into the tasks' table (not a documented way to queue) is checked
    // too where the check is on that table.
    if db != Db::Sqlite {
        let insert = "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) \
                      VALUES (CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 'echo', '{}')";
        let o = shell(db, &env, &[insert]);
        assert!(!o.status.success() && stderr(&o).contains("echo is not deployed"), "{}", stderr(&o));
    }
    assert_eq!(env.app.store.list_tasks(&Default::default()).await.expect("list").len(), before, "nothing added");

    // The host's own adds are not the database's to check: it knows its plugins directory.
    let by_host = env.app.client.add(NewTask::new("echo", "{}")).await.expect("the host queues a plugin's task");
    assert!(state(&env, by_host.id).await.is_some());
    // Nor are a worker process's: a run's children for a plugin's handler are written with its end.
    let fan = NewTask::new("fan-out", json!({"items": [1, 2, 3]}).to_string()).with_queue("mail");
    let fan = env.app.client.add(fan).await.expect("queue a fan-out").id;

    // A deployed handler is taken, and its task runs; one rolled back leaves nothing.
    let o = run(&env, &["deploy", component("echo").to_str().expect("path"), "--name", "greet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rolled_back = add_in_shell(db, &env, "greet", "{}", json!({}), false);
    assert_eq!(state(&env, rolled_back).await, None, "a rolled-back add leaves no task");
    let id = add_in_shell(db, &env, "greet", r#"{"n": 1}"#, json!({"queue": "mail"}), true);
    let worker = spawn_worker(&env, &["--queues", "mail"]);
    wait_until(Duration::from_secs(120), "the deployed handler's task and the fan-out ran", || async {
        state(&env, id).await == Some(TaskState::Succeeded) && state(&env, fan).await == Some(TaskState::Succeeded)
    })
    .await;
    let all = env.app.store.list_tasks(&Default::default()).await.expect("list");
    assert_eq!(all.iter().filter(|t| t.parent_id == Some(fan)).count(), 3, "its three children written");
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;

    // Taken back: any handler again.
    env.set_config("").await;
    let said = migrate(&env);
    assert!(said.contains("taskhost_add now takes any handler"), "{said}");
    let id = add_in_shell(db, &env, "echo", "{}", json!({"queue": "mail"}), true);
    assert!(state(&env, id).await.is_some());

    // A value the setting cannot take is one line, and changes nothing.
    env.set_config("").await;
    let path = env.config.clone().expect("a config file");
    std::fs::write(&path, "[tasks]\nsql_add_handlers = \"all\"\n").expect("write the config");
    let o = taskhost_command(&env).arg("migrate").output().expect("taskhost migrate");
    assert!(!o.status.success(), "{}", stdout(&o));
    let line = stderr(&o);
    assert_eq!(line.trim().lines().count(), 1, "{line}");
    assert!(line.contains(r#"[tasks] sql_add_handlers = "all": expected "any" or "deployed""#), "{line}");
    add_in_shell(db, &env, "echo", "{}", json!({}), true);
}

crate::on_every_database!(taskhost_add_refuses_a_handler_not_deployed_once_the_operator_says_every_handler_is);
