//! PostgreSQL behind a connection pooler: PgBouncer (Debian's, `scripts/test-services.sh` installs
//! it) in session mode at its defaults, which refuses a startup parameter it does not know. The
//! store sets its sessions' settings as each connection opens instead (docs/databases.md).

use crate::common;

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::process::{is_root, run, signal, spawn_worker, stderr, stdout, wait_exit};
use common::{postgres_database, taskhost_command, wait_until, Db, Env};
use serde_json::json;
use taskhost::model::{NewTask, TaskState};

use super::sql_add::{add_in_shell, shell, state};

/// A PgBouncer process in front of the test PostgreSQL server, stopped when dropped.
struct Pooler {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Pooler {
    /// Started with its defaults but for where it listens, trust, and room for every pool of a
    /// test (in session mode a client holds a server connection while it is open).
    async fn start() -> Pooler {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
        let users = dir.path().join("users.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n").expect("write users");
        let ini = dir.path().join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host=127.0.0.1 port=5432\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {}\n\
                 pool_mode = session\ndefault_pool_size = 100\nmax_client_conn = 400\n",
                users.display()
            ),
        )
        .expect("write pgbouncer.ini");
        let bin = Path::new("/usr/sbin/pgbouncer");
        assert!(bin.exists(), "PgBouncer is needed (scripts/test-services.sh installs it)");
        let mut c = Command::new(bin);
        // (It will not run as root.)
        if is_root() {
            c.args(["-u", "postgres"]);
        }
        let child = c.arg(&ini).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start pgbouncer");
        wait_until(Duration::from_secs(30), "PgBouncer listens", || async {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await;
        Pooler { child, port, _dir: dir }
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_behind_pgbouncer_in_session_mode_runs_tasks_with_its_sessions_marked() {
    let pooler = Pooler::start().await;
    let scratch = postgres_database(&format!("127.0.0.1:{}", pooler.port)).await;
    // The store opens and migrates through the pooler: it sends no startup parameter PgBouncer
    // refuses (`options`, `extra_float_digits`), and its sessions say they are the host's.
    let mut env = Env::on_scratch(scratch, &["echo", "fan-out"]).await;
    assert!(env.db_url.contains(&format!(":{}/", pooler.port)), "{}", env.db_url);
    assert!(env.app.store.sql_add_check().await.expect("read").host_marked, "the host's sessions say so");

    // With the SQL handler check on, a task queued in SQL for a plugin's handler is refused, and
    // the host's own adds and a worker's run's children are not.
    env.set_config("[tasks]\nsql_add_handlers = \"deployed\"\n").await;
    let o = taskhost_command(&env).arg("migrate").output().expect("taskhost migrate");
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let o = shell(Db::Postgres, &env, &["SELECT taskhost_add('echo', '{}')"]);
    assert!(!o.status.success() && stderr(&o).contains("echo is not deployed"), "{}", stderr(&o));
    let fan = NewTask::new("fan-out", json!({"items": [1, 2, 3], "queue": "mail"}).to_string()).with_queue("mail");
    let fan = env.app.client.add(fan).await.expect("queue a fan-out").id;
    let o = run(&env, &["deploy", common::component("echo").to_str().expect("path"), "--name", "greet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = add_in_shell(Db::Postgres, &env, "greet", "{}", json!({"queue": "mail"}), true);

    let worker = spawn_worker(&env, &["--queues", "mail"]);
    wait_until(Duration::from_secs(120), "the fan-out, its children and the deployed handler's task ran", || async {
        let all = env.app.store.list_tasks(&Default::default()).await.expect("list");
        let children = all.iter().filter(|t| t.parent_id == Some(fan)).collect::<Vec<_>>();
        state(&env, id).await == Some(TaskState::Succeeded)
            && state(&env, fan).await == Some(TaskState::Succeeded)
            && children.len() == 3
            && children.iter().all(|t| t.state == TaskState::Succeeded)
    })
    .await;
    signal(&worker, "TERM");
    let out = wait_exit(worker, Duration::from_secs(30)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("not marked"), "the worker found its sessions marked: {}", stderr(&out));
}
