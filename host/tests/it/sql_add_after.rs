//! Tasks queued in SQL `after` others (`taskhost_add`'s `after`, docs/clients.md): what the
//! overseer's intake makes of a dependency that ended badly, one its queue deletes on success
//! (kept for its dependent, or found among the ends), and an application's transaction left open
//! meanwhile, which holds back no success.

use std::time::Duration;

use serde_json::json;
use taskhost::model::{NewTask, TaskId, TaskState};

use crate::common::process::{stderr, stdout};
use crate::common::{Db, Env};
use crate::sql_add::{add_in_shell, add_sql, shell, state};

/// A task it runs after that is cancelled between the add and the intake cancels the task, and
/// the tasks already waiting for it in turn.
async fn a_dependency_that_ends_badly_before_the_intake_cancels_the_task_and_those_after_it(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let first = add_in_shell(db, &env, "echo", "{}", json!({}), true);
    let second = add_in_shell(db, &env, "echo", "{}", json!({"after": [first]}), true);
    let mut third = NewTask::new("echo", "{}");
    third.after = vec![second];
    let third = env.app.client.add(third).await.expect("add through the API").id;
    assert_eq!(env.app.store.cancel_tasks(&[first], env.clock.now()).await.expect("cancel"), vec![first]);
    assert_eq!(env.app.store.take_in_arrivals(env.clock.now(), 100).await.expect("intake"), 1);
    for id in [second, third] {
        assert_eq!(state(&env, id).await, Some(TaskState::Cancelled), "task {id}");
        let runs = env.app.store.runs_of(id).await.expect("runs");
        assert_eq!(runs.last().and_then(|r| r.error_code.as_deref()), Some("dependency-failed"), "{runs:?}");
    }
    assert_eq!(env.app.store.take_in_arrivals(env.clock.now(), 100).await.expect("intake"), 0, "nothing left");
}

