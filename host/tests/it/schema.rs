//! One schema on three databases: each live database's catalog (columns with their types,
//! nullability and defaults, indexes with their columns, uniqueness and filters, foreign keys),
//! read after migrating, is exactly what `taskhost::store::schema` describes. A migration that
//! drifts on any database fails here, naming what differs.

use crate::common;

use std::collections::BTreeSet;

use common::Env;
use sqlx::{Connection, Row};
use taskhost::store::schema::{Kind, OnMySql, INDEXES, TABLES};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Db {
    Sqlite,
    Postgres,
    MySql,
}

/// One fact of a catalog, as a line: `column T.C TYPE null|not-null [default D]`,
/// `index T NAME (C, ...) [unique] [where F]` or `foreign-key T.C -> T2.C2`.
type Facts = BTreeSet<String>;

fn column(table: &str, name: &str, ty: &str, nullable: bool, default: Option<&str>) -> String {
    let null = if nullable { "null" } else { "not-null" };
    match default {
        Some(d) => format!("column {table}.{name} {ty} {null} default {d}"),
        None => format!("column {table}.{name} {ty} {null}"),
    }
}

fn index(table: &str, name: &str, columns: &[&str], unique: bool, filter: Option<&str>) -> String {
    let unique = if unique { " unique" } else { "" };
    let filter = filter.map(|f| format!(" where {}", normal_filter(f))).unwrap_or_default();
    format!("index {table} {name} ({}){unique}{filter}", columns.join(", "))
}

