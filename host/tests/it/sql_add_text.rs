//! Text that is not UTF-8 queued in SQL on SQLite, which keeps any bytes as TEXT (the other
//! databases refuse them themselves, as tested here too): refused by `taskhost_add`, and harmless
//! in a row written around it. And times SQLite's functions take as given, a day past its month's end or the hour
//! 24: refused, and a task they were written to before 0040 due at the time they mean.

use crate::common;
use crate::sql_add::{add_in_shell, shell, shell_bytes, state};

use common::process::stderr;
use common::{Db, Env};
use serde_json::json;
use taskhost::model::TaskState;

/// SQLite keeps any bytes as TEXT: `taskhost_add` refuses text that is not UTF-8, naming the
/// argument, and keeps text that is; a row written around it (here an UPDATE) is read with U+FFFD
/// in place of its bad bytes, and stops no claim or list. (PostgreSQL and MariaDB refuse such
/// bytes themselves.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_is_not_utf8_is_refused_in_sql_on_sqlite_and_a_row_holding_it_stops_nothing() {
    let env = Env::on(Db::Sqlite, &["echo"]).await;
    let bad = |arg: &str, bytes: &str| {
        let o = shell(
            Db::Sqlite,
            &env,
            &[&format!("INSERT INTO taskhost_add (handler, \"{arg}\") VALUES ('echo', CAST(X'{bytes}' AS TEXT))")],
        );
        assert!(!o.status.success(), "{arg} {bytes} was taken");
        let said = stderr(&o);
        assert!(said.contains(&format!("taskhost_add: invalid {arg}: not UTF-8 text")), "{arg} {bytes}: {said}");
    };
    // A lone byte past ASCII, a cut sequence, an overlong form, a surrogate, past U+10FFFF.
    bad("data", "7B2261223A22FF227D");
    bad("data", "7B2261223A22E282227D");
    bad("queue", "C080");
    bad("unique_key", "EDA080");
    bad("key", "F4908080");
    bad("queued_by", "6D80");
    assert!(env.app.store.list_tasks(&Default::default()).await.expect("list").is_empty(), "nothing was added");

    let data = r#"{"name": "Zoë", "sign": "€", "face": "😀"}"#;
    let kept = add_in_shell(Db::Sqlite, &env, "echo", data, json!({"queue": "médias", "queued_by": "ü"}), true);
    let around = add_in_shell(Db::Sqlite, &env, "echo", "{}", json!({}), true);
    let good = add_in_shell(Db::Sqlite, &env, "echo", r#"{"n": 1}"#, json!({}), true);
    let o = shell(
        Db::Sqlite,
        &env,
        &[&format!(
        "UPDATE task_queue SET task_data = CAST(X'7B2261223A22FF227D' AS TEXT), queued_by_id = CAST(X'FF' AS TEXT) \
         WHERE id = {around}"
    )],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = env.app.store.list_tasks(&Default::default()).await.expect("a list reads the row");
    assert_eq!(listed.len(), 3);
    let report = env.drain(common::drain_config()).await;
    assert_eq!(report.runs_finished, 3, "{report:?}");
    for id in [good, around, kept] {
        assert_eq!(state(&env, id).await, Some(TaskState::Succeeded), "task {id}");
    }
    let task = env.app.store.get_task(around).await.expect("get").expect("task");
    assert_eq!((task.data.as_str(), task.queued_by.as_deref()), ("{\"a\":\"\u{FFFD}\"}", Some("\u{FFFD}")));
    let task = env.app.store.get_task(kept).await.expect("get").expect("task");
    assert_eq!((task.data.as_str(), task.queue.as_str(), task.queued_by.as_deref()), (data, "médias", Some("ü")));
}

/// PostgreSQL, MariaDB and MySQL refuse text that is not UTF-8 themselves, before `taskhost_add`
/// runs: MariaDB and MySQL naming the argument, PostgreSQL the byte; nothing is added. (MariaDB
/// here; `make test` runs it again on MySQL.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_is_not_utf8_is_refused_in_sql_by_postgresql_mariadb_and_mysql_themselves() {
    for db in [Db::Postgres, Db::MySql] {
        let env = Env::on(db, &["echo"]).await;
        let calls: [(&[u8], &str); 2] = match db {
            Db::Postgres => [
                (
                    b"SELECT taskhost_add('echo', '{\"a\":\"\xff\"}');\n",
                    "invalid byte sequence for encoding \"UTF8\": 0xff",
                ),
                (b"SELECT taskhost_add('echo', '{}', queue => 'q\xc3');\n", "0xc3"),
            ],
            _ => [
                (b"CALL taskhost_add('echo', '{\"a\":\"\xff\"}', NULL);\n", "p_data"),
                (b"CALL taskhost_add('echo', '{}', '{\"queue\":\"q\xc3\"}');\n", "p_options"),
            ],
        };
        for (call, named) in calls {
            let o = shell_bytes(db, &env, call);
            let said = stderr(&o);
            assert!(!o.status.success(), "{db:?}: {} was taken", String::from_utf8_lossy(call));
            let told = if db == Db::Postgres {
                said.contains(named)
            } else {
                said.contains("Incorrect string value") && said.contains(named)
            };
            assert!(told, "{db:?}: {said}");
        }
        assert!(env.app.store.list_tasks(&Default::default()).await.expect("list").is_empty(), "{db:?}: nothing added");
    }
}

