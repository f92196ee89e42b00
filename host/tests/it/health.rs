//! `GET /api/v1/health` asks the database by a statement that reads no table: a real `serve`
//! answers it while another session holds the tasks' table locked (as a migration's DDL does),
//! where a count of the tasks would wait behind the lock. Only the server databases: on SQLite a
//! write lock holds no reader.

use crate::common;

use common::served::Served;
use common::Env;
use serde_json::json;

async fn health_answers_while_the_tasks_table_is_locked<C>(env: Env, lock: &str, unlock: &str)
where
    C: sqlx::Connection,
    for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
{
    use sqlx::Executor;
    let served = Served::start(&env, "127.0.0.1:0");
    let mut locker = C::connect(&env.db_url).await.expect("connect");
    for statement in lock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("lock");
    }
    // (The call gives up after 30 s: a probe that waited for the lock fails here.)
    let (served, (status, answer)) = tokio::task::spawn_blocking(move || {
        let answer = served.call("GET", "/health", None, None);
        (served, answer)
    })
    .await
    .expect("the call");
    assert_eq!((status, answer), (200, json!({"status": "ok"})), "health while task_queue is locked");
    for statement in unlock.split(';').filter(|s| !s.trim().is_empty()) {
        locker.execute(statement).await.expect("unlock");
    }
    drop(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_while_the_tasks_table_is_locked_on_postgres() {
    let env = Env::postgres(&["echo"]).await;
    let lock = "BEGIN; LOCK TABLE task_queue IN ACCESS EXCLUSIVE MODE";
    health_answers_while_the_tasks_table_is_locked::<sqlx::PgConnection>(env, lock, "COMMIT").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_while_the_tasks_table_is_locked_on_mysql() {
    let env = Env::mysql(&["echo"]).await;
    let (lock, unlock) = ("LOCK TABLES task_queue WRITE", "UNLOCK TABLES");
    health_answers_while_the_tasks_table_is_locked::<sqlx::MySqlConnection>(env, lock, unlock).await;
}
