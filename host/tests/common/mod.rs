//! Test helpers: real SQLite files in temporary directories, real components built from source.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use taskhost::clock::{ManualClock, SharedClock, SystemClock};
use taskhost::runner::{WorkerConfig, WorkerReport};
use taskhost::sandbox::SandboxConfig;
use taskhost::{App, AppConfig};
use tempfile::TempDir;

pub mod freezer;
pub mod http;
pub mod locker;
pub mod migrated;
pub mod netns;
pub mod process;
pub mod served;
pub mod sse;
pub mod wakeups;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ has a parent").to_path_buf()
}

/// Build the example handlers from source, once per test binary; returns the output folder.
pub fn built_plugins() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = repo_root();
        let out = root.join("target/test-plugins");
        let status = Command::new("bash")
            .arg(root.join("plugins/build.sh"))
            .current_dir(&root)
            .env("TASKHOST_PLUGIN_OUT", &out)
            .env("TASKHOST_BAD_PLUGIN_OUT", root.join("target/test-plugins-bad"))
            .status()
            .expect("running plugins/build.sh");
        assert!(status.success(), "building the example plugins failed");
        out
    })
}

/// A built component file, from the normal or the deliberately-bad output folder.
pub fn component(name: &str) -> PathBuf {
    let good = built_plugins().join(format!("{name}.wasm"));
    if good.exists() {
        return good;
    }
    let bad = repo_root().join("target/test-plugins-bad").join(format!("{name}.wasm"));
    assert!(bad.exists(), "no built component named {name}");
    bad
}

/// Shared compiled-artifact cache for the tests: each component compiles once.
pub fn cache_dir() -> PathBuf {
    repo_root().join("target/test-cache")
}

/// One test's world: a temporary folder with a SQLite file and a plugins folder.
pub struct Env {
    pub dir: TempDir,
    pub plugins: PathBuf,
    pub db_url: String,
    pub app: App,
    pub clock: SharedClock,
    /// The operator's configuration file, once [`Env::set_config`] wrote one.
    pub config: Option<PathBuf>,
    /// The server database made for this test, dropped after the app (fields drop in order).
    scratch: Option<ScratchDb>,
}

impl Env {
    /// With the real clock.
    pub async fn new(plugins: &[&str]) -> Env {
        Self::with_clock(plugins, Arc::new(SystemClock)).await
    }

    /// With a manual clock starting now.
    pub async fn manual(plugins: &[&str]) -> (Env, ManualClock) {
        use chrono::SubsecRound;
        // Whole microseconds: what the database keeps.
        let clock = ManualClock::new(chrono::Utc::now().trunc_subsecs(6));
        (Self::with_clock(plugins, Arc::new(clock.clone())).await, clock)
    }

    pub async fn with_clock(plugins: &[&str], clock: SharedClock) -> Env {
        Self::build(plugins, clock, None).await
    }

    /// On `db` (a fresh SQLite file, PostgreSQL schema or MariaDB database), with the real clock.
    pub async fn on(db: Db, plugins: &[&str]) -> Env {
        Self::build(plugins, Arc::new(SystemClock), db.scratch().await).await
    }

    /// On `db`, with a manual clock starting now.
    pub async fn manual_on(db: Db, plugins: &[&str]) -> (Env, ManualClock) {
        use chrono::SubsecRound;
        let clock = ManualClock::new(chrono::Utc::now().trunc_subsecs(6));
        (Self::build(plugins, Arc::new(clock.clone()), db.scratch().await).await, clock)
    }

    /// On `db`'s server of the tests that stop theirs ([`own_server`]), with the real clock.
    pub async fn on_own_server(db: Db, plugins: &[&str]) -> Env {
        let scratch = match db {
            Db::Sqlite => panic!("SQLite has no server to stop"),
            Db::Postgres => postgres_scratch_on(OWN_POSTGRES).await,
            Db::MySql => mysql_scratch_on(OWN_MYSQL).await,
        };
        Self::build(plugins, Arc::new(SystemClock), Some(scratch)).await
    }

    /// On a server database of the test's own making (as [`postgres_database`] makes).
    pub async fn on_scratch(scratch: ScratchDb, plugins: &[&str]) -> Env {
        Self::build(plugins, Arc::new(SystemClock), Some(scratch)).await
    }

