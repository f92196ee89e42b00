//! `taskhost_add` on MySQL and MariaDB (`make test` runs these on both), where they differ: whether a
//! caller is in a transaction (MariaDB's `@@in_transaction`, a savepoint probe on MySQL), how each
//! reads a JSON document's names and depth, and MySQL's 128 characters for an error's message; and
//! what their procedures' paths promise: one task to run after written without the whole procedure,
//! callers adding a held unique key at once all answered its holder.

use crate::common;

use common::process::{stderr, stdout};
use common::{Db, Env};
use serde_json::json;
use sqlx::{Connection, Row};
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

/// How many procedures this session has called, each call within one counted (the server's own
/// count): a call a path of `taskhost_add`'s own writes is one, one it hands on is two.
pub(crate) async fn procedure_calls(conn: &mut sqlx::MySqlConnection) -> i64 {
    let row = sqlx::raw_sql("SHOW SESSION STATUS LIKE 'Com_call_procedure'").fetch_one(conn).await.expect("status");
    let value =
        row.try_get::<String, _>(1).unwrap_or_else(|_| String::from_utf8_lossy(&row.get::<Vec<u8>, _>(1)).into());
    value.parse().expect("a count")
}

/// One task to run after, in the caller's transaction, alone or with a time, a queue and a
/// priority, is written by `taskhost_add`'s own path (0050: no call of the whole procedure), the
/// same rows as the whole procedure writes for the same call (made to by a JSON null beside): the
/// task waiting for the intake, its one dependency unmet. What that path hands on is answered as
/// before: a task that is not there, dead or cancelled refused by name; one of a queue that deletes
/// its successes marked kept; a call outside a transaction written in one of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_task_to_run_after_in_a_transaction_is_written_without_the_whole_procedure_on_mysql() {
    use taskhost::model::{Limit, LimitScope, NewTask, NextStep, OnSuccess};
    use taskhost::store::{LimitEdit, LimitSetBy};
    let env = Env::on(Db::MySql, &["echo"]).await;
    let (store, now) = (&env.app.store, env.clock.now());
    // A dead task (its one attempt given up), a cancelled one, one that will run, one of a queue
    // that deletes its successes.
    let dead = store.add_tasks(&[NewTask::new("echo", "{}")], now).await.expect("add")[0].id;
    let runner = store.register_runner(4242, "test-host", now, 100).await.expect("runner");
    let claimed = store.claim(runner, &["default".into()], 1, now, std::time::Duration::from_secs(60)).await;
    let claimed = claimed.expect("claim");
    assert_eq!(claimed.iter().map(|c| c.task_id).collect::<Vec<_>>(), [dead]);
    store.finish_runs(&[crate::suite::failure(&claimed[0], now, NextStep::GiveUp)]).await.expect("give up");
    let three = [NewTask::new("echo", "{}"), NewTask::new("echo", "{}"), NewTask::new("echo", "{}").with_queue("gone")];
    let ids: Vec<TaskId> = store.add_tasks(&three, now).await.expect("add").iter().map(|a| a.id).collect();
    let (cancelled, first, gone) = (ids[0], ids[1], ids[2]);
    assert_eq!(store.cancel_tasks(&[cancelled], now).await.expect("cancel"), [cancelled]);
    let delete = LimitEdit::Set(Limit { on_success: OnSuccess::Delete, ..Limit::default() });
    store.set_limit(LimitScope::Queue, "gone", delete, LimitSetBy::Operator, now).await.expect("set");

    let mut conn = sqlx::MySqlConnection::connect(&env.db_url).await.expect("connect");
    // Each call in a transaction of its own: (its id, the procedures it called).
    async fn call(conn: &mut sqlx::MySqlConnection, options: &str, commit: bool) -> Result<(i64, i64), String> {
        let before = procedure_calls(conn).await;
        sqlx::raw_sql("START TRANSACTION").execute(&mut *conn).await.expect("begin");
        let sql = format!(r#"CALL taskhost_add('echo', '{{"n": 1}}', '{options}')"#);
        let answered = sqlx::raw_sql(&sql).fetch_all(&mut *conn).await.map_err(|e| e.to_string());
        let end = if commit && answered.is_ok() { "COMMIT" } else { "ROLLBACK" };
        sqlx::raw_sql(end).execute(&mut *conn).await.expect(end);
        let id = answered?.first().map(|r| r.get::<i64, _>(0)).expect("an id");
        Ok((id, procedure_calls(conn).await - before))
    }
    let row = |id: i64| {
        format!(
            "SELECT CAST(CONCAT_WS('|', queue, priority, last_status, waiting_for, run_anyway, max_retries, \
             IF(scheduled_on = queued_on, 'at once', scheduled_on), COALESCE(share_key, '-'), \
             COALESCE(unique_key, '-'), COALESCE(run_timeout, '-'), COALESCE(queued_by_id, '-'), \
             COALESCE(pinned_digest, '-'), COALESCE(keep_row, '-'), \
             (SELECT GROUP_CONCAT(after_id, ' ', met) FROM task_deps WHERE task_id = {id})) AS CHAR) \
             FROM task_queue WHERE id = {id}"
        )
    };
    for (options, want) in [
        (format!(r#"{{"after": [{first}]}}"#), "default|0|waiting|-1|0|5|at once|-|-|-|-|-|-|FIRST -1"),
        (
            format!(
                r#"{{"queue": "mail", "after": [{first}], "priority": -3, "run_at": "2033-03-03T03:03:03.5+01:00"}}"#
            ),
            "mail|-3|waiting|-1|0|5|2033-03-03 02:03:03.500000|-|-|-|-|-|-|FIRST -1",
        ),
    ] {
        let want = want.replace("FIRST", &first.to_string());
        let (short, made) = call(&mut conn, &options, true).await.expect(&options);
        assert_eq!(made, 1, "{options}: the whole procedure called");
        let whole = options.replacen('{', r#"{"key": null, "#, 1);
        let (whole, made) = call(&mut conn, &whole, true).await.expect(&whole);
        assert_eq!(made, 2, "{options}: handed on");
        for id in [short, whole] {
            let written: String = sqlx::query_scalar(&row(id)).fetch_one(&mut conn).await.expect("read");
            assert_eq!(written, want, "{options}: task {id}");
        }
    }
    // Rolled back, nothing is left of it.
    let options = format!(r#"{{"after": [{first}]}}"#);
    let (id, _) = call(&mut conn, &options, false).await.expect(&options);
    let left: i64 = sqlx::query_scalar(&format!(
        "SELECT CAST((SELECT COUNT(*) FROM task_queue WHERE id = {id}) + \
        (SELECT COUNT(*) FROM task_deps WHERE task_id = {id}) AS SIGNED)"
    ))
    .fetch_one(&mut conn)
    .await
    .expect("read");
    assert_eq!(left, 0, "a rolled-back call left its task or its dependency");
    // Handed on: refused by name, or kept for its dependent.
    for (after, needle) in [
        (dead, "is dead or cancelled"),
        (cancelled, "is dead or cancelled"),
        (999_999_999, "there is no task 999999999"),
    ] {
        let options = format!(r#"{{"after": [{after}]}}"#);
        let refused = call(&mut conn, &options, true).await.expect_err(&options);
        assert!(refused.contains(needle), "{options}: {refused}");
    }
    let options = format!(r#"{{"after": [{gone}]}}"#);
    assert_eq!(call(&mut conn, &options, true).await.expect(&options).1, 2, "{options}: handed on");
    let kept: Option<i64> =
        sqlx::query_scalar(&format!("SELECT CAST(keep_row AS SIGNED) FROM task_queue WHERE id = {gone}"))
            .fetch_one(&mut conn)
            .await
            .expect("read");
    assert_eq!(kept, Some(1), "the task of a queue that deletes its successes is kept for its dependent");
    // Outside a transaction: the whole procedure's, which makes one.
    let before = procedure_calls(&mut conn).await;
    let sql = format!(r#"CALL taskhost_add('echo', '{{}}', '{{"after": [{first}]}}')"#);
    sqlx::raw_sql(&sql).fetch_all(&mut conn).await.expect(&sql);
    assert_eq!(procedure_calls(&mut conn).await - before, 2, "{sql}: not handed on");
}

/// Callers adding a unique key another task holds, each in a transaction of its own and at once,
/// are all answered the holder's id and none is chosen as a deadlock's victim, through either
/// short path: each locks the holder's entry for writing at once, as the whole procedure does.
/// (An insert meeting the duplicate first took a shared lock, and two callers then letting go
/// deadlocked: about 150 of 240 such transactions failed so.) A key held past its period is taken
/// by one caller's task, and the others are answered that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_adding_a_held_unique_key_at_once_in_transactions_are_all_answered_its_holder_on_mysql() {
    let my = common::mysql_scratch().await;
    let store = taskhost::store::open(&my, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("migrate");
    for (add, past_its_period) in [
        (r#"CALL taskhost_add('echo', '{}', '{"unique_key": "held"}')"#, false),
        (r#"CALL taskhost_add('echo', '{}', '{"unique_key": "held for", "unique_for": 3600}')"#, false),
        (r#"CALL taskhost_add('echo', '{}', '{"unique_key": "held past", "unique_for": 3600}')"#, true),
    ] {
        all_answered_the_holder(&my, add, past_its_period).await;
    }
}

/// Eight callers, each adding `add` twenty times, each in a transaction; with `past_its_period`,
/// the holder's period ended first, so the first caller's task holds the key and is answered.
async fn all_answered_the_holder(my: &common::ScratchDb, add: &'static str, past_its_period: bool) {
    let mut conn = sqlx::MySqlConnection::connect(my).await.expect("connect");
    let mut holder: i64 = sqlx::raw_sql(add).fetch_all(&mut conn).await.expect(add)[0].get(0);
    if past_its_period {
        let expire = "UPDATE task_queue SET unique_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?";
        sqlx::query(expire).bind(holder).execute(&mut conn).await.expect(expire);
    }
    // (Polled together by this task: the server runs their transactions at once.)
    let callers = (0..8).map(|_| {
        let url = my.url.clone();
        async move {
            let mut conn = sqlx::MySqlConnection::connect(&url).await.expect("connect");
            let mut answers = Vec::new();
            for _ in 0..20 {
                sqlx::raw_sql("START TRANSACTION").execute(&mut conn).await.expect("begin");
                let answered = sqlx::raw_sql(add).fetch_all(&mut conn).await;
                answers.push(answered.map(|rows| rows[0].get::<i64, _>(0)).map_err(|e| e.to_string()));
                sqlx::raw_sql("COMMIT").execute(&mut conn).await.expect("commit");
            }
            answers
        }
    });
    let answers: Vec<_> = futures::future::join_all(callers).await.into_iter().flatten().collect();
    if past_its_period {
        let taken = answers.iter().find_map(|a| a.clone().ok()).expect("an answer");
        assert_ne!(taken, holder, "a new task took the key");
        holder = taken;
    }
    for answer in answers {
        assert_eq!(answer, Ok(holder), "{add}");
    }
}
