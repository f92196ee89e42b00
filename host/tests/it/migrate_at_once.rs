//! Processes started at once on a new database (a `serve` and a `worker`, or workers on several
//! machines at a first deploy) each migrate it at start: they must apply the migrations one
//! after another, each migration once, and every process start.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;

/// How many processes migrate at once.
const PROCESSES: usize = 4;

/// `taskhost migrate` run by [`PROCESSES`] processes at once on `url`: each succeeds, and each
/// migration of `migrations/{migrations}/` is applied by exactly one of them.
async fn migrate_at_once(url: &str, migrations: &str) {
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_taskhost"));
            c.args(["--database-url", url, "migrate"])
                .env_remove("TASKHOST_DATABASE_URL")
                .env_remove("TASKHOST_CONFIG")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            common::process::Killed::from(c.spawn().expect("spawn taskhost migrate"))
        })
        .collect();
    let mut applied: BTreeMap<String, usize> = BTreeMap::new();
    for child in children {
        let out = common::process::wait_exit(child, Duration::from_secs(120)).await;
        let (stdout, stderr) = (common::process::stdout(&out), common::process::stderr(&out));
        assert!(out.status.success(), "{url}: a migrate failed: {stderr}\n{stdout}");
        for line in stdout.lines().filter_map(|l| l.strip_prefix("applied ")) {
            *applied.entry(line.to_string()).or_default() += 1;
        }
    }
    let twice: Vec<_> = applied.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "{url}: applied more than once: {twice:?}");
    let files = std::fs::read_dir(common::repo_root().join("migrations").join(migrations)).expect("the migrations");
    let mut want: Vec<String> = files
        .filter_map(|f| f.ok()?.file_name().into_string().ok())
        .filter_map(|n| Some(n.strip_suffix(".sql")?.replace('_', " ")))
        .collect();
    want.sort();
    assert_eq!(applied.into_keys().collect::<Vec<_>>(), want, "{url}: the migrations applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_migrating_a_new_sqlite_file_at_once_apply_each_migration_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    migrate_at_once(&format!("sqlite://{}", dir.path().join("queue.db").display()), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_migrating_a_new_postgres_database_at_once_apply_each_migration_once() {
    let db = common::postgres_scratch().await;
    migrate_at_once(&db, "postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_migrating_a_new_mysql_database_at_once_apply_each_migration_once() {
    let db = common::mysql_scratch().await;
    migrate_at_once(&db, "mysql").await;
}