    /// On PostgreSQL (a fresh schema in database `test`) instead of a SQLite file.
    pub async fn postgres(plugins: &[&str]) -> Env {
        Self::build(plugins, Arc::new(SystemClock), Some(postgres_scratch().await)).await
    }

    /// On MariaDB/MySQL (a fresh database) instead of a SQLite file.
    pub async fn mysql(plugins: &[&str]) -> Env {
        Self::build(plugins, Arc::new(SystemClock), Some(mysql_scratch().await)).await
    }

    async fn build(plugins: &[&str], clock: SharedClock, scratch: Option<ScratchDb>) -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        let plugin_dir = dir.path().join("plugins");
        std::fs::create_dir_all(&plugin_dir).expect("plugins dir");
        for p in plugins {
            std::fs::copy(component(p), plugin_dir.join(format!("{p}.wasm"))).expect("copy plugin");
        }
        let db_url = match &scratch {
            Some(s) => s.url.clone(),
            None => format!("sqlite://{}", dir.path().join("queue.db").display()),
        };
        let app = App::open_with_clock(&app_config(&db_url, &plugin_dir), clock.clone()).await.expect("open app");
        Env { dir, plugins: plugin_dir, db_url, app, clock, config: None, scratch }
    }

    /// Write the operator's configuration file (outside the plugins directory) and reopen the
    /// app with it; the `taskhost` commands of this environment get `--config` too.
    pub async fn set_config(&mut self, toml: &str) {
        let path = self.dir.path().join("operator.toml");
        std::fs::write(&path, toml).expect("write config");
        let mut config = app_config(&self.db_url, &self.plugins);
        config.policy = taskhost::config::Policy::load(&path).expect("valid configuration");
        config.policy.compile.program = Some(compiler());
        self.app = App::open_with_clock(&config, self.clock.clone()).await.expect("open app");
        self.config = Some(path);
    }

    /// A second App on the same database file and plugins (as another process would have).
    pub async fn second_app(&self) -> App {
        let mut config = app_config(&self.db_url, &self.plugins);
        config.policy = self.app.catalog.policy().clone();
        App::open_with_clock(&config, self.clock.clone()).await.expect("open app")
    }

    pub fn write_manifest(&self, name: &str, toml: &str) {
        std::fs::write(self.plugins.join(format!("{name}.toml")), toml).expect("write manifest");
    }

    pub fn write_plugin_bytes(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.plugins.join(format!("{name}.wasm")), bytes).expect("write plugin");
    }

    pub fn copy_plugin(&self, component_name: &str, as_name: &str) {
        std::fs::copy(component(component_name), self.plugins.join(format!("{as_name}.wasm"))).expect("copy plugin");
    }

    pub fn remove_plugin(&self, name: &str) {
        std::fs::remove_file(self.plugins.join(format!("{name}.wasm"))).expect("remove plugin");
    }

    /// Run a worker until nothing is due; the overseer is off unless the config has it.
    pub async fn drain(&self, cfg: WorkerConfig) -> WorkerReport {
        drain_app(&self.app, cfg).await
    }
}

/// The databases a test may run on; [`on_every_database!`] runs a test on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
    MySql,
}

impl Db {
    /// A scratch database on the server (None: SQLite, a file in the test's directory).
    async fn scratch(self) -> Option<ScratchDb> {
        match self {
            Db::Sqlite => None,
            Db::Postgres => Some(postgres_scratch().await),
            Db::MySql => Some(mysql_scratch().await),
        }
    }
}

/// `on_every_database!(test_a, test_b)`: each `async fn test_a(db: Db)` as three tests,
/// `sqlite::test_a`, `postgres::test_a` and `mysql::test_a`.
#[macro_export]
macro_rules! on_every_database {
    ($($name:ident),* $(,)?) => {
        $crate::on_every_database!(@db sqlite, Sqlite, $($name),*);
        $crate::on_every_database!(@db postgres, Postgres, $($name),*);
        $crate::on_every_database!(@db mysql, MySql, $($name),*);
    };
    (@db $module:ident, $db:ident, $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::Db::$db).await
                }
            )*
        }
    };
}

