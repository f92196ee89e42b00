//! A new user's first hour, as docs/handlers.md tells it: `taskhost new LANGUAGE hello` writes a handler,
//! its `build.sh` builds it (installing its tools the first time), `run-once` runs it without a
//! database, and a worker runs it from the queue. The page shows the files `taskhost new`
//! writes, and a test fails when the two differ, so it cannot drift from what is tested.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::process::{add, run, stderr, stdout};
use common::{built_plugins, repo_root, Env};

fn taskhost(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_taskhost"))
        .args(args)
        .current_dir(cwd)
        .env_remove("TASKHOST_DATABASE_URL")
        .env_remove("TASKHOST_PLUGINS")
        .env_remove("TASKHOST_CONFIG")
        .output()
        .expect("run taskhost")
}

/// `taskhost new LANGUAGE NAME` in `parent`; the handler's directory.
fn new_handler(language: &str, name: &str, parent: &Path) -> PathBuf {
    let o = taskhost(&["new", language, name], parent);
    assert!(o.status.success(), "taskhost new {language} {name}: {}", stderr(&o));
    assert!(stdout(&o).contains(&format!("sh {name}/build.sh")), "it says how to build: {}", stdout(&o));
    parent.join(name)
}

/// Run the handler's `build.sh` as the docs say, with the tools plugins/build.sh installed
/// (the script installs its own when they are missing) and a shared cargo target directory.
fn build(dir: &Path) {
    build_with(dir, &[]);
}

/// `build.sh` with `env` set (`TASKHOST_DEV=1`: as `taskhost dev` builds).
fn build_with(dir: &Path, env: &[(&str, &str)]) {
    built_plugins();
    let root = repo_root();
    let o = Command::new("sh")
        .arg(dir.join("build.sh"))
        .env_remove("TASKHOST_DEV")
        .envs(env.iter().copied())
        .env("VENV", root.join("target/tools/py"))
        .env("NODE_TOOLS", root.join("target/tools/js"))
        .env("CARGO_TARGET_DIR", root.join("target/new-handlers"))
        .output()
        .expect("run build.sh");
    assert!(o.status.success(), "{}/build.sh failed:\n{}\n{}", dir.display(), stdout(&o), stderr(&o));
}

