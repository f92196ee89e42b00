//! The dashboard in a real browser: Debian's Chromium, driven by playwright-core from Node
//! (`tests/browser/dashboard.mjs`, installed by `make test-tools`), against a live
//! `taskhost serve` and a worker on SQLite, PostgreSQL and MariaDB. The browser script clicks
//! through every page as a person would and fails on any console error or failed request; this
//! test then checks in the database that what was clicked was done. Screenshots are kept under
//! `target/screenshots/dashboard-DB/` for a person to look at.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::process::{signal, spawn_worker, stderr, stdout, wait_exit};
use common::served::Served;
use common::{repo_root, Db, Env};
use serde_json::Value;
use taskhost::model::{OnSuccess, RunStatus};

/// One browser at a time: three at once on two cores would make their waits the test.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn the_dashboard_shows_the_queue_live_and_acts_on_it_by_clicking(db: Db) {
    let _turn = ONE_BROWSER.lock().await;
    let env = Env::on(db, &["echo", "probe", "fail", "fan-out", "join"]).await;
    let nightly = taskhost::schedule::NewSchedule::new("nightly", "0 3 * * *", "echo");
    env.app.client.add_schedule(&nightly).await.expect("schedule");
    // Two tasks of one key in a queue no worker claims, so they stay due for the keys table
    // (its row on the queues page says "none claims it" too; the script reads queue nobody's).
    for _ in 0..2 {
        let keyed = taskhost::NewTask::new("echo", "{}").with_queue("keyed").with_key("tenant-b");
        env.app.client.add(keyed).await.expect("add a keyed task");
    }
    let served = Served::start(&env, "127.0.0.1:0");
    let worker = spawn_worker(&env, &["--queues", "default,held,mail"]);
    let shots = repo_root().join(format!("target/screenshots/dashboard-{db:?}").to_lowercase());
    let done = browse("dashboard.mjs", &served, &shots, &[]);

    // What was clicked was done.
    let client = &env.app.client;
    let progress: Vec<u64> = serde_json::from_value(done["progress"].clone()).expect("two readings");
    assert!(progress[1] > progress[0] && progress[0] > 0, "{done}");
    assert!(done["event_reads"].as_u64().is_some_and(|n| n >= 1), "the event stream drove reads: {done}");
    let status_of = |id: &Value| {
        let id = id.as_i64().expect("an id");
        async move { client.show(id).await.expect("show").0.last_status }
    };
    assert_eq!(status_of(&done["cancelled"]).await, RunStatus::Cancelled);
    assert!(done["handler_cancelled"].as_u64().is_some_and(|n| n >= 1), "the handlers table counts it: {done}");
    for id in done["bulk_cancelled"].as_array().expect("ids") {
        assert_eq!(status_of(id).await, RunStatus::Cancelled, "{id}");
    }
    assert_eq!(done["paused"], Value::Bool(true), "{done}");
    assert_eq!(done["queues_told"], Value::Bool(true), "the queues page follows task events: {done}");
    // The workflow graph: the fan-out, its two parts and the join; from the join (clicked), its
    // parent and the parts it runs after, then itself.
    let graph: Vec<(i64, String)> = serde_json::from_value(done["graph"].clone()).expect("the graph's boxes");
    let flow = graph[0].0;
    let filter = taskhost::model::TaskFilter { parent: Some(flow), newest_first: false, ..Default::default() };
    let kids: Vec<i64> = client.list(&filter).await.expect("children").iter().map(|k| k.id).collect();
    let ids: Vec<i64> = graph.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [vec![flow], kids.clone()].concat(), "{done}");
    let join: Vec<(i64, String)> = serde_json::from_value(done["join_graph"].clone()).expect("the join's boxes");
    let ids: Vec<i64> = join.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![flow, kids[0], kids[1], kids[2]], "parent, the parts it runs after, itself: {done}");
    assert_eq!(done["unclaimed"], "none claims it", "a queue with a due task and no worker of it: {done}");
    assert_eq!(done["awaiting_retry"], serde_json::json!([]), "nothing awaits a retry: {done}");
    // A card's filter is one the list's form shows (a run status it cannot show is not one).
    let links = done["card_links"].as_array().expect("the overview's card links");
    assert!(links.len() >= 5, "{done}");
    for link in links.iter().filter_map(|l| l.as_str()) {
        let query = link.split_once('?').map_or("", |(_, q)| q);
        for key in query.split('&').filter(|p| !p.is_empty()).map(|p| p.split('=').next().unwrap_or(p)) {
            assert!(["state", "queue", "handler", "text"].contains(&key), "{link} filters by {key}: {done}");
        }
    }
    assert_eq!(done["dead_by_state"], serde_json::json!([done["replayed"]]), "the one dead letter: {done}");
    let deleted = client.show(done["deleted"].as_i64().expect("id")).await;
    assert!(matches!(deleted, Err(taskhost::Error::TaskNotFound(_))), "{deleted:?}");
    let queues = client.queues().await.expect("queues");
    assert!(queues.iter().all(|q| q.paused_on.is_none()), "the queue was resumed: {queues:?}");
    let schedules = client.schedules().await.expect("schedules");
    assert!(schedules[0].paused_on.is_some(), "the schedule was paused");
    let all = client.list(&taskhost::model::TaskFilter::default()).await.expect("list");
    assert!(all.iter().any(|t| t.queued_by.as_deref() == Some("schedule:nightly")), "the schedule was triggered");
    // `fail` with retryable false: given up at its first failure, of the default attempts;
    // the time beside how long ago (hh:mm:ss today).
    let row = done["dead_row"].as_str().unwrap_or_default();
    let failures = format!("1 / {}", taskhost::model::DEFAULT_MAX_ATTEMPTS);
    assert!(row.contains(&failures), "{row}");
    assert!(row.contains("demo-failure: "), "the dead letters page shows the last error: {row}");
    let chars: Vec<char> = row.chars().collect();
    let is_clock =
        |w: &[char]| w.iter().enumerate().all(|(i, c)| if i % 3 == 2 { *c == ':' } else { c.is_ascii_digit() });
    assert!(chars.windows(8).any(is_clock), "no time of day beside how long ago: {row}");
    let replayed = client.show(done["replayed"].as_i64().expect("id")).await.expect("show");
    assert!(replayed.1.len() >= 2 && replayed.0.task_runs_failed <= 1, "replayed from its first attempt: {replayed:?}");
    // The limits set through the form, both listed; the key's cleared by its button; the keys
    // table lists the key queued above.
    let shown = |key: &str, name: &str| done[key].as_array().is_some_and(|a| a.iter().any(|v| v == name));
    assert!(shown("limits_shown", "queue:keyed") && shown("limits_shown", "key:tenant-a"), "{done}");
    assert_eq!(done["held_back_shown"], "1", "room for one of tenant-b's two: {done}");
    assert!(shown("keys_shown", "tenant-b"), "{done}");
    assert_eq!(done["limit_cleared"], "key:tenant-a", "{done}");
    let limits = client.limits().await.expect("limits");
    let limit = |name: &str| limits.iter().find(|l| l.scope.name(&l.target) == name);
    let held = limit("queue:keyed").unwrap_or_else(|| panic!("queue:keyed is set: {limits:?}"));
    assert_eq!((held.max_running, held.max_running_per_key), (Some(1), Some(1)), "{held:?}");
    assert_eq!((held.rate_per_key.as_deref(), held.rate_burst_per_key), (Some("5/1s"), Some(2)), "{held:?}");
    assert_eq!(done["rate_per_key_shown"], "5/1s (burst 2)", "{done}");
    assert_eq!(
        (held.fuel_per_turn, done["fuel_per_turn_shown"].as_str()),
        (Some(2_000_000), Some("2,000,000")),
        "{done}"
    );
    assert_eq!((held.on_success, done["on_success_shown"].as_str()), (OnSuccess::Delete, Some("delete")), "{done}");
    assert!(limit("key:tenant-a").is_none(), "key:tenant-a was cleared: {limits:?}");
    for name in [
        "overview",
        "task-running",
        "workflow",
        "queues",
        "dead-letters",
        "runners",
        "plugins",
        "limits",
        "phone-overview",
        "phone-task",
    ] {
        assert!(shots.join(format!("{name}.png")).exists(), "{name}.png");
    }
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}