/// A task queued in SQL `after` one of a queue that deletes its successes keeps that one's row
/// when it succeeds before the intake (the add marked it, in its own transaction): its dependent's
/// run reads its results.
async fn a_task_queued_in_sql_after_another_keeps_it_when_its_queue_deletes_its_successes(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let (store, now) = (&env.app.store, env.clock.now());
    delete_successes(&env).await;
    let two = [NewTask::new("echo", "{}"), NewTask::new("echo", "{}")];
    let firsts: Vec<TaskId> = store.add_tasks(&two, now).await.expect("add").iter().map(|a| a.id).collect();
    let second = add_in_shell(db, &env, "echo", "{}", json!({"after": [firsts[0]]}), true);
    // A list of two (SQLite marks one task by its id, more by the list); an id given twice is one
    // dependency.
    let third = add_in_shell(db, &env, "echo", "{}", json!({"after": [firsts[1], firsts[1]]}), true);
    for &first in &firsts {
        let success = claim_and_succeed(&env, first, true).await;
        store.finish_runs(&[success]).await.expect("finish");
        assert_eq!(state(&env, first).await, Some(TaskState::Succeeded), "kept, not deleted");
    }
    assert_eq!(store.take_in_arrivals(now, 100).await.expect("intake"), 2);
    assert_eq!(state(&env, second).await, Some(TaskState::Scheduled), "its dependency met");
    assert_eq!(state(&env, third).await, Some(TaskState::Scheduled), "its dependency met");
    let after = store.dependencies(third).await.expect("dependencies");
    assert_eq!(after.iter().map(|d| d.id).collect::<Vec<_>>(), [firsts[1]], "{after:?}");
    let read = store.dependency_results(second, 1 << 20).await.expect("results");
    assert_eq!(
        read.iter().map(|d| (d.id, d.results.as_deref())).collect::<Vec<_>>(),
        [(firsts[0], Some(r#"{"n":1}"#))]
    );
}

/// A task queued in SQL `after` one its success deleted already finds that one's end and counts
/// it met, as an add through the API does (the function refused it as no such task), and lists it
/// as succeeded (the intake keeps it, as an add through the API does); an id
/// within the ends' row but not of it (a task kept, then deleted by the operator) is still no
/// task, in SQL and to `show`.
async fn a_task_queued_in_sql_after_one_its_success_deleted_counts_it_met(db: Db) {
    use taskhost::model::RunOutcome;
    use taskhost::store::{BulkFilter, Finished};
    let env = Env::on(db, &["echo"]).await;
    let (store, now) = (&env.app.store, env.clock.now());
    delete_successes(&env).await;
    // One batch: the first and last deleted, the middle one (a unique key) kept.
    let three =
        [NewTask::new("echo", "{}"), NewTask::new("echo", "{}").with_unique_key("u"), NewTask::new("echo", "{}")];
    let ids: Vec<TaskId> = store.add_tasks(&three, now).await.expect("add").iter().map(|a| a.id).collect();
    let runner = store.register_runner(4242, "test-host", now, 100).await.expect("runner");
    let claimed = store.claim(runner, &["default".into()], 3, now, Duration::from_secs(60)).await.expect("claim");
    let outcomes: Vec<RunOutcome> =
        claimed.iter().map(|c| RunOutcome { delete_on_success: true, ..crate::suite::success(c, now, "{}") }).collect();
    assert_eq!(outcomes.len(), 3);
    store.finish_runs(&outcomes).await.expect("finish");
    let states = [state(&env, ids[0]).await, state(&env, ids[1]).await, state(&env, ids[2]).await];
    assert_eq!(states, [None, Some(TaskState::Succeeded), None], "the first and last deleted");
    let middle = BulkFilter { ids: Some(vec![ids[1]]), ..Default::default() };
    assert_eq!(env.app.client.delete_finished(Finished::Any, &middle, Duration::ZERO).await.expect("delete"), 1);

    let kept = store.add_tasks(&[NewTask::new("echo", "{}").with_queue("kept")], now).await.expect("add")[0].id;
    let second = add_in_shell(db, &env, "echo", "{}", json!({"after": [kept, ids[0], ids[2]]}), true);
    assert_eq!(store.take_in_arrivals(now, 100).await.expect("intake"), 1);
    let task = store.get_task(second).await.expect("get").expect("added");
    assert_eq!((task.state, task.waiting_for), (TaskState::Waiting, 1), "it waits for the unfinished one alone");
    let after = store.dependencies(second).await.expect("dependencies");
    let listed: Vec<_> = after.iter().map(|d| (d.id, d.state)).collect();
    let want = [(ids[0], TaskState::Succeeded), (ids[2], TaskState::Succeeded), (kept, TaskState::Scheduled)];
    assert_eq!(listed, want, "{after:?}");

    let statements = add_sql(db, "echo", "{}", json!({"after": [ids[1]]}));
    let o = shell(db, &env, &statements.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success() && stderr(&o).contains("invalid after"), "{}{}", stdout(&o), stderr(&o));
    let shown = env.app.client.show(ids[0]).await.map(|_| ()).expect_err("deleted");
    assert!(matches!(shown, taskhost::Error::TaskDeleted { id, .. } if id == ids[0]), "{shown}");
    let shown = env.app.client.show(ids[1]).await.map(|_| ()).expect_err("no such task");
    assert!(matches!(shown, taskhost::Error::TaskNotFound(id) if id == ids[1]), "{shown}");
}

/// The success of `task`, claimed now (the only task due), as its worker writes it.
async fn claim_and_succeed(env: &Env, task: TaskId, delete_on_success: bool) -> taskhost::model::RunOutcome {
    use taskhost::model::RunOutcome;
    let (store, now) = (&env.app.store, env.clock.now());
    let runner = store.register_runner(4242, "test-host", now, 100).await.expect("runner");
    let claimed = store.claim(runner, &["default".into()], 1, now, Duration::from_secs(60)).await.expect("claim");
    let c = claimed.first().expect("the task claimed (one after it waits for the intake)");
    assert_eq!(c.task_id, task);
    RunOutcome { delete_on_success, ..crate::suite::success(c, now, r#"{"n":1}"#) }
}

/// The default queue deletes its successes from now on.
async fn delete_successes(env: &Env) {
    use taskhost::model::{Limit, LimitScope, OnSuccess};
    use taskhost::store::{LimitEdit, LimitSetBy};
    let delete = Limit { on_success: OnSuccess::Delete, ..Limit::default() };
    let (scope, set) = (LimitScope::Queue, LimitEdit::Set(delete));
    env.app.store.set_limit(scope, "default", set, LimitSetBy::Operator, env.clock.now()).await.expect("set");
}

/// A task queued in SQL `after` another, in an application's transaction still open, does not hold
/// back that one's success where its queue keeps its successes: nothing of it is locked (a long
/// transaction would stall its worker's whole batch of successes); the intake meets it after the
/// commit. (SQLite has no row locks: there an open write transaction holds every writer back.)
async fn an_open_transaction_that_queued_a_task_after_another_does_not_hold_back_its_success(db: Db) {
    use sqlx::{Connection, Row};
    let env = Env::on(db, &["echo"]).await;
    let (store, now) = (&env.app.store, env.clock.now());
    // Tasks of another queue, for later: with a table of a few rows, MariaDB writes a success by
    // scanning the table (locking each row, the open transaction's new one too), as it never
    // would a table of any size.
    let later: Vec<NewTask> = (0..5_000)
        .map(|_| NewTask::new("echo", "{}").with_queue("later").with_scheduled_on(now + chrono::Duration::days(1)))
        .collect();
    store.add_tasks(&later, now).await.expect("add later");
    let first = store.add_tasks(&[NewTask::new("echo", "{}")], now).await.expect("add")[0].id;
    let success = claim_and_succeed(&env, first, false).await;
    let add = add_sql(db, "echo", "{}", json!({"after": [first]})).join(";\n");
    let finish = async {
        let written = tokio::time::timeout(Duration::from_secs(30), store.finish_runs(&[success])).await;
        written.expect("the success is written while the transaction is open").expect("finish");
    };
    let second: TaskId = match db {
        Db::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&env.db_url).await.expect("connect");
            let mut tx = conn.begin().await.expect("begin");
            let row = sqlx::raw_sql(&add).fetch_one(&mut *tx).await.expect("add");
            finish.await;
            tx.commit().await.expect("commit");
            row.try_get(0).expect("the id")
        }
        Db::MySql => {
            let mut conn = sqlx::MySqlConnection::connect(&env.db_url).await.expect("connect");
            sqlx::raw_sql("ANALYZE TABLE task_queue, task_deps").execute(&mut conn).await.expect("analyze");
            let mut tx = conn.begin().await.expect("begin");
            let row = sqlx::raw_sql(&add).fetch_one(&mut *tx).await.expect("add");
            finish.await;
            tx.commit().await.expect("commit");
            row.try_get(0).expect("the id")
        }
        Db::Sqlite => unreachable!("row locks are the servers'"),
    };
    assert_eq!(state(&env, first).await, Some(TaskState::Succeeded));
    assert_eq!(store.take_in_arrivals(now, 100).await.expect("intake"), 1);
    assert_eq!(state(&env, second).await, Some(TaskState::Scheduled), "its dependency met");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_that_queued_a_task_after_another_does_not_hold_back_its_success_on_postgres() {
    an_open_transaction_that_queued_a_task_after_another_does_not_hold_back_its_success(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_that_queued_a_task_after_another_does_not_hold_back_its_success_on_mysql() {
    an_open_transaction_that_queued_a_task_after_another_does_not_hold_back_its_success(Db::MySql).await;
}

crate::on_every_database!(
    a_dependency_that_ends_badly_before_the_intake_cancels_the_task_and_those_after_it,
    a_task_queued_in_sql_after_another_keeps_it_when_its_queue_deletes_its_successes,
    a_task_queued_in_sql_after_one_its_success_deleted_counts_it_met
);
