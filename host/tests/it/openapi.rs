//! The API's OpenAPI document tells the truth: schemathesis (from PyPI, installed under
//! target/tools by `make test-tools`) reads it from a live `taskhost serve` and sends each
//! endpoint hundreds of requests generated from it, valid and not; every answer must be one the
//! document lists, with the body its schema gives, and never a 5xx. On SQLite, PostgreSQL and
//! MariaDB, with tokens, over a queue that holds tasks, a dead letter and a schedule.

use crate::common;

use std::process::Command;

use common::served::Served;
use common::{repo_root, Db, Env};
use taskhost::NewTask;

// The deploy role: every operation, deploys (of what the fuzzer makes) included, reaches its handler.
const WRITE: &str = "deploy-0123456789abcdef";

async fn the_live_server_answers_as_its_openapi_document_says(db: Db) {
    let mut env = Env::on(db, &["echo"]).await;
    env.set_config(&format!("[api]\ntokens = [{{ name = \"st\", token = \"{WRITE}\", role = \"deploy\" }}]\n")).await;
    let client = &env.app.client;
    let added = client.add_many(vec![NewTask::new("echo", "{}"); 3]).await.expect("add");
    client.cancel(&[added[0].id]).await.expect("cancel");
    let nightly = taskhost::schedule::NewSchedule::new("nightly", "0 3 * * *", "echo");
    client.add_schedule(&nightly).await.expect("schedule");
    let served = Served::start(&env, "127.0.0.1:0");
    let document = served.base.replace("/api/v1", "/api/openapi.json");

    // The path parameters name things that exist, so that requests reach past the lookup.
    let config = env.dir.path().join("schemathesis.toml");
    let parameters = format!(
        "[parameters]\n\"path.id\" = {}\n\"path.name\" = \"nightly\"\n\"path.queue\" = \"default\"\n",
        added[1].id
    );
    std::fs::write(&config, parameters).expect("write the configuration");
    let st = repo_root().join("target/tools/st/bin/st");
    assert!(st.exists(), "{} is missing: `make test-tools` installs it", st.display());
    let checks = "not_a_server_error,status_code_conformance,content_type_conformance,\
                  response_schema_conformance,negative_data_rejection";
    let o = Command::new(&st)
        .arg("--config-file")
        .arg(&config)
        .args(["run", &document, "--header", &format!("Authorization: Bearer {WRITE}")])
        .args(["--checks", checks, "--phases", "coverage,fuzzing", "--max-examples", "30", "--seed", "7"])
        .args(["--workers", "1", "--no-color"])
        // A stream never ends, so schemathesis would wait out its timeout on each request:
        // `events.rs` checks the stream's answers and events against the document.
        .args(["--exclude-path", "/api/v1/events"])
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(env.dir.path())
        .output()
        .expect("run schemathesis");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "schemathesis found answers the document does not allow:\n{out}");
    if std::env::var_os("TASKHOST_TEST_SHOW").is_some() {
        println!("{out}");
    }
    // It did test: every operation the router has but the event stream, and many requests.
    let doc = serde_json::to_value(taskhost::api::openapi()).expect("the document as JSON");
    let methods = ["get", "post", "put", "patch", "delete"];
    let operations: usize = doc["paths"]
        .as_object()
        .map(|paths| paths.values().map(|p| methods.iter().filter(|m| p.get(**m).is_some()).count()).sum())
        .unwrap_or(0);
    assert!(out.contains(&format!("{} selected / {operations} total", operations - 1)), "{out}");
    let generated = out
        .lines()
        .find_map(|l| l.trim().split_once(" generated, ").and_then(|(n, _)| n.parse::<u32>().ok()))
        .unwrap_or_else(|| panic!("no count of test cases in:\n{out}"));
    assert!(generated > 500, "only {generated} requests:\n{out}");
}

on_every_database!(the_live_server_answers_as_its_openapi_document_says);
