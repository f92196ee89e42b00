//! What an upgrade that makes `taskhost_add` again keeps (docs/clients.md): the grants an
//! operator made on it, on PostgreSQL and on MariaDB; and on MariaDB, where a call without options
//! is written by a short path of its own (0032), the same row as every other call writes.

use crate::common;
use crate::sql_add_mysql::procedure_calls;

use sqlx::{Column, Connection, Row};

/// Making `taskhost_add` again for new options (0031) keeps the grants an operator made on it:
/// a role granted it may still call it, and PUBLIC, from which it was revoked, does not get the
/// default grant back (no ACL is the default's: PUBLIC may call it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_keeps_the_grants_made_on_taskhost_add_on_postgres() {
    use sqlx::{Connection, Row};
    let pg = common::postgres_scratch().await;
    common::migrated::migrate_before(&pg, "postgres", "0031").await;
    let role = format!("taskhost app {:08x}", rand::random::<u32>());
    let old = "taskhost_add(text, text, text, integer, timestamptz, text, integer, text, bigint[], boolean, text)";
    let mut conn = sqlx::PgConnection::connect(&pg).await.expect("connect");
    for sql in [
        format!("CREATE ROLE \"{role}\""),
        format!("REVOKE ALL ON FUNCTION {old} FROM PUBLIC"),
        format!("GRANT EXECUTE ON FUNCTION {old} TO \"{role}\""),
    ] {
        sqlx::raw_sql(&sql).execute(&mut conn).await.expect(&sql);
    }
    let store = taskhost::store::open(&pg, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("0031");
    let new = "taskhost_add(text, text, text, integer, timestamptz, text, integer, text, bigint[], boolean, text, \
               interval, text, interval, text)";
    let may = format!("SELECT has_function_privilege('{role}', '{new}', 'EXECUTE') AS may");
    let granted = sqlx::query(&may).fetch_one(&mut conn).await.expect("read");
    let public = sqlx::query(&format!(
        "SELECT count(*) AS n FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a \
         WHERE p.oid = '{new}'::regprocedure \
         AND a.grantee = 0"
    ))
    .fetch_one(&mut conn)
    .await
    .expect("read");
    // And the function through which its `after` finds a task its success deleted (0043).
    let may_find = format!(
        "SELECT has_function_privilege('{role}', 'taskhost_ended(bigint)', 'EXECUTE') AS may, \
         (SELECT count(*) FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a \
          WHERE p.oid = 'taskhost_ended(bigint)'::regprocedure AND a.grantee = 0) AS public"
    );
    let found = sqlx::query(&may_find).fetch_one(&mut conn).await.expect("read");
    // (Its grants go with it: on each function granted it, those of 0043 and 0044 too.)
    let drop = format!("DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\"");
    sqlx::raw_sql(&drop).execute(&mut conn).await.expect("drop the role");
    assert!(granted.get::<bool, _>("may"), "the role's grant was lost");
    assert!(found.get::<bool, _>("may"), "the role may not call taskhost_ended");
    assert_eq!(found.get::<i64, _>("public"), 0, "PUBLIC may call taskhost_ended, as it may not taskhost_add");
    assert_eq!(public.get::<i64, _>("n"), 0, "PUBLIC may call it again");
}