/// A partial index's condition in one spelling: PostgreSQL deparses `IN (...)` as
/// `= ANY (ARRAY[...])` and adds casts and parentheses.
fn normal_filter(f: &str) -> String {
    let f = f.replace("::text", "").replace("= ANY (ARRAY[", "IN (").replace("])", ")");
    f.replace(['(', ')'], "").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A default in one spelling: no quotes, no casts; auto-increment ids have none.
fn normal_default(d: Option<String>) -> Option<String> {
    let d = d?;
    let d = d.split("::").next().unwrap_or("").trim().trim_matches('\'').to_string();
    (!d.is_empty() && d != "NULL" && !d.starts_with("nextval(")).then_some(d)
}

fn type_of(db: Db, kind: Kind) -> String {
    match (db, kind) {
        (Db::Postgres, Kind::Id | Kind::Int) | (Db::MySql, Kind::Id | Kind::Int) => "bigint".into(),
        (Db::Postgres, Kind::Time) => "timestamp with time zone".into(),
        (Db::Postgres, Kind::Str(_) | Kind::Text) => "text".into(),
        (Db::Sqlite, Kind::Id | Kind::Int) => "INTEGER".into(),
        (Db::Postgres, Kind::Bytes) => "bytea".into(),
        (Db::Sqlite, Kind::Bytes) => "BLOB".into(),
        (Db::Sqlite, _) => "TEXT".into(),
        (Db::MySql, Kind::Time) => "datetime(6)".into(),
        (Db::MySql, Kind::Str(n)) => format!("varchar({n})"),
        (Db::MySql, Kind::Text) => "longtext".into(),
        (Db::MySql, Kind::Bytes) => "longblob".into(),
    }
}

/// What the description says the catalog of `db` holds.
fn described(db: Db) -> Facts {
    let mut facts = Facts::new();
    for t in TABLES {
        for c in t.columns {
            let ty = type_of(db, c.kind);
            facts.insert(column(t.name, c.name, &ty, c.nullable, c.default));
        }
    }
    for i in INDEXES {
        match (db, i.mysql) {
            (Db::MySql, OnMySql::Same) => facts.insert(index(i.table, i.name, i.columns, i.unique, None)),
            (Db::MySql, OnMySql::Columns(columns)) => facts.insert(index(i.table, i.name, columns, i.unique, None)),
            (Db::MySql, OnMySql::Generated { column: generated, kind, then, .. }) => {
                facts.insert(column(i.table, generated, &format!("{} generated", type_of(db, kind)), true, None));
                let columns: Vec<&str> = std::iter::once(generated).chain(then.iter().copied()).collect();
                facts.insert(index(i.table, i.name, &columns, i.unique, None))
            }
            // Served by another index of the description, checked there.
            (Db::MySql, OnMySql::Covered(_)) => true,
            _ => facts.insert(index(i.table, i.name, i.columns, i.unique, i.filter)),
        };
    }
    // No foreign keys: migrations 0012 dropped the last one (a run's task), whose check cost more than the insert.
    facts
}

/// Every line of `want` not in `got` and the other way round, or nothing.
fn differences(want: &Facts, got: &Facts) -> Vec<String> {
    let missing = want.difference(got).map(|f| format!("missing:    {f}"));
    let unexpected = got.difference(want).map(|f| format!("unexpected: {f}"));
    missing.chain(unexpected).collect()
}

fn check(db: Db, live: &Facts) {
    let diff = differences(&described(db), live);
    assert!(diff.is_empty(), "the {db:?} schema differs from store::schema:\n{}", diff.join("\n"));
}

/// Foreign-key facts from rows of `t`, `c` (the column), `rt`, `rc` (the column it references).
fn foreign_keys<R: Row>(rows: &[R]) -> Vec<String>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'a> &'a str: sqlx::ColumnIndex<R>,
{
    rows.iter()
        .map(|r| {
            let (t, c, rt, rc): (String, String, String, String) = (r.get("t"), r.get("c"), r.get("rt"), r.get("rc"));
            format!("foreign-key {t}.{c} -> {rt}.{rc}")
        })
        .collect()
}

async fn sqlite_catalog(url: &str) -> Facts {
    let mut conn = sqlx::SqliteConnection::connect(url).await.expect("connect");
    let mut facts = Facts::new();
    let rows = sqlx::query(
        "SELECT m.name AS t, p.name AS c, p.type AS ty, p.\"notnull\" AS nn, p.dflt_value AS d, p.pk AS pk
         FROM sqlite_master m, pragma_table_info(m.name) p
         WHERE m.type = 'table' AND m.name LIKE 'task\\_%' ESCAPE '\\'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("columns");
    for r in rows {
        let (t, c, ty): (String, String, String) = (r.get("t"), r.get("c"), r.get("ty"));
        let pk: i64 = r.get("pk");
        let nullable = r.get::<i64, _>("nn") == 0 && pk == 0;
        facts.insert(column(&t, &c, &ty, nullable, normal_default(r.get("d")).as_deref()));
    }
    let rows = sqlx::query(
        "SELECT m.tbl_name AS t, m.name AS i, m.sql AS sql, l.\"unique\" AS u, l.origin AS o,
                (SELECT group_concat(name, ', ') FROM (SELECT name FROM pragma_index_info(m.name) ORDER BY seqno)) AS cols
         FROM sqlite_master m JOIN pragma_index_list(m.tbl_name) l ON l.name = m.name
         WHERE m.type = 'index' AND m.tbl_name LIKE 'task\\_%' ESCAPE '\\'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for r in rows {
        if r.get::<String, _>("o") == "pk" {
            continue;
        }
        let (t, i, cols): (String, String, String) = (r.get("t"), r.get("i"), r.get("cols"));
        let sql: Option<String> = r.get("sql");
        let filter = sql.as_deref().and_then(|s| s.split_once(" WHERE ")).map(|(_, f)| f.to_string());
        let cols: Vec<&str> = cols.split(", ").collect();
        facts.insert(index(&t, &i, &cols, r.get::<i64, _>("u") == 1, filter.as_deref()));
    }
    let rows = sqlx::query(
        "SELECT m.name AS t, f.\"from\" AS c, f.\"table\" AS rt, f.\"to\" AS rc
         FROM sqlite_master m, pragma_foreign_key_list(m.name) f WHERE m.type = 'table'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("foreign keys");
    facts.extend(foreign_keys(&rows));
    facts
}

async fn postgres_catalog(url: &str) -> Facts {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let mut facts = Facts::new();
    let rows = sqlx::query(
        "SELECT table_name::text AS t, column_name::text AS c, data_type::text AS ty, is_nullable::text AS n,
                column_default::text AS d
         FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name LIKE 'task\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("columns");
    for r in rows {
        let (t, c, ty, n): (String, String, String, String) = (r.get("t"), r.get("c"), r.get("ty"), r.get("n"));
        facts.insert(column(&t, &c, &ty, n == "YES", normal_default(r.get("d")).as_deref()));
    }
    let rows = sqlx::query(
        "SELECT c.relname::text AS t, i.relname::text AS i, x.indisunique AS u,
                array_to_string(array(SELECT pg_get_indexdef(x.indexrelid, k, true)
                                      FROM generate_series(1, x.indnatts) k ORDER BY k), ', ') AS cols,
                pg_get_expr(x.indpred, x.indrelid, true) AS f
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
         WHERE c.relnamespace = current_schema()::regnamespace AND NOT x.indisprimary
           AND c.relname LIKE 'task\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for r in rows {
        let (t, i, cols): (String, String, String) = (r.get("t"), r.get("i"), r.get("cols"));
        let f: Option<String> = r.get("f");
        let cols: Vec<&str> = cols.split(", ").collect();
        facts.insert(index(&t, &i, &cols, r.get("u"), f.as_deref()));
    }
    let rows = sqlx::query(
        "SELECT k.conrelid::regclass::text AS t, a.attname::text AS c, k.confrelid::regclass::text AS rt,
                af.attname::text AS rc
         FROM pg_constraint k
         JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
         JOIN pg_attribute af ON af.attrelid = k.confrelid AND af.attnum = k.confkey[1]
         WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace",
    )
    .fetch_all(&mut conn)
    .await
    .expect("foreign keys");
    facts.extend(foreign_keys(&rows));
    facts
}

async fn mysql_catalog(url: &str) -> Facts {
    let mut conn = sqlx::MySqlConnection::connect(url).await.expect("connect");
    let mut facts = Facts::new();
    let rows = sqlx::query(
        "SELECT CAST(TABLE_NAME AS CHAR) AS t, CAST(COLUMN_NAME AS CHAR) AS c, CAST(DATA_TYPE AS CHAR) AS ty,
                CAST(CHARACTER_MAXIMUM_LENGTH AS CHAR) AS len, CAST(DATETIME_PRECISION AS CHAR) AS prec,
                CAST(IS_NULLABLE AS CHAR) AS n, CAST(COLUMN_DEFAULT AS CHAR) AS d, CAST(EXTRA AS CHAR) AS x
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = database() AND TABLE_NAME LIKE 'task\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("columns");
    for r in rows {
        let (t, c, ty, n, x): (String, String, String, String, String) =
            (r.get("t"), r.get("c"), r.get("ty"), r.get("n"), r.get("x"));
        let (len, prec): (Option<String>, Option<String>) = (r.get("len"), r.get("prec"));
        let mut ty = match ty.as_str() {
            "varchar" => format!("varchar({})", len.unwrap_or_default()),
            "datetime" => format!("datetime({})", prec.unwrap_or_default()),
            _ => ty,
        };
        if x.contains("GENERATED") {
            ty.push_str(" generated");
        }
        facts.insert(column(&t, &c, &ty, n == "YES", normal_default(r.get("d")).as_deref()));
    }
    let rows = sqlx::query(
        "SELECT CAST(TABLE_NAME AS CHAR) AS t, CAST(INDEX_NAME AS CHAR) AS i, MIN(NON_UNIQUE) = 0 AS u,
                CAST(GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX SEPARATOR ', ') AS CHAR) AS cols
         FROM information_schema.STATISTICS
         WHERE TABLE_SCHEMA = database() AND TABLE_NAME LIKE 'task\\_%' AND INDEX_NAME <> 'PRIMARY'
         GROUP BY TABLE_NAME, INDEX_NAME",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for r in rows {
        let (t, i, cols): (String, String, String) = (r.get("t"), r.get("i"), r.get("cols"));
        let cols: Vec<&str> = cols.split(", ").collect();
        facts.insert(index(&t, &i, &cols, r.get::<i64, _>("u") == 1, None));
    }
    let rows = sqlx::query(
        "SELECT CAST(TABLE_NAME AS CHAR) AS t, CAST(COLUMN_NAME AS CHAR) AS c,
                CAST(REFERENCED_TABLE_NAME AS CHAR) AS rt, CAST(REFERENCED_COLUMN_NAME AS CHAR) AS rc
         FROM information_schema.KEY_COLUMN_USAGE
         WHERE TABLE_SCHEMA = database() AND REFERENCED_TABLE_NAME IS NOT NULL",
    )
    .fetch_all(&mut conn)
    .await
    .expect("foreign keys");
    facts.extend(foreign_keys(&rows));
    facts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_schema_is_the_one_described() {
    let env = Env::new(&[]).await;
    check(Db::Sqlite, &sqlite_catalog(&env.db_url).await);
}

/// SQLite checks a status by comparisons (migrations 0047 and 0048: it builds a CHECK's list of
/// more than two constants into a temporary index at each write of the column): a task's, a run's
/// and a worker's. Each still takes every status it took and refuses one that is none of them, and
/// a write of one compiles without a temporary table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_checks_each_status_without_a_list_and_still_refuses_an_unknown_one() {
    let env = Env::new(&[]).await;
    let mut conn = sqlx::SqliteConnection::connect(&env.db_url).await.expect("connect");
    let t = "'2030-01-01 00:00:00.000000000'";
    let tables: [(&str, &str, String, &[&str]); 3] = [
        (
            "task_queue",
            "last_status",
            format!(
                "(queued_on, scheduled_on, task_handler_class, task_data, last_status) VALUES ({t}, {t}, 'h', '{{}}', "
            ),
            &["scheduled", "running", "success", "error", "timeout", "cancelled", "waiting"],
        ),
        (
            "task_runs",
            "status",
            format!("(task_queue_id, attempt, created_on, status) VALUES (1, 1, {t}, "),
            &["scheduled", "running", "success", "error", "timeout", "cancelled", "snoozed"],
        ),
        (
            "task_runners",
            "status",
            format!("(process_id, host_name, started_on, heartbeat_on, status) VALUES (1, 'h', {t}, {t}, "),
            &["running", "success", "timeout"],
        ),
    ];
    for (table, column, values, statuses) in tables {
        let text: String = sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?")
            .bind(table)
            .fetch_one(&mut conn)
            .await
            .expect("the table's text");
        let last = statuses.last().expect("a status");
        assert!(text.contains(&format!("{column} = '{last}'")) && !text.contains(&format!("{column} IN")), "{text}");
        let insert = |status: &str| format!("INSERT INTO {table} {values}'{status}')");
        let ops: Vec<String> = sqlx::query(&format!("EXPLAIN {}", insert(last)))
            .fetch_all(&mut conn)
            .await
            .expect("explain")
            .iter()
            .map(|row| row.get::<String, _>("opcode"))
            .collect();
        assert!(ops.iter().any(|op| op == "Insert"), "{table}: {ops:?}");
        assert!(!ops.iter().any(|op| op == "OpenEphemeral"), "{table}: a temporary table: {ops:?}");
        for status in statuses {
            sqlx::query(&insert(status)).execute(&mut conn).await.expect(status);
        }
        let refused = sqlx::query(&insert("done")).execute(&mut conn).await.expect_err("an unknown status");
        assert!(refused.to_string().contains("CHECK constraint failed"), "{table}: {refused}");
    }
    // The tables' text was edited in place (`writable_schema`): the file is whole.
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await.expect("check");
    assert_eq!(integrity, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_schema_is_the_one_described() {
    let env = Env::postgres(&[]).await;
    check(Db::Postgres, &postgres_catalog(&env.db_url).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mysql_schema_is_the_one_described() {
    let env = Env::mysql(&[]).await;
    check(Db::MySql, &mysql_catalog(&env.db_url).await);
}

/// A database opened without migrating and without the tables is one clear error on each
/// database; `migrate` then says what it applied, and the second time that nothing was left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_reported_and_missing_tables_are_one_clear_error() {
    use taskhost::store::{self, StoreOptions};
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = format!("sqlite://{}", dir.path().join("queue.db").display());
    let (pg, my) = (common::postgres_scratch().await, common::mysql_scratch().await);
    let (sqlite_last, pg_last, my_last) =
        (last_migration("sqlite"), last_migration("postgres"), last_migration("mysql"));
    for (url, last) in [(sqlite.as_str(), &sqlite_last), (&*pg, &pg_last), (&*my, &my_last)] {
        let options = StoreOptions { migrate: false, ..StoreOptions::default() };
        let store = store::open(url, &options).await.expect("open");
        let err = store.check_migrated().await.expect_err("no tables yet");
        assert!(matches!(err, taskhost::Error::NotMigrated), "{url}: {err}");
        let applied = store.migrate().await.expect("migrate");
        assert_eq!(applied.first().map(String::as_str), Some("0001 tables"), "{url}");
        assert_eq!(applied.last(), Some(last), "{url}");
        store.check_migrated().await.expect("the tables exist now");
        assert_eq!(store.migrate().await.expect("again"), Vec::<String>::new(), "{url}: nothing left");
    }
}

/// How `migrate` names the last migration of `migrations/{dir}/`: `0025_rate_per_key.sql` is
/// "0025 rate per key".
fn last_migration(dir: &str) -> String {
    let files = std::fs::read_dir(common::repo_root().join("migrations").join(dir)).expect("the migrations");
    let names = files.filter_map(|f| f.ok()?.file_name().into_string().ok()).filter(|n| n.ends_with(".sql"));
    names.max().expect("a migration").trim_end_matches(".sql").replace('_', " ")
}

#[test]
fn a_drifted_catalog_is_reported_line_by_line() {
    let want = described(Db::Postgres);
    let mut got = want.clone();
    let line = column("task_runs", "error_code", "text", true, None);
    assert!(got.remove(&line), "the description has {line}");
    got.insert(column("task_runs", "error_code", "character varying", true, None));
    let diff = differences(&want, &got);
    assert_eq!(diff.len(), 2, "{diff:?}");
    assert!(diff[0].starts_with("missing:") && diff[1].starts_with("unexpected:"), "{diff:?}");
}

/// Versions before `runs made by claims` kept a scheduled run for each retry, and those before
/// `running run on its task` kept a running run in `task_runs`. An upgrade from before both
/// drops the scheduled run, so its task is claimed as its next attempt, and moves the running
/// run onto its task, where its worker (knowing only its id) still finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_keeps_every_run_and_its_numbering_and_a_running_run_still_finishes() {
    use taskhost::model::{RunEnd, RunOutcome, RunStatus};
    use taskhost::store::{self, StoreOptions};
    const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);
    let t0 = chrono::Utc::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = format!("sqlite://{}?mode=rwc", dir.path().join("queue.db").display());
    let (pg, my) = (common::postgres_scratch().await, common::mysql_scratch().await);
    for (url, folder, before) in
        [(sqlite.as_str(), "sqlite", "0013"), (&*pg, "postgres", "0013"), (&*my, "mysql", "0014")]
    {
        common::migrated::migrate_before(url, folder, before).await;
        // As the old versions left them: task 1 failed once, its retry a scheduled run; task 2
        // running its first run (id 3), 40 % done.
        let at = "'2026-01-01 00:00:00.000000'";
        let mut old_state = vec![
            format!("INSERT INTO task_runners (id, process_id, host_name, started_on, heartbeat_on) VALUES (7, 1, 'old', {at}, {at})"),
            format!("INSERT INTO task_queue (id, queued_on, scheduled_on, task_handler_class, task_data, last_status, task_runs_failed) VALUES (1, {at}, {at}, 'h', '{{}}', 'scheduled', 1)"),
            format!("INSERT INTO task_runs (id, task_queue_id, attempt, created_on, started_on, finished_on, status, task_runner_id) VALUES (1, 1, 1, {at}, {at}, {at}, 'error', 7)"),
            format!("INSERT INTO task_runs (id, task_queue_id, attempt, created_on, status) VALUES (2, 1, 2, {at}, 'scheduled')"),
            format!("INSERT INTO task_queue (id, queued_on, scheduled_on, task_handler_class, task_data, last_status) VALUES (2, {at}, {at}, 'h', '{{}}', 'running')"),
            format!("INSERT INTO task_runs (id, task_queue_id, attempt, created_on, started_on, status, task_runner_id, timeout_on, percents_completed) VALUES (3, 2, 1, {at}, {at}, 'running', 7, '2100-01-01 00:00:00.000000', 40)"),
        ];
        if folder == "postgres" {
            // Ids given by hand do not move the sequences, as those the old versions took did.
            old_state.push("SELECT setval('task_runs_id_seq', 3), setval('task_queue_id_seq', 2)".into());
        }
        for sql in &old_state {
            match folder {
                "sqlite" => sqlx::query(sql)
                    .execute(&mut sqlx::SqliteConnection::connect(url).await.expect("c"))
                    .await
                    .map(|_| ()),
                "postgres" => {
                    sqlx::query(sql).execute(&mut sqlx::PgConnection::connect(url).await.expect("c")).await.map(|_| ())
                }
                _ => sqlx::query(sql)
                    .execute(&mut sqlx::MySqlConnection::connect(url).await.expect("c"))
                    .await
                    .map(|_| ()),
            }
            .unwrap_or_else(|e| panic!("{url}: the old state: {sql}: {e}"));
        }
        let store = store::open(url, &StoreOptions::default()).await.expect("open and migrate");
        let of = |runs: &[taskhost::model::Run]| runs.iter().map(|r| (r.id, r.attempt, r.status)).collect::<Vec<_>>();
        assert_eq!(of(&store.runs_of(1).await.expect("runs")), [(1, 1, RunStatus::Error)], "{url}");
        let running = store.runs_of(2).await.expect("runs");
        assert_eq!(of(&running), [(3, 1, RunStatus::Running)], "{url}");
        assert_eq!((running[0].percents_completed, running[0].runner_id), (40, Some(7)), "{url}");
        // The old worker's success, by run id.
        let ok = RunOutcome {
            run_id: 3,
            task_id: 2,
            end: RunEnd::Success { results: Some("[1]".into()), children: Default::default() },
            percents_completed: None,
            finished_on: t0,
            duration_ms: 5,
            component_digest: None,
            fuel_used: None,
            logs: None,
            fuel_key: None,
            delete_on_success: false,
        };
        store.finish_runs(&[ok]).await.expect("finish");
        let done = store.runs_of(2).await.expect("runs");
        assert_eq!(of(&done), [(3, 1, RunStatus::Success)], "{url}");
        assert_eq!(done[0].results.as_deref(), Some("[1]"), "{url}");
        let r = store.register_runner(2, "new", t0, 10).await.expect("runner");
        let c = store.claim(r, &["default".into()], 1, t0 + chrono::Duration::seconds(1), DAY).await.expect("claim");
        assert_eq!(c.iter().map(|c| (c.task_id, c.attempt)).collect::<Vec<_>>(), [(1, 2)], "{url}");
        assert!(c[0].run_id > 3, "{url}: a new run id, past the old ones: {}", c[0].run_id);
        let runs = store.runs_of(1).await.expect("runs");
        assert_eq!(of(&runs), [(1, 1, RunStatus::Error), (c[0].run_id, 2, RunStatus::Running)], "{url}");
    }
}