/// A scratch schema (PostgreSQL) or database (MariaDB/MySQL) made for one test, dropped when
/// this is dropped: tests leave nothing behind on the servers. Derefs to its URL.
pub struct ScratchDb {
    pub url: String,
    admin_url: String,
    drop_sql: String,
}

impl std::ops::Deref for ScratchDb {
    type Target = str;
    fn deref(&self) -> &str {
        &self.url
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        use sqlx::Connection;
        let (admin, sql) = (self.admin_url.clone(), self.drop_sql.clone());
        // Drop runs inside the test's runtime: the statement gets a thread and runtime of its own.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                if admin.starts_with("postgres") {
                    let mut conn = sqlx::PgConnection::connect(&admin).await.map_err(|e| e.to_string())?;
                    sqlx::query("SET lock_timeout = '10s'").execute(&mut conn).await.map_err(|e| e.to_string())?;
                    sqlx::query(&sql).execute(&mut conn).await.map_err(|e| e.to_string())?;
                } else {
                    let mut conn = sqlx::MySqlConnection::connect(&admin).await.map_err(|e| e.to_string())?;
                    sqlx::query("SET SESSION lock_wait_timeout = 10")
                        .execute(&mut conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    sqlx::query(&sql).execute(&mut conn).await.map_err(|e| e.to_string())?;
                }
                Ok::<(), String>(())
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not drop the test's scratch database ({}): {e}", self.drop_sql),
            Err(_) => eprintln!("could not drop the test's scratch database ({})", self.drop_sql),
        }
    }
}

impl ScratchDb {
    /// A database a test made itself at `url`, dropped by `drop_sql` run at `admin_url`.
    pub fn made(url: String, admin_url: String, drop_sql: String) -> ScratchDb {
        ScratchDb { url, admin_url, drop_sql }
    }
}

/// The servers of the tests that stop their server (`scripts/own-servers.sh`), apart from the
/// shared ones so that the other tests run beside them.
pub const OWN_POSTGRES: &str = "postgres://postgres@127.0.0.1:5433/test";
pub const OWN_MYSQL: &str = "mysql://taskhost@127.0.0.1:3307/test";

/// Stop, start or restart `db`'s own server ([`OWN_POSTGRES`], [`OWN_MYSQL`]), waiting until it
/// is down or answers.
pub fn own_server(db: Db, action: &str) {
    let which = match db {
        Db::Sqlite => panic!("SQLite has no server to stop"),
        Db::Postgres => "postgres",
        Db::MySql => "mysql",
    };
    let script = repo_root().join("scripts/own-servers.sh");
    let ok = Command::new("bash").arg(&script).args([action, which]).status().expect("bash").success();
    assert!(ok, "own-servers.sh {action} {which} failed");
}

/// A new, empty schema in the test PostgreSQL database. Panics when the server is not there: a
/// missing backend fails its tests, it is never skipped.
pub async fn postgres_scratch() -> ScratchDb {
    postgres_scratch_on(&postgres_base()).await
}

