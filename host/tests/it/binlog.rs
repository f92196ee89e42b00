//! MySQL as it ships keeps a binary log (the shared test servers keep none: `scripts/mysql-server.sh`).
//! There an account with every privilege on its own database alone migrates and runs tasks, but a
//! trigger needs the SUPER privilege or `log_bin_trust_function_creators = 1`: `[tasks]
//! sql_add_handlers = "deployed"` then fails naming the server's refusal and makes no check, and
//! is made once the operator trusts function creators (docs/clients.md).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::process::{is_root, stderr, stdout};
use common::{drain_config, taskhost_command, wait_until, Db, Env, ScratchDb};
use serde_json::json;
use sqlx::Connection;
use taskhost::model::{NewTask, TaskState};

use super::sql_add::{add_in_shell, add_sql, shell, state};

/// A MySQL server of the test's own, keeping a binary log as MySQL does by default, run from the
/// build `scripts/mysql-server.sh` unpacked, on a data directory made for it; stopped when dropped.
struct LoggingMySql {
    child: Child,
    port: u16,
    /// Its data directory, removed after the server is stopped.
    _dir: Option<tempfile::TempDir>,
}

impl LoggingMySql {
    /// Started and answering. A port chosen free may be taken before mysqld binds it: a server
    /// that exits on its own is started again on another, up to three times.
    async fn start() -> LoggingMySql {
        let home = std::env::var("MYSQL_HOME").unwrap_or_else(|_| "/var/cache/taskhost-mysql".into());
        let root = Path::new(&home).join("root");
        let loader = root.join("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
        assert!(loader.exists(), "MySQL unpacked in {home} is needed (scripts/test-services.sh unpacks it)");
        let libs = format!(
            "{}:{}",
            root.join("usr/lib/x86_64-linux-gnu").display(),
            root.join("lib/x86_64-linux-gnu").display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |p: &str| -> PathBuf { dir.path().join(p) };
        // (As `scripts/mysql-server.sh` runs it: its own loader and libraries, no option files.)
        let mysqld = |args: &[String]| {
            let mut c = Command::new(&loader);
            c.arg("--library-path").arg(&libs).arg(root.join("usr/sbin/mysqld")).arg("--no-defaults");
            if is_root() {
                c.arg("--user=root");
            }
            c.arg(format!("--datadir={}", at("data").display()))
                .arg(format!("--basedir={}", root.join("usr").display()))
                .arg(format!("--lc-messages-dir={}", root.join("usr/share/mysql").display()))
                .args(args);
            c
        };
        let made = mysqld(&["--initialize-insecure".into()]).output().expect("run mysqld --initialize-insecure");
        assert!(made.status.success(), "making MySQL's data directory: {}", stderr(&made));
        let log = at("error.log");
        for _ in 0..3 {
            let port =
                std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
            let mut command = mysqld(&[
                format!("--port={port}"),
                "--bind-address=127.0.0.1".into(),
                format!("--socket={}", at("mysqld.sock").display()),
                "--mysqlx=OFF".into(),
                "--secure-file-priv=".into(),
                "--performance-schema=OFF".into(),
                format!("--log-error={}", log.display()),
            ]);
            // Killed with the test's thread, should the test process be killed before its drop.
            // SAFETY: only prctl runs between fork and exec.
            unsafe {
                use std::os::unix::process::CommandExt;
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start mysqld");
            let mut server = LoggingMySql { child, port, _dir: None };
            let admin = server.url("root", "mysql");
            let mut exited = false;
            wait_until(Duration::from_secs(60), "the MySQL server answers or exits", || {
                exited = matches!(server.child.try_wait(), Ok(Some(_)));
                let answers = !exited;
                let admin = admin.clone();
                async move { !answers || sqlx::MySqlConnection::connect(&admin).await.is_ok() }
            })
            .await;
            if !exited {
                server._dir = Some(dir);
                return server;
            }
        }
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = said.lines().rev().take(8).collect();
        panic!(
            "MySQL exited at each of three starts; its log ends:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }

    fn url(&self, user: &str, database: &str) -> String {
        format!("mysql://{user}@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for LoggingMySql {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `taskhost migrate` with the environment's file.
fn migrate(env: &Env) -> std::process::Output {
    taskhost_command(env).arg("migrate").output().expect("taskhost migrate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_server_keeping_a_binary_log_an_account_without_super_runs_tasks_and_the_handler_check_waits_for_trusted_creators(
) {
    let server = LoggingMySql::start().await;
    let admin = server.url("root", "mysql");
    let mut root = sqlx::MySqlConnection::connect(&admin).await.expect("connect as root");
    let (log_bin, trusted): (i64, i64) = sqlx::query_as("SELECT @@log_bin, @@log_bin_trust_function_creators")
        .fetch_one(&mut root)
        .await
        .expect("read the server's settings");
    assert_eq!((log_bin, trusted), (1, 0), "MySQL's defaults: a binary log, function creators not trusted");
    for s in ["CREATE DATABASE app", "CREATE USER app@'%'", "GRANT ALL ON app.* TO app@'%'"] {
        sqlx::query(s).execute(&mut root).await.expect(s);
    }
    let scratch = ScratchDb::made(server.url("app", "app"), admin.clone(), "DROP DATABASE app".into());
    // Migrated by the account (its procedures need no SUPER), which queues and runs tasks.
    let mut env = Env::on_scratch(scratch, &["echo"]).await;
    let by_host = env.app.client.add(NewTask::new("echo", "{}")).await.expect("the host queues a task").id;
    let in_sql = add_in_shell(Db::MySql, &env, "echo", "{}", json!({"queue": "default"}), true);
    env.drain(drain_config()).await;
    for id in [by_host, in_sql] {
        assert_eq!(state(&env, id).await, Some(TaskState::Succeeded), "task {id}");
    }

    // The check of handlers queued in SQL is a trigger: refused, said in one line, no check made.
    env.set_config("[tasks]\nsql_add_handlers = \"deployed\"\n").await;
    let o = migrate(&env);
    let line = stderr(&o);
    assert!(!o.status.success(), "{}{line}", stdout(&o));
    assert_eq!(line.trim().lines().count(), 1, "{line}");
    assert!(line.contains("[tasks] sql_add_handlers = \"deployed\""), "{line}");
    assert!(line.contains("1419") && line.contains("SUPER privilege and binary logging is enabled"), "{line}");
    assert!(line.contains("log_bin_trust_function_creators"), "{line}");
    assert!(!env.app.store.sql_add_check().await.expect("read").deployed_only, "no check made");
    add_in_shell(Db::MySql, &env, "echo", "{}", json!({}), true);

    // Trusted by the operator, it is made, and refuses what is not deployed.
    sqlx::query("SET GLOBAL log_bin_trust_function_creators = 1").execute(&mut root).await.expect("trust creators");
    let o = migrate(&env);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("taskhost_add now refuses a handler not deployed"), "{}", stdout(&o));
    let call = add_sql(Db::MySql, "echo", "{}", json!({})).remove(0);
    let o = shell(Db::MySql, &env, &[&call]);
    assert!(!o.status.success() && stderr(&o).contains("echo is not deployed"), "{}{}", stdout(&o), stderr(&o));
    // The host's own adds still pass it (its sessions are marked).
    let by_host = env.app.client.add(NewTask::new("echo", "{}")).await.expect("the host queues a task").id;
    assert_eq!(state(&env, by_host).await, Some(TaskState::Scheduled));
}
