//! `taskhost_add` where MySQL and MariaDB differ (`make test` runs these on both): whether a caller
//! is in a transaction (MariaDB's `@@in_transaction`, a savepoint probe on MySQL), how each reads
//! a JSON document's names and depth, and MySQL's 128 characters for an error's message.

use crate::common;

use common::process::{stderr, stdout};
use common::{Db, Env};
use serde_json::json;
use taskhost::model::TaskId;

use super::sql_add::{add_in_shell, add_sql, shell};

/// The ids of every task in the database, least first.
async fn ids(env: &Env) -> Vec<TaskId> {
    let mut ids: Vec<TaskId> =
        env.app.store.list_tasks(&Default::default()).await.expect("list").iter().map(|t| t.id).collect();
    ids.sort();
    ids
}

/// A call with `after` writes its task and dependencies in its caller's transaction when there is
/// one, with autocommit on or off, and a rollback takes both back; without one, in its own, which
/// commits them. (A call that wrongly began its own would commit the caller's work with it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_after_is_rolled_back_with_its_callers_transaction_with_autocommit_on_or_off_on_mysql() {
    let env = Env::on(Db::MySql, &["echo"]).await;
    let first = add_in_shell(Db::MySql, &env, "echo", "{}", json!({}), true);
    let call = add_sql(Db::MySql, "echo", "{}", json!({"after": [first]})).remove(0);
    for begin in ["SET autocommit = 0", "START TRANSACTION", "BEGIN"] {
        let o = shell(Db::MySql, &env, &[begin, &call, "ROLLBACK"]);
        assert!(o.status.success(), "{begin}: {}", stderr(&o));
        assert_eq!(ids(&env).await, [first], "{begin}, then a rollback: nothing is left");
    }
    // Work of the caller's before the call is rolled back with it too (the call began no transaction).
    let o = shell(Db::MySql, &env, &["START TRANSACTION", "UPDATE task_queue SET priority = 9", &call, "ROLLBACK"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let task = env.app.store.get_task(first).await.expect("get").expect("the task");
    assert_eq!((ids(&env).await, task.priority), (vec![first], 0), "the caller's update rolled back with the call");
    // Autocommit: the task and its dependency are committed together.
    let o = shell(Db::MySql, &env, &[&call]);
    assert!(o.status.success(), "{}", stderr(&o));
    let after: TaskId = stdout(&o).trim().parse().expect("the id");
    let deps: Vec<TaskId> = env.app.store.dependencies(after).await.expect("deps").iter().map(|d| d.id).collect();
    assert_eq!((ids(&env).await, deps), (vec![first, after], vec![first]));
}

/// An option name written with a JSON escape is the name it spells on MySQL (as on PostgreSQL,
/// whose arguments are named); MariaDB's JSON functions keep the escape, so it refuses such names.
/// Data nested deeper than MySQL's JSON reads, an unknown option's long name, options that are not
/// JSON and long lists of long ids to run after are refused in a message naming what, within
/// MySQL's 128 characters; names of characters MySQL's collation ignores are taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_with_escapes_deep_data_and_long_unknown_names_are_each_answered_clearly_on_mysql() {
    let env = Env::on(Db::MySql, &["echo"]).await;
    let mariadb = common::migrated::is_mariadb(&env.db_url).await;
    let call = |data: &str, options: &str| {
        let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
        shell(Db::MySql, &env, &[&format!("CALL taskhost_add('echo', {}, {})", quote(data), quote(options))])
    };
    let o = call("{}", r#"{"\u0071ueue": "mail"}"#);
    let mut added = Vec::new();
    if mariadb {
        assert!(stderr(&o).contains("an option name written with a JSON escape"), "{}", stderr(&o));
    } else {
        assert!(o.status.success(), "{}", stderr(&o));
        let id: TaskId = stdout(&o).trim().parse().expect("the id");
        let task = env.app.store.get_task(id).await.expect("get").expect("the task");
        assert_eq!(task.queue, "mail");
        added.push(id);
    }
    // Characters MySQL's collation ignores are names as any other (were refused as empty or `*`).
    let ignorable = call("{}", r#"{"queue": "\u00ad", "key": "\u200b", "unique_key": "\u00ad"}"#);
    assert!(ignorable.status.success(), "{}", stderr(&ignorable));
    let id: TaskId = stdout(&ignorable).trim().parse().expect("the id");
    let task = env.app.store.get_task(id).await.expect("get").expect("the task");
    assert_eq!((task.queue.as_str(), task.key.as_deref()), ("\u{ad}", Some("\u{200b}")));
    added.push(id);
    let deep = format!("{}{}", "[".repeat(101), "]".repeat(101));
    // 10,000 ids of 14 digits (overflowed the pattern MySQL first checked them with) and one of 20.
    let long_ids = format!(r#"{{"after": [{}]}}"#, vec!["10000000000000"; 10_000].join(", "));
    let long_name = format!(r#"{{"{}": 1}}"#, "q".repeat(300));
    for (data, options, needle) in [
        (deep.as_str(), "{}", "data"),
        ("{}", &format!(r#"{{"a": {deep}}}"#), "invalid options"),
        ("{}", &long_name, "unknown option"),
        ("{}", "nope", "invalid options"),
        ("{}", &long_ids, "invalid after"),
        ("{}", r#"{"after": [18446744073709551615]}"#, "invalid after"),
    ] {
        let o = call(data, options);
        let said = stderr(&o);
        assert!(!o.status.success() && said.contains("taskhost_add") && said.contains(needle), "{needle}: {said}");
    }
    assert_eq!(ids(&env).await, added, "nothing else was added");
}