/// The walk reads each argument only as far as it may be long (0038): a queue too long is refused
/// for its length unwalked, however high the data's limit (0037 walked it up to the limit: seconds
/// for a long one under 4 MiB, holding the write lock), and data up to 1 KiB is walked however
/// low the limit's row was set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_utf8_walk_reads_each_argument_only_as_far_as_it_may_be_long_on_sqlite() {
    let env = Env::on(Db::Sqlite, &["echo"]).await;
    let said = |limit: u64, insert: &str| {
        let set = format!("UPDATE task_counters SET v = {limit} WHERE name = 'max_data_bytes'");
        let o = shell(Db::Sqlite, &env, &[&set, insert]);
        assert!(!o.status.success(), "{insert} was taken under a limit of {limit}");
        stderr(&o)
    };
    // 300 bytes, the first not UTF-8.
    let queue =
        "INSERT INTO taskhost_add (handler, queue) VALUES ('echo', CAST(X'FF' AS TEXT) || printf('%.*c', 299, 'q'))";
    let refused = said(4 << 20, queue);
    assert!(refused.contains("taskhost_add: invalid queue: empty, *, over 128 bytes"), "{refused}");
    let data = "INSERT INTO taskhost_add (handler, data) \
                VALUES ('echo', '\"' || CAST(X'FF' AS TEXT) || printf('%.*c', 297, 'x') || '\"')";
    for limit in [0, 255] {
        let refused = said(limit, data);
        assert!(refused.contains("taskhost_add: invalid data: not UTF-8 text"), "{limit}: {refused}");
    }
    assert!(env.app.store.list_tasks(&Default::default()).await.expect("list").is_empty(), "nothing was added");
}

/// Before 0040, `taskhost_add` on SQLite took a `run_at` of a day past its month's end or of the
/// hour 24 and wrote it as given, a time the host cannot read: every claim of its queue failed on
/// the task, and every list. The upgrade makes such a task due at the time SQLite reads it as (the
/// day moved on), and `taskhost_add` refuses such a time, naming it, as the other databases do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_at_of_a_day_that_does_not_exist_is_refused_and_one_written_before_is_read_on_sqlite() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("queue.db").display());
    common::migrated::migrate_before(&url, "sqlite", "0040").await;
    let mut conn = sqlx::SqliteConnection::connect(&url).await.expect("connect");
    for at in ["2030-02-30 00:00:00", "2030-01-01T24:00:00Z", "2030-05-01 10:00:00+02:00"] {
        let add = format!("INSERT INTO taskhost_add (handler, run_at) VALUES ('echo', '{at}')");
        sqlx::raw_sql(&add).execute(&mut conn).await.expect("0039 took it");
    }
    drop(conn);
    let store = taskhost::store::open(&url, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("migrate");
    let listed = store.list_tasks(&Default::default()).await.expect("a list reads every task");
    let mut due: Vec<String> = listed.iter().map(|t| t.scheduled_on.to_rfc3339()).collect();
    due.sort();
    assert_eq!(due, ["2030-01-02T00:00:00+00:00", "2030-03-02T00:00:00+00:00", "2030-05-01T08:00:00+00:00"]);

    let env = Env::on(Db::Sqlite, &["echo"]).await;
    for at in ["2030-02-30 00:00:00", "2030-04-31T10:00:00Z", "2030-01-01 24:00:00", "0000-06-01 00:00:00"] {
        let o =
            shell(Db::Sqlite, &env, &[&format!("INSERT INTO taskhost_add (handler, run_at) VALUES ('echo', '{at}')")]);
        assert!(!o.status.success(), "{at} was taken");
        let said = stderr(&o);
        assert!(said.contains("taskhost_add: invalid run_at: not a time"), "{at}: {said}");
    }
    assert!(env.app.store.list_tasks(&Default::default()).await.expect("list").is_empty(), "nothing was added");
    let leap = add_in_shell(Db::Sqlite, &env, "echo", "{}", json!({"run_at": "2028-02-29 23:59:59"}), true);
    let task = env.app.store.get_task(leap).await.expect("get").expect("the task");
    assert_eq!(task.scheduled_on.to_rfc3339(), "2028-02-29T23:59:59+00:00");
}