on_every_database!(
    the_dashboard_shows_the_queue_live_and_acts_on_it_by_clicking,
    the_plugins_page_deploys_a_component_and_rolls_it_back_by_clicking
);

/// Run a browser script of `tests/browser/` against `served`: what it printed, once it passed.
fn browse(script: &str, served: &Served, shots: &std::path::Path, args: &[&str]) -> Value {
    let tools = repo_root().join("target/tools/browser");
    assert!(tools.join("node_modules/playwright-core").exists(), "`make test-tools` installs playwright-core");
    let o = Command::new("node")
        .arg(repo_root().join("host/tests/browser").join(script))
        .arg(served.base.trim_end_matches("/api/v1"))
        .arg(shots)
        .args(args)
        .env("PLAYWRIGHT_DIR", &tools)
        .output()
        .expect("run node");
    let out = stdout(&o);
    assert!(o.status.success(), "{script} found problems (screenshots in {}):\n{out}{}", shots.display(), stderr(&o));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_the_page_asks_for_one_and_says_when_a_read_token_may_not_act() {
    let _turn = ONE_BROWSER.lock().await;
    let mut env = Env::new(&["echo"]).await;
    let read = "read-0123456789abcdef";
    env.set_config(&format!("[api]\ntokens = [{{ name = \"r\", token = \"{read}\", role = \"read\" }}]\n")).await;
    env.app.client.add(taskhost::NewTask::new("echo", "{}").with_queue("mail")).await.expect("add");
    let served = Served::start(&env, "127.0.0.1:0");
    browse("tokens.mjs", &served, &repo_root().join("target/screenshots/dashboard-tokens"), &[read]);
    let queues = env.app.client.queues().await.expect("queues");
    assert!(queues.iter().all(|q| q.paused_on.is_none()), "the read token paused nothing: {queues:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_needs_no_token_forbids_foreign_scripts_and_another_site_cannot_act_through_it() {
    let mut env = Env::new(&["echo"]).await;
    let (status, head, body) = Served::start(&env, "127.0.0.1:0").page("/");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-type: text/html") && body.contains("/ui/app.js"), "{head}\n{body}");
    assert!(head.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    let served = {
        let token = "write-0123456789abcdef";
        env.set_config(&format!("[api]\ntokens = [{{ name = \"w\", token = \"{token}\", role = \"write\" }}]\n")).await;
        Served::start(&env, "127.0.0.1:0")
    };
    let (status, head, body) = served.page("/ui/app.js");
    assert_eq!(status, 200, "the page's files need no token: {head}");
    assert!(head.contains("content-type: text/javascript") && body.contains("export async function api"), "{head}");
    assert_eq!(served.page("/ui/nothing.js").0, 404);
    assert_eq!(served.call("GET", "/tasks", None, None).0, 401, "the data does");

    // A write from another site's page, which a browser marks with that site's Origin (or
    // Sec-Fetch-Site), is refused even with a token; one from the dashboard's own page is not.
    let body = r#"{"handler": "echo"}"#;
    let auth = "Authorization: Bearer write-0123456789abcdef\r\n";
    let length = format!("Content-Length: {}\r\n", body.len());
    for foreign in ["Origin: http://evil.example\r\n", "Origin: null\r\n", "Sec-Fetch-Site: cross-site\r\n"] {
        let (status, answer) = served.raw("POST", "/tasks", &format!("{auth}{length}{foreign}"), body);
        assert_eq!((status, answer["error"]["code"].as_str()), (403, Some("cross-origin")), "{foreign}{answer}");
    }
    let own = format!("Origin: http://{}\r\nSec-Fetch-Site: same-origin\r\n", served.host());
    let (status, answer) = served.raw("POST", "/tasks", &format!("{auth}{length}{own}"), body);
    assert_eq!(status, 201, "{answer}");
    let (status, _) = served.raw("GET", "/tasks", &format!("{auth}Origin: http://evil.example\r\n"), "");
    assert_eq!(status, 200, "a read is not a change: the browser keeps its answer from the other site");
    assert_eq!(env.app.client.store().counts().await.expect("counts").scheduled, 1, "only the dashboard's task");

    // Without tokens, only loopback names: another name that resolves here (DNS rebinding) is
    // refused, so its page cannot read the answers.
    env.set_config("").await;
    let open = Served::start(&env, "127.0.0.1:0");
    let (status, answer) = open.raw("GET", "/tasks", "Host: rebound.example\r\n", "");
    assert_eq!((status, answer["error"]["code"].as_str()), (403, Some("forbidden-host")), "{answer}");
    for host in ["localhost", "127.0.0.1:80", "[::1]:8080"] {
        assert_eq!(open.raw("GET", "/tasks", &format!("Host: {host}\r\n"), "").0, 200, "{host}");
    }
}

/// The Plugins page deploys a component through its form, lists the handler as deployed, and its
/// versions page rolls back by a button, with a `deploy` token; a `write` token may not deploy,
/// and what is not a component, or not of the world, is refused in one line.
async fn the_plugins_page_deploys_a_component_and_rolls_it_back_by_clicking(db: Db) {
    let _turn = ONE_BROWSER.lock().await;
    let mut env = Env::on(db, &["echo"]).await;
    let (deploy, write) = ("deploy-0123456789abcdef", "write-0123456789abcdef");
    env.set_config(&format!(
        "[api]\ntokens = [{{ name = \"ops\", token = \"{deploy}\", role = \"deploy\" }}, \
         {{ name = \"app\", token = \"{write}\", role = \"write\" }}]\n"
    ))
    .await;
    let served = Served::start(&env, "127.0.0.1:0");
    let (v1, v2, wrong) = (common::component("echo"), common::component("noop"), common::component("wrong-world"));
    let path = |p: &std::path::Path| p.to_str().expect("a path").to_string();
    let shots = repo_root().join(format!("target/screenshots/deploys-{db:?}").to_lowercase());
    let done = browse("deploys.mjs", &served, &shots, &[deploy, write, &path(&v1), &path(&v2), &path(&wrong)]);

    assert_eq!(done["write_token"][0], 403, "{done}");
    assert!(done["write_token"][2].as_str().is_some_and(|m| m.contains("deploy role")), "{done}");
    assert_eq!((&done["not_wasm"][0], &done["not_wasm"][1]), (&Value::from(400), &Value::from("refused")), "{done}");
    assert!(done["listed"].as_str().is_some_and(|t| t.contains("deployed, release")), "{done}");
    let digest = |p: &std::path::Path| {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(p).expect("read")))
    };
    let (d1, d2) = (digest(&v1), digest(&v2));
    assert_eq!(done["versions"], serde_json::json!([d2, d1]), "the newest deployed first: {done}");
    assert_eq!(done["rolled_back_to"], Value::from(d1.clone()), "{done}");
    let active = env.app.client.store().active_versions().await.expect("active");
    assert_eq!(active.iter().map(|a| (a.handler.as_str(), a.digest.as_str())).collect::<Vec<_>>(), [("greet", &*d1)]);
    let releases = env.app.client.releases("greet", 10).await.expect("releases");
    let by: Vec<(&str, &str)> = releases.iter().map(|r| (r.action.as_str(), r.released_by.as_str())).collect();
    assert_eq!(by, [("rollback", "api:ops"), ("deploy", "api:ops"), ("deploy", "api:ops")], "{releases:?}");
    assert!(shots.join("versions.png").exists());
}
