//! Queueing tasks in SQL (`taskhost_add`, docs/clients.md), as an application in any language
//! does in its own transaction: from each database's shell (`psql`, `mysql`, `sqlite3`) and from
//! Python with the driver an application uses (psycopg, PyMySQL, sqlite3), against a live worker
//! process. A rolled-back transaction leaves no task, a committed one runs; a key's turn and
//! `after` are given by the overseer's intake; bad input is one error naming what is wrong; a
//! task for a handler no worker has becomes a dead letter.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use common::process::{signal, spawn_worker, stderr, stdout, wait_exit};
use common::{repo_root, wait_until, Db, Env};
use serde_json::{json, Value};
use taskhost::model::{NewTask, TaskId, TaskState};

/// Run `statements` in one session of `db`'s shell, in order, stopping at the first error
/// (read from standard input: an argument is at most 128 KiB).
pub(crate) fn shell(db: Db, env: &Env, statements: &[&str]) -> Output {
    let mut input = statements.join(";\n");
    input.push_str(";\n");
    shell_bytes(db, env, input.as_bytes())
}

/// The database's shell given `input` as it is, bytes that are not UTF-8 too.
pub(crate) fn shell_bytes(db: Db, env: &Env, input: &[u8]) -> Output {
    use std::io::Write;
    let url = env.db_url.as_str();
    let mut c = match db {
        Db::Postgres => {
            let mut c = Command::new("psql");
            c.arg(url).args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"]);
            c
        }
        Db::MySql => {
            let rest = url.strip_prefix("mysql://").expect("a mysql URL");
            let (user, rest) = rest.split_once('@').expect("a user");
            let (host, database) = rest.split_once('/').expect("a database");
            let (host, port) = host.split_once(':').unwrap_or((host, "3306"));
            let mut c = Command::new("mysql");
            c.args(["-h", host, "-P", port, "-u", user, "-N", "-B", database]);
            c
        }
        Db::Sqlite => {
            // (A busy timeout, as the host's own connections have: a write meeting one of the
            // host's, a deploy's say, waits for it instead of failing at once with "database is
            // locked".)
            let mut c = Command::new("sqlite3");
            c.args(["-bail", "-cmd", ".timeout 30000", sqlite_path(url)]);
            c
        }
    };
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the database's shell");
    child.stdin.take().expect("stdin").write_all(input).expect("write the statements");
    child.wait_with_output().expect("the shell's output")
}

fn sqlite_path(url: &str) -> &str {
    let path = url.strip_prefix("sqlite://").expect("a sqlite URL");
    path.split_once('?').map_or(path, |(p, _)| p)
}

/// The options that are periods: intervals on PostgreSQL, whole seconds on the others.
const PERIODS: [&str; 2] = ["unique_for", "run_timeout"];

/// One `taskhost_add` in `db`'s spelling: `options` as a JSON object (MySQL's third argument;
/// PostgreSQL's named arguments; SQLite's columns), and the statements that answer its id.
pub(crate) fn add_sql(db: Db, handler: &str, data: &str, options: Value) -> Vec<String> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let options = options.as_object().cloned().unwrap_or_default();
    let value = |is_period: bool, v: &Value| match (db, v) {
        (_, Value::String(s)) => quote(s),
        (Db::Postgres, Value::Array(ids)) => {
            format!("ARRAY[{}]::bigint[]", ids.iter().map(Value::to_string).collect::<Vec<_>>().join(", "))
        }
        (Db::Sqlite, Value::Array(_)) => quote(&v.to_string()),
        // PostgreSQL takes periods as intervals; the others as whole seconds.
        (Db::Postgres, Value::Number(n)) if is_period => format!("make_interval(secs => {n})"),
        (_, v) => v.to_string(),
    };
    match db {
        Db::Postgres => {
            let named: String =
                options.iter().map(|(k, v)| format!(", {k} => {}", value(PERIODS.contains(&k.as_str()), v))).collect();
            vec![format!("SELECT taskhost_add({}, {}{named})", quote(handler), quote(data))]
        }
        Db::MySql => {
            let options = if options.is_empty() { "NULL".into() } else { quote(&Value::Object(options).to_string()) };
            vec![format!("CALL taskhost_add({}, {}, {options})", quote(handler), quote(data))]
        }
        Db::Sqlite => {
            let names: String = options.keys().map(|k| format!(", \"{k}\"")).collect();
            let values: String = options.values().map(|v| format!(", {}", value(false, v))).collect();
            vec![
                format!(
                    "INSERT INTO taskhost_add (handler, data{names}) VALUES ({}, {}{values})",
                    quote(handler),
                    quote(data)
                ),
                "SELECT id FROM taskhost_added".into(),
            ]
        }
    }
}