/// Every file a new handler is made of, relative to its directory, with the ones the page
/// does not show (the WIT, generated bindings, the SDK, binaries) left out.
fn shown_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            let relative = path.strip_prefix(dir).expect("inside").to_path_buf();
            let first = relative.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned());
            if path.is_dir() {
                if !matches!(first.as_deref(), Some("wit" | "gen" | "sdk")) {
                    todo.push(path);
                }
            } else if path.extension().is_none_or(|e| e != "wasm") {
                files.push(relative);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn the_handlers_page_shows_every_file_taskhost_new_writes() {
    let page = std::fs::read_to_string(repo_root().join("docs/handlers.md")).expect("docs/handlers.md");
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut missing = Vec::new();
    for language in ["rust", "python", "js", "c"] {
        let parent = tmp.path().join(language);
        std::fs::create_dir_all(&parent).expect("dir");
        let dir = new_handler(language, "hello", &parent);
        let files = shown_files(&dir);
        assert!(files.iter().any(|f| f.ends_with("build.sh")), "{language}: {files:?}");
        for file in files {
            let text = std::fs::read_to_string(dir.join(&file)).expect("text file");
            if !page.contains(&text) {
                missing.push(format!("{language} {}", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/handlers.md does not show these files as `taskhost new LANGUAGE hello` writes them (host/templates/): {missing:?}"
    );
}

#[test]
fn taskhost_new_refuses_a_bad_name_and_a_directory_in_use() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let o = taskhost(&["new", "rust", "9lives"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot name a handler"), "{}", stderr(&o));
    new_handler("c", "taken", tmp.path());
    let o = taskhost(&["new", "python", "taken"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("exists and is not empty"), "{}", stderr(&o));
    let o = taskhost(&["new", "cobol", "x"], tmp.path());
    assert_eq!(o.status.code(), Some(2), "an unknown language is a usage error");
}

/// Write, build, run once, queue and run the handler `hello-LANGUAGE` on `env`'s database.
fn first_hour(env: &Env, language: &str, expected: serde_json::Value) {
    let name = format!("hello-{language}");
    let dir = new_handler(language, &name, env.dir.path());
    build(&dir);
    let plugins = dir.join("plugins");
    let plugins = plugins.to_str().expect("utf-8 path");
    let cache = common::cache_dir();
    let once = |data: &str| {
        let args =
            ["--plugins", plugins, "--cache-dir", cache.to_str().expect("utf-8"), "run-once", &name, "--data", data];
        taskhost(&args, env.dir.path())
    };
    let o = once(r#"{"name": "you"}"#);
    assert!(o.status.success(), "{language}: {}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("success: "), "{}", stdout(&o));
    let o = once("[1]");
    assert_eq!(o.status.code(), Some(1), "{language}: a failure exits 1: {}", stdout(&o));
    assert!(stdout(&o).contains("invalid-input (not retryable)"), "{language}: {}", stdout(&o));

    std::fs::copy(dir.join(format!("plugins/{name}.wasm")), env.plugins.join(format!("{name}.wasm"))).expect("copy");
    let id = add(env, &[&name, "--data", r#"{"name": "you"}"#]);
    let o = run(env, &["worker", "--drain"]);
    assert!(o.status.success(), "{language}: {}", stderr(&o));
    let o = run(env, &["show", &id.to_string(), "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&o.stdout).expect("show --json");
    let run = &shown["runs"][0];
    assert_eq!((&run["status"], &run["results"]), (&serde_json::json!("success"), &expected), "{language}: {shown}");
    let logs = run["logs"].as_array().map(|l| l.iter().filter_map(|l| l.as_str()).collect::<Vec<_>>().join("\n"));
    assert!(logs.unwrap_or_default().contains("[stdout] "), "{language}: what it printed is in the logs: {shown}");

    // As `taskhost dev` builds it, a JavaScript handler has the reader of its lent source in (another
    // component: sdk/dev.js against wit/js.wit's world), and runs the same.
    if language == "js" {
        let component = dir.join(format!("plugins/{name}.wasm"));
        let size = || std::fs::metadata(&component).expect("the component").len();
        let for_workers = size();
        build_with(&dir, &[("TASKHOST_DEV", "1")]);
        assert_ne!(size(), for_workers, "TASKHOST_DEV=1 builds another component");
        let o = once(r#"{"name": "dev"}"#);
        assert!(stdout(&o).contains(r#"success: {"hello":"dev"}"#), "{}{}", stdout(&o), stderr(&o));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_handler_from_taskhost_new_builds_and_runs_on_postgres() {
    let env = Env::postgres(&[]).await;
    first_hour(&env, "rust", serde_json::json!({"hello": "you"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_handler_from_taskhost_new_builds_and_runs_on_sqlite() {
    let env = Env::new(&[]).await;
    first_hour(&env, "python", serde_json::json!({"hello": "you"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_handler_from_taskhost_new_builds_and_runs_on_mariadb() {
    let env = Env::mysql(&[]).await;
    first_hour(&env, "js", serde_json::json!({"hello": "you"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_handler_from_taskhost_new_builds_and_runs_on_sqlite() {
    let env = Env::new(&[]).await;
    first_hour(&env, "c", serde_json::json!({"hello": "you"}));
}

/// `taskhost new LANGUAGE NAME --http` in `parent`; the handler's directory.
fn new_http_handler(language: &str, name: &str, parent: &Path) -> PathBuf {
    let o = taskhost(&["new", language, name, "--http"], parent);
    assert!(o.status.success(), "taskhost new {language} {name} --http: {}", stderr(&o));
    assert!(stdout(&o).contains(&format!("[handlers.{name}.grants.http]")), "it says what to grant: {}", stdout(&o));
    parent.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_from_taskhost_new_http_posts_under_its_grant_in_rust_python_javascript_and_c() {
    let server = common::http::HttpServer::start("127.0.0.1").await;
    let tmp = tempfile::tempdir().expect("temp dir");
    let parent = tmp.path().to_path_buf();
    let mut config = String::new();
    for language in ["rust", "python", "js", "c"] {
        let name = format!("hook-{language}");
        let dir = new_http_handler(language, &name, &parent);
        tokio::task::spawn_blocking(move || build(&dir)).await.expect("built");
        config.push_str(&format!("[handlers.{name}.grants.http]\nallow = [\"{}\"]\n", server.url("/hooks/")));
    }
    let config_file = parent.join("operator.toml");
    std::fs::write(&config_file, &config).expect("write the configuration");
    let data = serde_json::json!({"url": server.url("/hooks/x"), "payload": {"hello": "you"}}).to_string();
    for language in ["rust", "python", "js", "c"] {
        let name = format!("hook-{language}");
        let plugins = parent.join(&name).join("plugins");
        let args = ["--config", config_file.to_str().expect("path"), "--plugins", plugins.to_str().expect("path")];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.extend(["run-once".to_string(), name.clone(), "--data".to_string(), data.clone()]);
        let cwd = parent.clone();
        let o = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            taskhost(&args, &cwd)
        })
        .await
        .expect("ran");
        assert!(o.status.success(), "{name}: {}{}", stdout(&o), stderr(&o));
        let results =
            stdout(&o).lines().find_map(|l| l.strip_prefix("success: ").map(str::to_string)).unwrap_or_default();
        let results: serde_json::Value = serde_json::from_str(&results).unwrap_or_default();
        assert_eq!(results["status"], 200, "{name}: {}", stdout(&o));
    }
    let posted: Vec<_> = server.seen().into_iter().map(|s| (s.method, s.target, s.body_len)).collect();
    let one = ("POST".to_string(), "/hooks/x".to_string(), r#"{"hello":"you"}"#.len());
    assert_eq!(posted, vec![one; 4]);
}

/// The README's workflow handler, as printed there: a Python handler from `taskhost new` with that
/// `app.py`, built, waits for `go`, fans out to `word-count` once it is sent, and its join sums
/// the parts' words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_workflow_handler_waits_for_its_signal_fans_out_and_joins() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README");
    let from = readme.find("Handlers also make workflows").expect("the README's workflows");
    let block = readme[from..].split("```python\n").nth(1).and_then(|b| b.split("```").next()).expect("its Python");
    let env = Env::new(&["word-count"]).await;
    let dir = new_handler("python", "flow", env.dir.path());
    std::fs::write(dir.join("app.py"), block).expect("write app.py");
    let built = dir.clone();
    tokio::task::spawn_blocking(move || build(&built)).await.expect("built");
    std::fs::copy(dir.join("plugins/flow.wasm"), env.plugins.join("flow.wasm")).expect("copy");
    let id = add(&env, &["flow", "--data", r#"{"texts": ["one two", "three four five"]}"#]);
    let drain = |env: &Env| {
        let o = run(env, &["worker", "--drain"]);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    drain(&env);
    let task = env.app.store.get_task(id).await.expect("get").expect("exists");
    assert_eq!(task.awaiting_signal.as_deref(), Some("go"), "{task:?}");
    let o = run(&env, &["signal", &id.to_string(), "go", "--data", r#"{"by": "ann"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    drain(&env);
    let children = taskhost::model::TaskFilter { parent: Some(id), ..Default::default() };
    let kids = env.app.client.list(&children).await.expect("list");
    let join = kids.iter().find(|k| k.handler == "flow").expect("the join");
    let (_, runs) = env.app.client.show(join.id).await.expect("show");
    let words = runs.last().and_then(|r| r.results.clone()).unwrap_or_default();
    assert_eq!(words, r#"{"words":5}"#, "{runs:?}");
    let (_, runs) = env.app.client.show(id).await.expect("show");
    assert_eq!(runs.last().and_then(|r| r.results.clone()).as_deref(), Some(r#"{"parts":2,"approved_by":"ann"}"#));
}
