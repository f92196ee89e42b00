//! `GET /api/v1/health` asks the database by a statement that reads no table: a real `serve`
//! answers it while another session holds the tasks' table locked (as a migration's DDL does),
//! where a count of the tasks would wait behind the lock. Only the server databases: on SQLite a
//! write lock holds no reader.

use crate::common;

use common::served::Served;
use common::Env;
use serde_json::json;
use std::time::Duration;

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

/// Runs `sqls` as the admin of `url`'s server; on MariaDB/MySQL `KILL USER name` kills each of
/// that user's connections (MySQL has no such statement).
async fn as_admin(url: &str, sqls: &[String]) {
    use sqlx::{Connection, Executor};
    if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await.expect("connect as the admin");
        for sql in sqls {
            c.execute(sql.as_str()).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        return;
    }
    let mut c = sqlx::MySqlConnection::connect(url).await.expect("connect as the admin");
    for sql in sqls {
        let Some(user) = sql.strip_prefix("KILL USER ") else {
            c.execute(sql.as_str()).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            continue;
        };
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT CAST(id AS SIGNED) FROM information_schema.processlist WHERE user = ?")
                .bind(user)
                .fetch_all(&mut c)
                .await
                .expect("the user's connections");
        for id in ids {
            // (One that ended meanwhile is refused: nothing to do.)
            let _ = c.execute(format!("KILL {id}").as_str()).await;
        }
    }
}

/// A server database that refuses `serve`'s login (the user may no longer log in, its
/// connections ended) is unavailable, 503, as one that is down: not 500 `internal`, which a
/// probe would not take for the database. Back once the login is allowed again.
async fn health_is_unavailable_while_the_database_refuses_the_login(mut env: Env, user: &str, sql: [&[String]; 4]) {
    let [make, refuse, allow, drop_user] = sql;
    let admin = env.db_url.clone();
    as_admin(&admin, make).await;
    let (scheme, rest) = admin.split_once("://").expect("a scheme");
    let (_, host) = rest.split_once('@').expect("a user in the URL");
    env.db_url = format!("{scheme}://{user}@{host}");
    let served = Served::start(&env, "127.0.0.1:0");
    assert_eq!(served.call("GET", "/health", None, None).0, 200, "health as the new user");
    as_admin(&admin, refuse).await;
    common::wait_until(Duration::from_secs(30), "health refused", || async {
        served.call("GET", "/health", None, None).0 != 200
    })
    .await;
    for path in ["/health", "/ready", "/tasks/1"] {
        let (status, answer) = served.call("GET", path, None, None);
        assert_eq!((status, answer["error"]["code"].as_str()), (503, Some("unavailable")), "{path}: {answer}");
    }
    // A command started meanwhile says what the database said of the login, in one line.
    let o = common::process::run(&env, &["list"]);
    let said = common::process::stderr(&o);
    assert!(!o.status.success() && said.contains("authentication failed: "), "{said}");
    as_admin(&admin, allow).await;
    common::wait_until(Duration::from_secs(30), "health again", || async {
        served.call("GET", "/health", None, None).0 == 200
    })
    .await;
    drop(served);
    as_admin(&admin, refuse).await;
    as_admin(&admin, drop_user).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_unavailable_while_the_database_refuses_the_login_on_postgres() {
    let env = Env::postgres(&["echo"]).await;
    let user = format!("th_login_{:08x}", rand::random::<u32>());
    let ended = format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{user}'");
    let sql = [
        &[format!("CREATE ROLE {user} LOGIN SUPERUSER")][..],
        &[format!("ALTER ROLE {user} NOLOGIN"), ended],
        &[format!("ALTER ROLE {user} LOGIN")],
        &[format!("DROP ROLE {user}")],
    ];
    health_is_unavailable_while_the_database_refuses_the_login(env, &user, sql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_unavailable_while_the_database_refuses_the_login_on_mysql() {
    let env = Env::mysql(&["echo"]).await;
    let user = format!("th_login_{:08x}", rand::random::<u32>());
    let db = env.db_url.rsplit_once('/').map(|(_, db)| db.to_string()).expect("a database");
    let account = format!("'{user}'@'127.0.0.1'");
    let sql = [
        &[format!("CREATE USER {account}"), format!("GRANT ALL ON {db}.* TO {account}")][..],
        &[format!("ALTER USER {account} ACCOUNT LOCK"), format!("KILL USER {user}")],
        &[format!("ALTER USER {account} ACCOUNT UNLOCK")],
        &[format!("DROP USER {account}")],
    ];
    health_is_unavailable_while_the_database_refuses_the_login(env, &user, sql).await;
}

/// A database that takes the server's bytes and answers none (a network cut that no peer
/// notices): a health probe is answered 503 `unavailable` within its 2 s, not after the pool's
/// wait for a connection nor never, and 200 again once the network is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_unavailable_in_time_while_the_database_is_cut_off() {
    let freezer = common::freezer::Freezer::start("127.0.0.1:5432").await;
    let env = Env::on_scratch(common::postgres_database(&freezer.addr).await, &["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let health = |served: &Served| {
        let served = served.handle();
        tokio::task::spawn_blocking(move || served.call("GET", "/health", None, None))
    };
    assert_eq!(health(&served).await.expect("health").0, 200, "health through the proxy");
    freezer.freeze(true);
    let asked = std::time::Instant::now();
    let (status, answer) = health(&served).await.expect("health");
    assert_eq!((status, answer["error"]["code"].as_str()), (503, Some("unavailable")), "{answer}");
    // Its 2 s, not the pool's 10 s wait for a connection whose ping goes unanswered.
    assert!(asked.elapsed() < Duration::from_secs(6), "answered after {:?}", asked.elapsed());
    freezer.freeze(false);
    common::wait_until(Duration::from_secs(30), "health again", || async {
        health(&served).await.is_ok_and(|(status, _)| status == 200)
    })
    .await;
}
