//! `taskhost_add` where PostgreSQL takes more than the others: data given as `jsonb` or `json`, as
//! an application most often holds it (migration 0044).

use crate::common;

use common::process::{stderr, stdout};
use common::{Db, Env};
use serde_json::{json, Value};
use taskhost::model::TaskId;

use super::sql_add::shell;

/// Data as `jsonb` (a column, `jsonb_build_object`) or `json` is queued as its text, with named
/// options beside it; a quoted literal, NULL and no data at all still find the text function (no
/// call is ambiguous); bad input through the new functions is the text function's one error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_given_as_jsonb_or_json_is_queued_and_every_other_call_still_finds_one_function_on_postgres() {
    let env = Env::on(Db::Postgres, &["echo"]).await;
    let o = shell(
        Db::Postgres,
        &env,
        &[
            "CREATE TABLE app_orders (id integer, payload jsonb)",
            r#"INSERT INTO app_orders VALUES (1, '{"order": 1}'), (2, '{"order": 2, "lines": [1, 2]}')"#,
            "SELECT taskhost_add('echo', payload, queue => 'orders', priority => id) FROM app_orders ORDER BY id",
            "SELECT taskhost_add('echo', jsonb_build_object('n', 3))",
            r#"SELECT taskhost_add('echo', '{"n": 4}'::json, unique_key => 'k4')"#,
            r#"SELECT taskhost_add('echo', '{"n": 5}')"#,
            "SELECT taskhost_add('echo')",
            "SELECT taskhost_add('echo', NULL::jsonb)",
            "SELECT taskhost_add('echo', NULL)",
            r#"SELECT taskhost_add(handler => 'echo', data => '{"n": 9}'::jsonb, max_attempts => 2)"#,
        ],
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let ids: Vec<TaskId> =
        stdout(&o).lines().map(|l| l.trim().parse().unwrap_or_else(|_| panic!("an id: {l:?}"))).collect();
    assert_eq!(ids.len(), 9, "{ids:?}");
    let mut seen = Vec::new();
    for id in &ids {
        let t = env.app.store.get_task(*id).await.expect("get").expect("the task");
        let data: Value = serde_json::from_str(&t.data).expect("JSON data");
        seen.push((data, t.queue.to_string(), t.priority, t.max_attempts, t.unique_key.clone()));
    }
    let plain = |data: Value| (data, "default".to_string(), 0, 5, None);
    assert_eq!(
        seen,
        [
            (json!({"order": 1}), "orders".into(), 1, 5, None),
            (json!({"order": 2, "lines": [1, 2]}), "orders".into(), 2, 5, None),
            plain(json!({"n": 3})),
            (json!({"n": 4}), "default".into(), 0, 5, Some("k4".into())),
            plain(json!({"n": 5})),
            plain(json!({})),
            plain(json!({})),
            plain(json!({})),
            (json!({"n": 9}), "default".into(), 0, 2, None),
        ]
    );

    // Refused as through the text function, naming what is wrong, and nothing is added.
    for (call, says) in [
        ("SELECT taskhost_add('no such/handler', '{}'::jsonb)", "taskhost_add: invalid handler"),
        ("SELECT taskhost_add('echo', '{}'::json, queue => '')", "taskhost_add: invalid queue"),
        ("SELECT taskhost_add('echo', '[1'::json)", "invalid input syntax for type json"),
    ] {
        let o = shell(Db::Postgres, &env, &[call]);
        assert!(!o.status.success(), "{call}: refused");
        assert!(stderr(&o).contains(says), "{call}: {}", stderr(&o));
    }
    let all = env.app.store.list_tasks(&Default::default()).await.expect("list");
    assert_eq!(all.len(), ids.len(), "nothing more was added");
    // Where the text function is PUBLIC's (the default), so are these.
    let o = shell(
        Db::Postgres,
        &env,
        &["SELECT has_function_privilege('public', p.oid, 'EXECUTE') FROM pg_proc p \
           WHERE p.proname = 'taskhost_add' AND p.pronamespace = current_schema()::regnamespace"],
    );
    assert_eq!(stdout(&o).split_whitespace().collect::<Vec<_>>(), ["t", "t", "t"], "{}", stderr(&o));
}

/// The new functions' grants are the text function's: a role granted that (and not PUBLIC) may
/// call them, PUBLIC may not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_functions_are_granted_as_the_text_function_was_on_postgres() {
    use sqlx::{Connection, Row};
    let pg = common::postgres_scratch().await;
    common::migrated::migrate_before(&pg, "postgres", "0044").await;
    let role = format!("taskhost app {:08x}", rand::random::<u32>());
    let text = "taskhost_add(text, text, text, integer, timestamptz, text, integer, text, bigint[], boolean, text, \
                interval, text, interval, text)";
    let mut conn = sqlx::PgConnection::connect(&pg).await.expect("connect");
    for sql in [
        format!("CREATE ROLE \"{role}\""),
        format!("REVOKE ALL ON FUNCTION {text} FROM PUBLIC"),
        format!("GRANT EXECUTE ON FUNCTION {text} TO \"{role}\""),
    ] {
        sqlx::raw_sql(&sql).execute(&mut conn).await.expect(&sql);
    }
    let store = taskhost::store::open(&pg, &taskhost::store::StoreOptions::default()).await.expect("open");
    store.migrate().await.expect("0044");
    let mut found = Vec::new();
    for kind in ["jsonb", "json"] {
        let f = text.replacen("text, text", &format!("text, {kind}"), 1);
        let row = sqlx::query(&format!(
            "SELECT has_function_privilege('{role}', '{f}', 'EXECUTE') AS may, \
             (SELECT count(*) FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a \
              WHERE p.oid = '{f}'::regprocedure AND a.grantee = 0) AS public"
        ))
        .fetch_one(&mut conn)
        .await
        .expect("read");
        found.push((kind, row.get::<bool, _>("may"), row.get::<i64, _>("public")));
    }
    // (The role goes before the checks, so that a failed one leaves none behind.)
    sqlx::raw_sql(&format!("DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\"")).execute(&mut conn).await.expect("drop");
    // The role may call them; PUBLIC may not, as it may not call the text function.
    assert_eq!(found, [("jsonb", true, 0), ("json", true, 0)]);
}
