//! A deploy whose database server stops under it, its component's pieces written and not yet
//! committed: it fails in one line and leaves nothing half-done (no version, no release, no piece), the worker
//! keeps running the version before, and once the server is back a deploy switches the worker.

use std::process::Stdio;
use std::time::Duration;

use crate::common::process::{stderr, wait_exit};
use crate::common::{self, component, own_server, wait_until, Db, Env};
use sha2::{Digest, Sha256};
use taskhost::model::{NewTask, RunStatus};

fn digest_of(file: &str) -> String {
    hex::encode(Sha256::digest(std::fs::read(component(file)).expect("read component")))
}

/// Hold the version row a deploy of `digest` as `greet` will write, in a transaction left open:
/// the deploy, its pieces written, waits for it (a row of the same key, not committed).
async fn hold_version_row(db: Db, url: &str, digest: &str) -> Box<dyn std::any::Any> {
    use sqlx::{Connection, Executor};
    let insert = format!(
        "INSERT INTO task_handler_versions (handler, digest, manifest, deployed_on, deployed_by)
         VALUES ('greet', '{digest}', NULL, '2026-01-01 00:00:00', 'test')"
    );
    match db {
        Db::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
            c.execute("BEGIN").await.expect("begin");
            c.execute(insert.as_str()).await.expect("hold the row");
            Box::new(c)
        }
        _ => {
            let mut c = sqlx::MySqlConnection::connect(url).await.expect("connect");
            c.execute("BEGIN").await.expect("begin");
            c.execute(insert.as_str()).await.expect("hold the row");
            Box::new(c)
        }
    }
}

/// Whether a deploy waits for the row [`hold_version_row`] holds: its pieces are written, in its
/// transaction, not committed.
async fn deploy_waits(db: Db, url: &str) -> bool {
    use sqlx::Connection;
    match db {
        Db::Postgres => {
            let Ok(mut c) = sqlx::PgConnection::connect(url).await else { return false };
            let sql = "SELECT count(*) FROM pg_stat_activity
                       WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO task_handler_versions%'";
            sqlx::query_scalar::<_, i64>(sql).fetch_one(&mut c).await.is_ok_and(|n| n > 0)
        }
        _ => {
            let Ok(mut c) = sqlx::MySqlConnection::connect(url).await else { return false };
            // Its statement, executing (the row held, it cannot end): the one that held it has.
            let sql = "SELECT count(*) FROM information_schema.processlist
                       WHERE command = 'Execute' AND info LIKE 'INSERT INTO task_handler_versions%'";
            sqlx::query_scalar::<_, i64>(sql).fetch_one(&mut c).await.is_ok_and(|n| n > 0)
        }
    }
}

/// Queue a task of `greet` and wait until it succeeded: the digest its run ran.
async fn run_greet(env: &Env) -> String {
    let id = env.app.client.add(NewTask::new("greet", "{}")).await.expect("add").id;
    let client = &env.app.client;
    wait_until(Duration::from_secs(120), "greet ran", || async {
        client.show(id).await.is_ok_and(|(t, _)| t.last_status == RunStatus::Success)
    })
    .await;
    let (_, runs) = client.show(id).await.expect("show");
    runs.last().and_then(|r| r.component_digest.clone()).expect("the run records its component")
}

pub async fn a_deploy_cut_off_by_a_restart_leaves_nothing_half_done(db: Db) {
    let env = Env::on_own_server(db, &[]).await;
    let deploy = |file: &str| {
        let path = component(file);
        let mut c = common::taskhost_command(&env);
        c.args(["deploy", path.to_str().expect("path"), "--name", "greet"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().expect("spawn deploy")
    };
    let first = wait_exit(deploy("echo"), Duration::from_secs(60)).await;
    assert!(first.status.success(), "{}", stderr(&first));
    let worker = common::process::Killed::from(
        common::taskhost_command(&env)
            .args(["worker", "--concurrency", "2", "--shutdown-grace", "2s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn worker"),
    );
    assert_eq!(run_greet(&env).await, digest_of("echo"));
    let mark = env.app.store.release_mark().await.expect("mark");

    // 18 MB: its pieces written, the deploy waits for a row held open here; then the server stops.
    let url = env.db_url.clone();
    let held = hold_version_row(db, &url, &digest_of("py-stats")).await;
    let big = std::sync::Arc::new(std::sync::Mutex::new(deploy("py-stats")));
    wait_until(Duration::from_secs(60), "the deploy wrote its pieces and waits", || {
        let (big, url) = (big.clone(), url.clone());
        async move {
            let ended = big.lock().expect("the deploy").try_wait().expect("try_wait");
            assert!(ended.is_none(), "the deploy ended ({ended:?}) before it waited");
            deploy_waits(db, &url).await
        }
    })
    .await;
    own_server(db, "stop");
    drop(held);
    let big = std::sync::Arc::try_unwrap(big).expect("one owner").into_inner().expect("the deploy");
    let cut = wait_exit(big, Duration::from_secs(120)).await;
    own_server(db, "start");
    let said = stderr(&cut);
    assert!(!cut.status.success(), "the deploy fails: {said}");
    assert_eq!(said.trim().lines().count(), 1, "one line: {said}");
    eprintln!("a deploy cut off on {db:?} said: {}", said.trim());

    let store = &env.app.store;
    wait_until(Duration::from_secs(60), "the database answers again", || async { store.release_mark().await.is_ok() })
        .await;
    assert_eq!(store.release_mark().await.expect("mark"), mark, "no release was made");
    assert_eq!(store.component(&digest_of("py-stats"), 1 << 30).await.expect("read"), None, "no piece was kept");
    let versions = env.app.client.versions("greet").await.expect("versions");
    assert_eq!(versions.iter().map(|v| v.digest.as_str()).collect::<Vec<_>>(), [digest_of("echo")]);
    assert_eq!(run_greet(&env).await, digest_of("echo"), "the worker runs the version before");

    let after = wait_exit(deploy("noop"), Duration::from_secs(60)).await;
    assert!(after.status.success(), "{}", stderr(&after));
    assert_eq!(run_greet(&env).await, digest_of("noop"), "a deploy after the restart switches the worker");
    common::process::signal(&worker, "TERM");
    let stopped = wait_exit(worker, Duration::from_secs(30)).await;
    assert!(stopped.status.success(), "the worker stops cleanly: {}", stderr(&stopped));
}