/// Making `taskhost_add` again (0032, its short path for common calls) keeps a `GRANT EXECUTE`
/// made on it on MariaDB, where a DROP would take it along; and an application's user granted only
/// it may call it with options the short path does not take, which it hands to
/// `taskhost_add_checked` (a procedure runs with its definer's rights).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_keeps_the_grants_made_on_taskhost_add_on_mariadb() {
    let my = common::mysql_scratch().await;
    common::migrated::migrate_before(&my, "mysql", "0032").await;
    let (server, db) = my.url.rsplit_once('/').expect("URL has a database");
    let user = format!("app_{:08x}", rand::random::<u32>());
    let mut admin = sqlx::MySqlConnection::connect(&my).await.expect("connect");
    for sql in [
        format!("CREATE USER '{user}'@'127.0.0.1'"),
        format!("GRANT EXECUTE ON PROCEDURE {db}.taskhost_add TO '{user}'@'127.0.0.1'"),
    ] {
        sqlx::raw_sql(&sql).execute(&mut admin).await.expect(&sql);
    }
    let store = taskhost::store::open(&my, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("0032");

    let app_url = format!("{}/", server.replacen("taskhost@", &format!("{user}@"), 1));
    let mut app = sqlx::MySqlConnection::connect(&app_url).await.expect("the application's user connects");
    let mut ids = Vec::new();
    // The second call's JSON null is an option the short path does not take: it is handed on.
    for options in ["NULL", r#"'{"queue": "mail", "key": null}'"#] {
        let call = format!(r#"CALL {db}.taskhost_add('echo', '{{"n": 1}}', {options})"#);
        let answered = sqlx::raw_sql(&call).fetch_all(&mut app).await;
        let id: i64 = answered.as_ref().map(|rows| rows[0].get(0)).unwrap_or_else(|e| panic!("{call}: {e}"));
        ids.push(id);
    }
    app.close().await.expect("close");
    let queues: Vec<String> = sqlx::query("SELECT queue FROM task_queue ORDER BY id")
        .fetch_all(&mut admin)
        .await
        .expect("read")
        .iter()
        .map(|r| String::from_utf8_lossy(&r.get::<Vec<u8>, _>(0)).into_owned())
        .collect();
    sqlx::raw_sql(&format!("DROP USER '{user}'@'127.0.0.1'")).execute(&mut admin).await.expect("drop the user");
    assert_eq!(queues, ["default", "mail"], "tasks {ids:?}");
}

/// A call `taskhost_add`'s short paths take (no options; only a queue and a priority, with a time to
/// run at, a key or a number of attempts or not; plain ones, a key and a unique key among them; a
/// time to run at in any zone, a unique period and states) writes the row the whole procedure
/// writes for the same call, made to take it by a JSON null (the default) beside: every column
/// alike but the id and the times, a time to run at the same, a unique period as long; answers
/// the same (one row, `id`); and calls no other procedure (the server's count of calls), where the
/// whole procedure is a second.
/// What they must not take (an option named in another case or with a JSON escape, a fraction, a
/// queue of 150 bytes in 50 Kelvin signs, a handler's long s, a day no calendar has) is refused by
/// name; a priority written 1e3 is 1000 on MariaDB, not an error naming no option, and refused by
/// name on MySQL, whose JSON reads it as a double (as the API refuses it). On MySQL, whose JSON
/// reads a name's escapes, `"\u0071ueue"` is `queue` (MariaDB refuses it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_short_path_takes_writes_the_row_the_whole_procedure_writes_on_mysql() {
    let my = common::mysql_scratch().await;
    let mariadb = common::migrated::is_mariadb(&my).await;
    let store = taskhost::store::open(&my, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("migrate");
    let mut conn = sqlx::MySqlConnection::connect(&my).await.expect("connect");
    let plain = r#""queue": "mail.out", "priority": -5, "max_attempts": 3, "run_timeout": 60, "queued_by": "shop""#;
    let pairs = [
        ("NULL".to_string(), "'{}'".to_string()),
        // Only a queue and a priority, or either, or none (0049).
        (r#"'{"queue": "mail.out", "priority": -5}'"#.to_string(), r#"'{"queue": "mail.out", "priority": -5, "key": null}'"#.to_string()),
        (r#"'{"priority": 2147483647}'"#.to_string(), r#"'{"priority": 2147483647, "after": null}'"#.to_string()),
        (r#"'{"queue": "é-mail-è"}'"#.to_string(), r#"'{"queue": "é-mail-è", "after": null}'"#.to_string()),
        ("'{}'".to_string(), r#"'{"queue": null, "priority": null}'"#.to_string()),
        // A name given twice: MariaDB's JSON_REMOVE takes one, and the call goes on; MySQL keeps the
        // last value. Either way the row is the whole procedure's.
        (r#"'{"queue": "a", "queue": "b", "priority": 1}'"#.to_string(), r#"'{"queue": "a", "queue": "b", "priority": 1, "key": null}'"#.to_string()),
        (format!("'{{{plain}}}'"), format!(r#"'{{{plain}, "key": null}}'"#)),
        // A key and a unique key (0037): the task written waiting for the intake, holding its
        // unique key (N: the call's number, a key of its own).
        (
            format!(r#"'{{{plain}, "key": "tenant-1", "unique_key": "u-N"}}'"#),
            format!(r#"'{{{plain}, "key": "tenant-1", "unique_key": "u-N", "run_at": null}}'"#),
        ),
        // A time to run at, a unique period and states (0038). A keyed task due later is
        // scheduled at once; due already, it waits for the intake.
        (
            format!(r#"'{{{plain}, "key": "tenant-1", "run_at": "2030-01-01T10:00:00.25-02:30"}}'"#),
            format!(r#"'{{{plain}, "key": "tenant-1", "run_at": "2030-01-01T10:00:00.25-02:30", "after": null}}'"#),
        ),
        (
            r#"'{"key": "tenant-1", "run_at": "2020-02-29 23:59:59Z"}'"#.to_string(),
            r#"'{"key": "tenant-1", "run_at": "2020-02-29 23:59:59Z", "version": null}'"#.to_string(),
        ),
        (
            r#"'{"run_at": "2030-06-01 00:00:00+05:45", "unique_key": "u-N", "unique_for": 60, "unique_states": "succeeded"}'"#
                .to_string(),
            r#"'{"run_at": "2030-06-01 00:00:00+05:45", "unique_key": "u-N", "unique_for": 60, "unique_states": "succeeded", "run_anyway": null}'"#
                .to_string(),
        ),
        (
            r#"'{"unique_key": "u-N", "unique_states": "unfinished"}'"#.to_string(),
            r#"'{"unique_key": "u-N", "unique_states": "unfinished", "after": null}'"#.to_string(),
        ),
        // A time to run at alone or with a queue and a priority, in any zone (0050).
        (
            r#"'{"run_at": "2031-06-01T00:00:00.123456+05:45"}'"#.to_string(),
            r#"'{"run_at": "2031-06-01T00:00:00.123456+05:45", "after": null}'"#.to_string(),
        ),
        (
            r#"'{"run_at": "2024-02-29 23:59:59Z", "queue": "mail.out", "priority": -5}'"#.to_string(),
            r#"'{"run_at": "2024-02-29 23:59:59Z", "queue": "mail.out", "priority": -5, "key": null}'"#.to_string(),
        ),
        (
            r#"'{"priority": 3, "run_at": "2032-01-01 10:00:00"}'"#.to_string(),
            r#"'{"priority": 3, "run_at": "2032-01-01 10:00:00", "version": null}'"#.to_string(),
        ),
        // A key or a number of attempts, with a time or not (0050): a keyed task due already waits
        // for the intake.
        (r#"'{"key": "tenant-1", "max_attempts": 3}'"#.to_string(), r#"'{"key": "tenant-1", "max_attempts": 3, "after": null}'"#.to_string()),
        (
            r#"'{"max_attempts": 1, "queue": "mail.out", "key": "tenant-1", "run_at": "2034-04-04 04:04:04Z"}'"#.to_string(),
            r#"'{"max_attempts": 1, "queue": "mail.out", "key": "tenant-1", "run_at": "2034-04-04 04:04:04Z", "version": null}'"#
                .to_string(),
        ),
        // A zone's Z in either case, as the whole procedure reads it.
        (
            r#"'{"run_at": "2030-01-01 10:00:00.25z", "key": "tenant-1", "queue": "mail.out"}'"#.to_string(),
            r#"'{"run_at": "2030-01-01 10:00:00.25z", "key": "tenant-1", "queue": "mail.out", "after": null}'"#.to_string(),
        ),
    ];
    let columns: Vec<String> = sqlx::query(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME = 'task_queue' AND COLUMN_NAME NOT IN ('id', 'queued_on')",
    )
    .fetch_all(&mut conn)
    .await
    .expect("columns")
    .iter()
    .map(|r| r.get(0))
    .collect();
    assert!(columns.len() > 30, "{columns:?}");
    // (The unique key as the call's number shows in the two columns that hold it; the times as
    // they stand to the add's.)
    let listed = columns
        .iter()
        .map(|c| match c.as_str() {
            "unique_key" | "active_unique_key" => format!("LEFT(`{c}`, 2)"),
            "scheduled_on" => "IF(scheduled_on = queued_on, 'at once', scheduled_on)".to_string(),
            "unique_until" => "COALESCE(TIMESTAMPDIFF(MICROSECOND, queued_on, unique_until), '<null>')".to_string(),
            _ => format!("COALESCE(`{c}`, '<null>')"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    for (short, whole) in &pairs {
        sqlx::raw_sql("DELETE FROM task_queue").execute(&mut conn).await.expect("empty the table");
        for (n, options) in [short, whole, short].into_iter().enumerate() {
            let options = options.replace("u-N", &format!("u-{n}"));
            let call = format!(r#"CALL taskhost_add('echo', '{{"n": 1}}', {options})"#);
            let before = procedure_calls(&mut conn).await;
            let answer = sqlx::raw_sql(&call).fetch_all(&mut conn).await.expect(&call);
            // One row, one signed BIGINT `id`: the task's (MariaDB's short paths answer from their
            // INSERT, 0051).
            let newest: i64 =
                sqlx::query_scalar("SELECT MAX(id) FROM task_queue").fetch_one(&mut conn).await.expect("read");
            let answered = answer.iter().map(|r| (r.columns().len(), r.column(0).name().to_string(), r.get(0)));
            assert_eq!(answered.collect::<Vec<(usize, String, i64)>>(), [(1, "id".to_string(), newest)], "{call}");
            // A short path calls no other procedure; a JSON null is the whole procedure's, and so
            // is a queue beginning past ASCII (it judges white space) and, on MariaDB, a name
            // given twice (its JSON_REMOVE takes one of them).
            let made = procedure_calls(&mut conn).await - before;
            let twice = options.contains(r#""queue": "a", "queue": "b""#);
            let handed_on = options.contains("null") || options.contains('é') || (mariadb && twice);
            if n != 1 || handed_on {
                assert_eq!(made, if handed_on { 2 } else { 1 }, "procedures called by {call}");
            }
        }
        let read = format!(
            "SELECT COUNT(*) AS n, COUNT(DISTINCT CONCAT_WS('|', {listed})) AS kinds, \
             CAST(SUM(queued_on > UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE) AS SIGNED) AS now, \
             CAST(MIN(IF(scheduled_on = queued_on, 'at once', scheduled_on)) AS CHAR) AS due, \
             CAST(MIN(CONCAT_WS(' ', last_status, TIMESTAMPDIFF(SECOND, queued_on, unique_until), unique_states)) AS CHAR) AS state \
             FROM task_queue"
        );
        let row = sqlx::query(&read).fetch_one(&mut conn).await.expect(&read);
        let counts: (i64, i64, i64) = (row.get("n"), row.get("kinds"), row.get("now"));
        assert_eq!(counts, (3, 1, 3), "(rows, kinds of row, queued now) for {short} and {whole}");
        let (due, state): (String, String) = (row.get("due"), row.get("state"));
        let want = if short.contains("2034-04-04") {
            ("2034-04-04 04:04:04.000000", "scheduled")
        } else if short.contains("2031-06-01") {
            ("2031-05-31 18:15:00.123456", "scheduled")
        } else if short.contains("2024-02-29") {
            ("2024-02-29 23:59:59.000000", "scheduled")
        } else if short.contains("2032-01-01") {
            ("2032-01-01 10:00:00.000000", "scheduled")
        } else if short.contains("-02:30") {
            ("2030-01-01 12:30:00.250000", "scheduled")
        } else if short.contains("25z") {
            ("2030-01-01 10:00:00.250000", "scheduled")
        } else if short.contains("2020-02-29") {
            ("2020-02-29 23:59:59.000000", "waiting")
        } else if short.contains("2030-06-01") {
            ("2030-05-31 18:15:00.000000", "scheduled 60 succeeded")
        } else if short.contains("tenant-1") {
            ("at once", "waiting")
        } else {
            ("at once", "scheduled")
        };
        assert_eq!((due.as_str(), state.as_str()), want, "(due, state) for {short}");
    }
    // What only the whole procedure may refuse, each by name: not taken by the short path.
    let kelvins = format!(r#"'{{"queue": "{}"}}'"#, "\u{212a}".repeat(50));
    let escaped = r#"'{"\\u0071ueue": "mail"}'"#;
    let mut refusals = vec![
        (r#"'{"Queue": "mail"}'"#.to_string(), "unknown option 'Queue'"),
        (r#"'{"priority": 15e-1}'"#.to_string(), "invalid priority"),
        (kelvins, "invalid queue"),
        (r#"'{"key": " padded"}'"#.to_string(), "invalid key"),
        (r#"'{"key": ""}'"#.to_string(), "invalid key"),
        (r#"'{"key": "padded　"}'"#.to_string(), "invalid key"),
        (r#"'{"queue": "  "}'"#.to_string(), "invalid queue"),
        (r#"'{"unique_key": " "}'"#.to_string(), "invalid unique_key"),
        (r#"'{"run_at": "2030-02-30 00:00:00"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2030-02-30 00:00:00", "after": []}'"#.to_string(), "invalid run_at: not a time"),
        // Out of range once its zone is taken off (was an error naming no option).
        (r#"'{"run_at": "9999-12-31 23:59:59-01:00"}'"#.to_string(), "invalid run_at"),
        (r#"'{"run_at": "0000-01-01 00:00:00"}'"#.to_string(), "invalid run_at"),
        // The whole procedure's order: what it checks before the time is named first.
        (r#"'{"run_at": "0000-01-01 00:00:00", "bogus": 1}'"#.to_string(), "unknown option 'bogus'"),
        (r#"'{"run_at": "2030-02-30 00:00:00", "queue": "*"}'"#.to_string(), "invalid queue"),
        (r#"'{"run_at": "2030-01-01 24:00:00Z", "unique_key": "u"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "tomorrow"}'"#.to_string(), "invalid run_at"),
        (r#"'{"run_at": ["2030-01-01 00:00:00"]}'"#.to_string(), "invalid run_at"),
        (r#"'{"run_at": "2030-01-01t00:00:00"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"unique_for": 60}'"#.to_string(), "invalid unique_for: a unique period or states need a unique_key"),
        (r#"'{"unique_key": "u", "unique_for": 0}'"#.to_string(), "invalid unique_for"),
        (r#"'{"unique_key": "u", "unique_states": "Any"}'"#.to_string(), "invalid unique_states"),
        (r#"'{"run_at": "2030-01-01 00:00:00", "queue": "*"}'"#.to_string(), "invalid queue"),
        // Through the path of a time, a key or attempts (0050).
        (r#"'{"key": "tenant-1", "max_attempts": 0}'"#.to_string(), "invalid max_attempts"),
        (r#"'{"max_attempts": 2147483648}'"#.to_string(), "invalid max_attempts"),
        (r#"'{"max_attempts": 3, "key": 7}'"#.to_string(), "invalid key"),
        (r#"'{"run_at": "2030-02-30 00:00:00", "queue": "mail"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2030-01-01 00:00:00", "priority": "1"}'"#.to_string(), "invalid priority"),
        (r#"'{"run_at": "2030-01-01 00:00:00+16:00"}'"#.to_string(), "invalid run_at"),
        (r#"'{"run_at": 20300101}'"#.to_string(), "invalid run_at"),
        // (MySQL's test of a time without a pattern, 0051: its text read back must be itself.)
        (r#"'{"run_at": "２030-01-01 00:00:00"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2030-1-01 00:00:00Z"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2030-01-01 00:00:00.Z"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2030-01-01 00:00:00.1234567"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2030-01-01 00:00:0a+05:30"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2030-01-01 00:00:00+05:3a"}'"#.to_string(), "invalid run_at: not a time"),
        // (Full-width look-alikes of an offset's colon and sign: equal to `:` and `+` in MySQL's collation.)
        (r#"'{"run_at": "2030-05-01 10:00:00+05：30"}'"#.to_string(), "invalid run_at: not a time"),
        (r#"'{"run_at": "2024-05-01 10:00:00＋05:00"}'"#.to_string(), "invalid run_at: not a time"),
        // Through the path of a queue and a priority alone (0049).
        (r#"'{"queue": "*"}'"#.to_string(), "invalid queue"),
        (r#"'{"queue": ""}'"#.to_string(), "invalid queue"),
        (r#"'{"queue": 5, "priority": 1}'"#.to_string(), "invalid queue"),
        (format!(r#"'{{"queue": "{}"}}'"#, "q".repeat(129)), "invalid queue"),
        (r#"'{"queue": "mail", "priority": 2147483648}'"#.to_string(), "invalid priority"),
        (r#"'{"priority": -99999999999}'"#.to_string(), "invalid priority"),
        (r#"'{"priority": "1"}'"#.to_string(), "invalid priority"),
        (r#"'{"priority": 1.0}'"#.to_string(), "invalid priority"),
        (r#"'[]'"#.to_string(), "invalid options: not a JSON object"),
        (r#"'{"queue": "mail"'"#.to_string(), "invalid options: not a JSON object"),
        // Nested past MariaDB's limit (32): not a JSON object there, and not a queue on MySQL.
        (format!(r#"'{{"queue": {}{}}}'"#, "[".repeat(40), "]".repeat(40)), "taskhost_add: invalid "),
    ];
    if mariadb {
        // (`queue` with an escape: was taken as known, then not found, the task queued to `default`.)
        refusals.push((escaped.to_string(), "an option name written with a JSON escape"));
    } else {
        refusals.push((r#"'{"priority": 1e3}'"#.to_string(), "invalid priority"));
        let call = format!("CALL taskhost_add('echo', '{{}}', {escaped})");
        let id: i64 = sqlx::raw_sql(&call).fetch_all(&mut conn).await.expect(&call)[0].get(0);
        let queue: String = sqlx::query_scalar("SELECT CAST(queue AS CHAR) FROM task_queue WHERE id = ?")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .expect("read");
        assert_eq!(queue, "mail", "{call}");
    }
    for (options, needle) in refusals {
        let call = format!("CALL taskhost_add('echo', '{{}}', {options})");
        let refused = sqlx::raw_sql(&call).fetch_all(&mut conn).await.map(|_| ()).expect_err(&call).to_string();
        assert!(refused.contains(needle), "{call}: {refused}");
    }
    // A unique key held answers its holder's id; held past its period, it is let go and taken,
    // through either short path.
    for (add, key) in [
        (r#"CALL taskhost_add('echo', '{}', '{"unique_key": "once"}')"#, "once"),
        (r#"CALL taskhost_add('echo', '{}', '{"unique_key": "once for", "unique_for": 60}')"#, "once for"),
    ] {
        let first: i64 = sqlx::raw_sql(add).fetch_all(&mut conn).await.expect(add)[0].get(0);
        let again: i64 = sqlx::raw_sql(add).fetch_all(&mut conn).await.expect(add)[0].get(0);
        assert_eq!(again, first, "the holder answered");
        let expire = "UPDATE task_queue SET unique_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE unique_key = ?";
        sqlx::query(expire).bind(key).execute(&mut conn).await.expect(expire);
        let taken: i64 = sqlx::raw_sql(add).fetch_all(&mut conn).await.expect(add)[0].get(0);
        assert_ne!(taken, first, "a key held past its period is taken by a new task");
        let holders: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM task_queue WHERE active_unique_key = ?")
            .bind(key)
            .fetch_one(&mut conn)
            .await
            .expect("read");
        assert_eq!(holders, 1, "{key}");
    }
    for call in [
        "CALL taskhost_add('\u{17f}', '{}', NULL)",
        r#"CALL taskhost_add('bad!', '{}', '{"run_at": "0000-01-01 00:00:00"}')"#,
    ] {
        let refused = sqlx::raw_sql(call).fetch_all(&mut conn).await.map(|_| ()).expect_err(call).to_string();
        assert!(refused.contains("invalid handler"), "{call}: {refused}");
    }
    if !mariadb {
        return;
    }
    let call = r#"CALL taskhost_add('echo', '{}', '{"priority": 1e3}')"#;
    let id: i64 = sqlx::raw_sql(call).fetch_all(&mut conn).await.expect(call)[0].get(0);
    let priority: i64 = sqlx::query_scalar("SELECT priority FROM task_queue WHERE id = ?")
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .expect("read");
    assert_eq!(priority, 1000);
}