/// Queue one task from `db`'s shell, in a transaction committed (or rolled back); its id.
pub(crate) fn add_in_shell(db: Db, env: &Env, handler: &str, data: &str, options: Value, commit: bool) -> TaskId {
    let begin = if db == Db::MySql { "START TRANSACTION" } else { "BEGIN" };
    let mut statements = vec![begin.to_string()];
    statements.extend(add_sql(db, handler, data, options));
    statements.push(if commit { "COMMIT" } else { "ROLLBACK" }.into());
    let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
    let o = shell(db, env, &statements);
    assert!(o.status.success(), "{statements:?}: {}{}", stdout(&o), stderr(&o));
    stdout(&o).trim().parse().unwrap_or_else(|_| panic!("one id printed: {:?}", stdout(&o)))
}

pub(crate) async fn state(env: &Env, id: TaskId) -> Option<TaskState> {
    env.app.store.get_task(id).await.expect("get").map(|t| t.state)
}

async fn until_state(env: &Env, id: TaskId, want: TaskState) {
    wait_until(Duration::from_secs(60), &format!("task {id} is {want}"), || async {
        state(env, id).await == Some(want)
    })
    .await;
}

async fn a_task_queued_in_sql_from_the_shell_runs_and_one_rolled_back_leaves_nothing(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let rolled_back = add_in_shell(db, &env, "echo", r#"{"n": 1}"#, json!({}), false);
    assert_eq!(state(&env, rolled_back).await, None, "a rolled-back add leaves no task");
    let committed = add_in_shell(db, &env, "echo", r#"{"n": 2}"#, json!({"queue": "default", "priority": -1}), true);
    let unique = json!({"unique_key": "order-7"});
    let first = add_in_shell(db, &env, "echo", r#"{"n": 3}"#, unique.clone(), true);
    assert_eq!(add_in_shell(db, &env, "echo", r#"{"n": 4}"#, unique, true), first, "the key's holder is answered");
    // A key's turn and the wait for another task are given by the intake.
    let keyed = add_in_shell(db, &env, "echo", r#"{"n": 5}"#, json!({"key": "tenant-1"}), true);
    let after = add_in_shell(db, &env, "echo", r#"{"n": 6}"#, json!({"after": [keyed]}), true);
    let later = add_in_shell(db, &env, "echo", "{}", json!({"run_at": "2099-01-02T03:04:05+01:00"}), true);
    // Written waiting for the intake, which no claim takes; the intake gives the keyed task its
    // turn and makes it due, and the other waits for it.
    for id in [keyed, after] {
        assert_eq!(state(&env, id).await, Some(TaskState::Waiting));
    }
    assert_eq!(env.app.store.take_in_arrivals(env.clock.now(), 100).await.expect("intake"), 2);
    assert_eq!(state(&env, keyed).await, Some(TaskState::Scheduled));
    let waiting = env.app.store.get_task(after).await.expect("get").expect("task");
    assert_eq!((waiting.state, waiting.waiting_for), (TaskState::Waiting, 1));

    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    for id in [committed, first, keyed, after] {
        until_state(&env, id, TaskState::Succeeded).await;
    }
    let runs = env.app.store.runs_of(committed).await.expect("runs");
    let results: Option<Value> =
        runs.last().and_then(|r| r.results.as_deref()).and_then(|r| serde_json::from_str(r).ok());
    assert_eq!(results, Some(json!({"n": 2})), "{runs:?}");
    let task = env.app.store.get_task(committed).await.expect("get").expect("the task");
    assert_eq!((task.queue.as_str(), task.priority, task.max_attempts), ("default", -1, 5));
    assert_eq!(env.app.store.get_task(keyed).await.expect("get").expect("task").key.as_deref(), Some("tenant-1"));
    let deps: Vec<TaskId> = env.app.store.dependencies(after).await.expect("deps").iter().map(|d| d.id).collect();
    assert_eq!(deps, vec![keyed], "the task waited for the one it runs after");
    let ended = env.app.store.runs_of(keyed).await.expect("runs")[0].finished_on.expect("ended");
    let started = env.app.store.runs_of(after).await.expect("runs")[0].started_on.expect("started");
    assert!(started >= ended, "it ran after: {started} < {ended}");
    let later = env.app.store.get_task(later).await.expect("get").expect("task");
    assert_eq!(
        (later.state, later.scheduled_on.to_rfc3339()),
        (TaskState::Scheduled, "2099-01-02T02:04:05+00:00".into())
    );
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}

async fn bad_input_to_taskhost_add_is_one_error_naming_what_is_wrong_and_adds_nothing(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let done = add_in_shell(db, &env, "echo", "{}", json!({}), true);
    let cancelled = env.app.store.cancel_tasks(&[done], env.clock.now()).await.expect("cancel");
    assert_eq!(cancelled, vec![done]);
    let big = format!("\"{}\"", "x".repeat(1 << 20));
    let mut cases: Vec<(&str, &str, Value, String)> = vec![
        ("bad name", "{}", json!({}), "invalid handler".into()),
        ("echo", "{\"n\": ", json!({}), "data is not valid JSON".into()),
        ("echo", "{}", json!({"queue": "*"}), "invalid queue".into()),
        ("echo", "{}", json!({"max_attempts": 0}), "invalid max_attempts".into()),
        ("echo", "{}", json!({"key": " padded"}), "invalid key".into()),
        ("echo", "{}", json!({"key": "\u{a0}padded"}), "invalid key".into()),
        ("echo", "{}", json!({"key": "padded\u{3000}"}), "invalid key".into()),
        ("echo", "{}", json!({"unique_key": ""}), "invalid unique_key".into()),
        // MariaDB compares names padded with spaces: such names are refused on every database.
        ("echo", "{}", json!({"queue": "mail "}), "invalid queue".into()),
        ("echo", "{}", json!({"queue": "\u{3000}mail"}), "invalid queue".into()),
        ("echo", "{}", json!({"unique_key": "k "}), "invalid unique_key".into()),
        ("echo", "{}", json!({"unique_key": "\u{a0}k"}), "invalid unique_key".into()),
        ("echo", "{}", json!({"unique_key": "k", "unique_states": "any "}), "invalid unique_states".into()),
        ("echo", "{}", json!({"run_at": "2030-01-01 00:00:00+99:99"}), "run_at".into()),
        ("echo", "{}", json!({"after": [done + 1000]}), "invalid after".into()),
        ("echo", "{}", json!({"after": [done]}), "dead or cancelled".into()),
        ("echo", "{}", json!({"run_anyway": true}), "invalid run_anyway".into()),
        ("echo", "{}", json!({"priority": 3_000_000_000i64}), "priority".into()),
        ("echo", "{}", json!({"run_at": "someday"}), "run_at".into()),
        ("echo", "{}", json!({"run_at": "2030-02-30 00:00:00"}), "run_at".into()),
        ("echo", "{}", json!({"run_at": "0000-01-01 00:00:00+14:00"}), "run_at".into()),
        ("echo", "{}", json!({"queued_by": "x".repeat(256)}), "invalid queued_by".into()),
        ("echo", &big, json!({}), "data".into()),
        ("echo", "{}", json!({"unique_for": 3600}), "invalid unique_for".into()),
        ("echo", "{}", json!({"unique_key": "k", "unique_for": 0}), "invalid unique_for".into()),
        ("echo", "{}", json!({"unique_key": "k", "unique_states": "all"}), "invalid unique_states".into()),
        ("echo", "{}", json!({"unique_states": "any"}), "invalid unique_states".into()),
        ("echo", "{}", json!({"run_timeout": 31_557_601}), "invalid run_timeout".into()),
        ("echo", "{}", json!({"version": "ABCDEF01"}), "invalid version".into()),
        ("echo", "{}", json!({"version": "abcdef01"}), "invalid version".into()),
    ];
    if db == Db::Sqlite {
        // The id the task itself would be given is no task yet (SQLite's view writes the row
        // before it reads the ids, and must not count its own).
        cases.push(("echo", "{}", json!({"after": [done + 1]}), "invalid after: there is no such task".into()));
    }
    if db != Db::MySql {
        // (The mysql client's string literal drops the backslash of JSON's `\u000b`.)
        cases.push(("echo", "{}", json!({"key": "padded\u{b}"}), "invalid key".into()));
    } else {
        // Option names are exact, spaces too (only MariaDB takes options as one JSON object).
        cases.push(("echo", "{}", json!({"queue ": "mail"}), "unknown option".into()));
        cases.push(("echo", "{}", json!({"unique_key": "k", "unique_states ": "any"}), "unknown option".into()));
    }
    for (handler, data, options, needle) in cases {
        let statements = add_sql(db, handler, data, options.clone());
        let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
        let o = shell(db, &env, &statements);
        assert!(!o.status.success(), "{statements:?} was refused: {}", stdout(&o));
        let said = stderr(&o);
        // (PostgreSQL refuses a priority past `integer` before the function runs.)
        assert!(said.contains("taskhost_add") && said.contains(&needle), "{statements:?}: {said}");
    }
    let all = env.app.store.list_tasks(&Default::default()).await.expect("list");
    assert_eq!(all.iter().map(|t| t.id).collect::<Vec<_>>(), vec![done], "nothing was added");
    // U+180E is no white space to Unicode, nor to the host: taken on every database.
    let names = json!({"queue": "mail\u{180e}", "key": "k\u{180e}", "unique_key": "\u{180e}u"});
    let taken = add_in_shell(db, &env, "echo", "{}", names, true);
    let taken = env.app.store.get_task(taken).await.expect("get").expect("the task");
    assert_eq!((taken.queue.as_str(), taken.key.as_deref()), ("mail\u{180e}", Some("k\u{180e}")));
}

/// A unique period and states, a run timeout and a pinned version given in SQL are written as an
/// add through the API writes them (a digest's start resolved to the whole), and hold: the key is
/// kept past the task's success, and its run runs the version pinned.
async fn the_rest_of_the_add_options_given_in_sql_are_written_as_the_api_writes_them(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let component = env.app.catalog.check_to_deploy("echo", &common::component("echo"), false).expect("checked");
    env.app.client.deploy(&component, "ops").await.expect("deploy");
    let options = |unique: &str| {
        json!({"unique_key": unique, "unique_for": 3600, "unique_states": "any", "run_timeout": 90,
               "version": &component.digest[..12]})
    };
    let in_sql = add_in_shell(db, &env, "echo", r#"{"n": 1}"#, options("sql"), true);
    let mut through_api = NewTask::new("echo", r#"{"n": 1}"#);
    through_api.unique_key = Some("api".into());
    through_api.unique_for = Some(Duration::from_secs(3600));
    through_api.unique_states = taskhost::model::UniqueStates::Any;
    through_api.run_timeout = Some(Duration::from_secs(90));
    through_api.version = Some(component.digest[..12].to_string());
    let through_api = env.app.client.add(through_api).await.expect("add through the API").id;
    let written = |t: taskhost::model::Task| {
        let held = t.unique_until.map(|u| (u - t.queued_on).num_seconds());
        (held, t.unique_states, t.run_timeout_secs, t.version)
    };
    let want = (Some(3600), taskhost::model::UniqueStates::Any, Some(90), Some(component.digest.clone()));
    for id in [in_sql, through_api] {
        assert_eq!(written(env.app.store.get_task(id).await.expect("get").expect("the task")), want, "task {id}");
    }
    // The default states may be named, and need no unique key.
    let plain = add_in_shell(db, &env, "echo", "{}", json!({"unique_states": "unfinished"}), true);
    let plain = env.app.store.get_task(plain).await.expect("get").expect("the task");
    assert_eq!(written(plain), (None, taskhost::model::UniqueStates::Unfinished, None, None));
    if db == Db::Postgres {
        // An interval's month is held 30 days, as it was checked, whatever the calendar and the zone.
        let add = "SELECT taskhost_add('echo', unique_key => 'month', unique_for => '1 mon')";
        let o = shell(db, &env, &["SET TimeZone = 'Europe/Berlin'", add]);
        assert!(o.status.success(), "{}", stderr(&o));
        let id: TaskId = stdout(&o).trim().parse().expect("the id");
        let task = env.app.store.get_task(id).await.expect("get").expect("the task");
        assert_eq!(written(task).0, Some(30 * 86_400));
    }

    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    until_state(&env, in_sql, TaskState::Succeeded).await;
    let runs = env.app.store.runs_of(in_sql).await.expect("runs");
    assert_eq!(runs.last().and_then(|r| r.component_digest.clone()), Some(component.digest.clone()), "{runs:?}");
    let again = add_in_shell(db, &env, "echo", r#"{"n": 2}"#, options("sql"), true);
    assert_eq!(again, in_sql, "a key held in any state is held past the task's success");
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}

async fn a_task_queued_in_sql_for_a_handler_no_worker_has_becomes_a_dead_letter(db: Db) {
    let mut env = Env::on(db, &["echo"]).await;
    env.set_config("[overseer.unserved]\nhorizon = \"1s\"\ninterval = \"100ms\"\n").await;
    // Outside a transaction (autocommit) this time.
    let statements = add_sql(db, "nope", "{}", json!({}));
    let o = shell(db, &env, &statements.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    let id: TaskId = stdout(&o).trim().parse().expect("the id");
    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    until_state(&env, id, TaskState::Dead).await;
    let runs = env.app.store.runs_of(id).await.expect("runs");
    assert_eq!(runs.last().and_then(|r| r.error_code.as_deref()), Some("handler-not-found"), "{runs:?}");
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}

/// psycopg and PyMySQL installed once for the test run, into a directory of the tests'.
fn python_drivers() -> &'static PathBuf {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let into = repo_root().join("target/tools/sql-drivers");
        if !into.join("pymysql").exists() || !into.join("psycopg_binary").exists() {
            let o = Command::new("python3")
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade", "--target"])
                .arg(&into)
                .args(["psycopg[binary]", "PyMySQL"])
                .output()
                .expect("pip");
            assert!(o.status.success(), "pip install psycopg PyMySQL: {}{}", stdout(&o), stderr(&o));
        }
        into
    })
}

async fn an_application_queues_tasks_in_its_own_transactions_with_its_python_driver(db: Db) {
    let env = Env::on(db, &["echo"]).await;
    let o = Command::new("python3")
        .arg(repo_root().join("host/tests/sql/app.py"))
        .arg(&env.db_url)
        .env("PYTHONPATH", python_drivers())
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let seen: Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON line");
    let id = |k: &str| seen[k].as_i64().unwrap_or_else(|| panic!("{k}: {seen}"));
    // (SQLite may hand a rolled-back task's id out again: the data tells the tasks apart.)
    let rolled_back = env.app.store.get_task(id("rolled_back")).await.expect("get");
    assert!(rolled_back.is_none_or(|t| !t.data.contains("\"order\": 1")), "{seen}");
    assert_eq!(id("again"), id("committed"), "{seen}");
    assert!(seen["bad_data"].as_str().unwrap_or("").contains("taskhost_add: data is not valid JSON"), "{seen}");
    assert_eq!(seen["orders"], json!([2]), "only the committed transaction's row is left: {seen}");
    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    until_state(&env, id("committed"), TaskState::Succeeded).await;
    let tasks = env.app.store.list_tasks(&Default::default()).await.expect("list");
    assert_eq!(tasks.len(), 1, "one task: {tasks:?}");
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}

crate::on_every_database!(
    a_task_queued_in_sql_from_the_shell_runs_and_one_rolled_back_leaves_nothing,
    bad_input_to_taskhost_add_is_one_error_naming_what_is_wrong_and_adds_nothing,
    the_rest_of_the_add_options_given_in_sql_are_written_as_the_api_writes_them,
    a_task_queued_in_sql_for_a_handler_no_worker_has_becomes_a_dead_letter,
    an_application_queues_tasks_in_its_own_transactions_with_its_python_driver
);