/// The test PostgreSQL server's database `test` (`TASKHOST_TEST_POSTGRES`).
fn postgres_base() -> String {
    std::env::var("TASKHOST_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A new, empty database on the test PostgreSQL server (not a schema: selecting one takes a
/// startup option, which a connection pooler refuses), reached at `via` (`host:port`, a pooler's).
pub async fn postgres_database(via: &str) -> ScratchDb {
    use sqlx::Connection;
    let base = postgres_base();
    let mut conn = sqlx::PgConnection::connect(&base)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {base} is needed (scripts/test-services.sh starts it): {e}"));
    let db = format!("t_{:016x}", rand::random::<u64>());
    sqlx::query(&format!("CREATE DATABASE {db}")).execute(&mut conn).await.expect("create database");
    let (user, _) = base.strip_prefix("postgres://").and_then(|r| r.split_once('@')).expect("a user in the URL");
    ScratchDb {
        url: format!("postgres://{user}@{via}/{db}"),
        admin_url: base,
        // (FORCE: a pooler may still hold a server connection to it.)
        drop_sql: format!("DROP DATABASE {db} WITH (FORCE)"),
    }
}

/// A new, empty schema in the PostgreSQL database at `base`.
pub async fn postgres_scratch_on(base: &str) -> ScratchDb {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {base} is needed (scripts/test-services.sh starts it): {e}"));
    let schema = format!("t_{:016x}", rand::random::<u64>());
    sqlx::query(&format!("CREATE SCHEMA {schema}")).execute(&mut conn).await.expect("create schema");
    ScratchDb {
        url: format!("{base}?options=-c%20search_path%3D{schema}"),
        admin_url: base.to_string(),
        drop_sql: format!("DROP SCHEMA {schema} CASCADE"),
    }
}

/// A new, empty database on the test MariaDB/MySQL server. Panics when the server is not there:
/// a missing backend fails its tests, it is never skipped.
pub async fn mysql_scratch() -> ScratchDb {
    let base = std::env::var("TASKHOST_TEST_MYSQL").unwrap_or_else(|_| "mysql://taskhost@127.0.0.1:3306/test".into());
    mysql_scratch_on(&base).await
}

/// A new, empty database on the MariaDB/MySQL server at `base`.
pub async fn mysql_scratch_on(base: &str) -> ScratchDb {
    use sqlx::Connection;
    let mut conn = sqlx::MySqlConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("MariaDB/MySQL at {base} is needed (scripts/test-services.sh starts it): {e}"));
    let db = format!("t_{:016x}", rand::random::<u64>());
    sqlx::query(&format!("CREATE DATABASE {db}")).execute(&mut conn).await.expect("create database");
    let (server, _) = base.rsplit_once('/').expect("URL has a database");
    ScratchDb { url: format!("{server}/{db}"), admin_url: base.to_string(), drop_sql: format!("DROP DATABASE {db}") }
}

pub fn app_config(db_url: &str, plugins: &Path) -> AppConfig {
    let mut c = AppConfig::new(db_url, plugins);
    c.cache_dir = Some(cache_dir());
    c.sandbox = SandboxConfig { pool_instances: 40, ..SandboxConfig::default() };
    c.policy.compile.program = Some(compiler());
    c
}

/// The binary components compile in (a bounded child process), as the CLI does.
pub fn compiler() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_taskhost"))
}

/// A worker config for tests: drain, no overseer, quick polls, no memory cap.
///
/// The cap is on the process's resident memory, and every in-process test shares this one: its
/// size says nothing about one test's worker, and passing the cap (768 MiB with one slot) made
/// unrelated workers exit at once, running nothing. The cap is tested on worker processes (cli.rs).
pub fn drain_config() -> WorkerConfig {
    WorkerConfig {
        drain: true,
        overseer: None,
        watch_plugins: None,
        poll_interval: Duration::from_millis(20),
        concurrency: 4,
        rss_cap_bytes: Some(u64::MAX),
        ..WorkerConfig::default()
    }
}

pub async fn drain_app(app: &App, cfg: WorkerConfig) -> WorkerReport {
    let worker = app.worker(cfg);
    tokio::time::timeout(Duration::from_secs(120), worker.run(std::future::pending()))
        .await
        .expect("the worker drained within 120 s")
        .expect("the worker ran")
}

/// Wait until `check` is true, polling; panics naming `what` after `deadline`.
pub async fn wait_until<F, Fut>(deadline: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        poll.tick().await;
        if check().await {
            return;
        }
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting until {what}");
    }
}

/// The `taskhost` command on this environment's database, plugins and cache, ignoring the
/// caller's TASKHOST_* variables.
pub fn taskhost_command(env: &Env) -> Command {
    taskhost_command_caching_in(env, &cache_dir())
}

/// The same, caching compiled components in `cache` (a new one makes every plugin compile).
pub fn taskhost_command_caching_in(env: &Env, cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_taskhost"));
    c.arg("--database-url")
        .arg(&env.db_url)
        .arg("--plugins")
        .arg(&env.plugins)
        .arg("--cache-dir")
        .arg(cache)
        .env_remove("TASKHOST_DATABASE_URL")
        .env_remove("TASKHOST_PLUGINS")
        .env_remove("TASKHOST_CONFIG");
    if let Some(config) = &env.config {
        c.arg("--config").arg(config);
    }
    c
}

/// wasm-tools, as plugins/build.sh installs it.
pub fn wasm_tools() -> PathBuf {
    built_plugins();
    repo_root().join("target/tools/py/bin/wasm-tools")
}
