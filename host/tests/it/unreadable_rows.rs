//! A task's row holding a value the host cannot read, written past `taskhost_add` (the SQL
//! enqueue checks every argument; an UPDATE of the table checks nothing): text in an integer
//! column on SQLite, a zero date on MariaDB, `-infinity` on PostgreSQL. It fails its own task,
//! not every claim or retry beside it.

use crate::common;
use crate::sql_add::shell;

use common::process::{stderr, stdout};
use common::{Db, Env};
use taskhost::model::{NewTask, TaskState};
use taskhost::overseer::{retries, Service};

/// What makes a row unreadable on `db`, and the column it spoils (MariaDB's driver reads its
/// zero date as NULL, in a column that may not be).
fn spoiled(db: Db, id: i64) -> (String, &'static str) {
    match db {
        Db::Sqlite => (format!("UPDATE task_queue SET run_timeout = 'ten' WHERE id = {id}"), "run_timeout"),
        Db::Postgres => (format!("UPDATE task_queue SET scheduled_on = '-infinity' WHERE id = {id}"), "scheduled_on"),
        Db::MySql => {
            let zero = "SET SESSION sql_mode = ''; UPDATE task_queue SET scheduled_on = '0000-00-00 00:00:00'";
            (format!("{zero} WHERE id = {id}"), "scheduled_on")
        }
    }
}

/// Before, one such row failed every claim of its queue for as long as it was there (the claim
/// read every row it took or none): no task of the queue ran. Now its own task is given up as
/// `unreadable-task`, the message naming the column, and the tasks claimed with it run.
async fn a_task_whose_row_cannot_be_read_is_given_up_and_the_tasks_claimed_with_it_run(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(env.app.client.add(NewTask::new("echo", format!("{{\"n\": {n}}}"))).await.expect("add").id);
    }
    let (spoil, column) = spoiled(db, ids[1]);
    let o = shell(db, &env, &[&spoil]);
    assert!(o.status.success(), "{spoil}: {}", stderr(&o));

    let report = env.drain(common::drain_config()).await;
    assert_eq!((report.runs_finished, report.runs_succeeded), (3, 2), "{report:?}");
    for id in [ids[0], ids[2]] {
        let (task, _) = env.app.client.show(id).await.expect("show");
        assert_eq!(task.state, TaskState::Succeeded, "task {id}");
    }
    // (Read in SQL: the host cannot read the row, as it could not before.)
    let query = format!(
        "SELECT t.last_status, t.gave_up_on IS NOT NULL, r.error_code, r.error_message \
         FROM task_queue t JOIN task_runs r ON r.task_queue_id = t.id WHERE t.id = {}",
        ids[1]
    );
    let o = shell(db, &env, &[&query]);
    assert!(o.status.success(), "{}", stderr(&o));
    let row = stdout(&o).trim().replace('\t', "|");
    let (code, message) = ("unreadable-task", "its task's row cannot be read");
    assert!(
        row.starts_with(&format!("error|{}|{code}|{message}", if db == Db::Postgres { "t" } else { "1" })),
        "{row}"
    );
    let said = row.split("|").nth(3).unwrap_or_default();
    assert!(said.contains(column), "the message names the column: {row}");
}

crate::on_every_database!(a_task_whose_row_cannot_be_read_is_given_up_and_the_tasks_claimed_with_it_run);

/// The overseer's retries read a failed task's counts: one row whose count cannot be read gives
/// its own task up, and the tasks read with it are retried (before, the pass failed on it, and
/// every pass after). On SQLite: the other databases refuse text in an integer column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_whose_counts_cannot_be_read_is_given_up_and_the_others_are_retried_on_sqlite() {
    let env = Env::on(Db::Sqlite, &["echo"]).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(env.app.client.add(NewTask::new("echo", format!("{{\"n\": {n}}}"))).await.expect("add").id);
    }
    // Three tasks whose runs failed with no worker to decide (as the overseer times them out).
    let failed =
        format!("UPDATE task_queue SET last_status = 'error' WHERE id IN ({}, {}, {})", ids[0], ids[1], ids[2]);
    let spoil = format!("UPDATE task_queue SET max_retries = 'five' WHERE id = {}", ids[1]);
    let o = shell(Db::Sqlite, &env, &[&failed, &spoil]);
    assert!(o.status.success(), "{}", stderr(&o));

    let service = retries::Retries::new(env.app.store.clone(), retries::Config::default());
    let report = service.run_once(chrono::Utc::now()).await.expect("a pass of the retries");
    assert_eq!((report.retries_scheduled, report.given_up), (2, 1), "{report:?}");
    for id in [ids[0], ids[2]] {
        let (task, _) = env.app.client.show(id).await.expect("show");
        assert_eq!(task.state, TaskState::Scheduled, "task {id} is due again");
    }
    let o = shell(Db::Sqlite, &env, &[&format!("SELECT gave_up_on IS NOT NULL FROM task_queue WHERE id = {}", ids[1])]);
    assert_eq!(stdout(&o).trim(), "1", "the unreadable one is given up: {}", stderr(&o));
}
