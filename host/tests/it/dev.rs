//! `taskhost dev DIR`, a real process on a handler `taskhost new` wrote: it builds and runs the
//! handler on sample data, builds and runs it again when its source changes (not when the build
//! writes its own files), says why a build failed and waits for the fix, and stops on SIGTERM; a
//! Python or JavaScript handler's own source is run as it is now, without a build.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{signal, stderr, stdout, wait_exit, Killed};
use common::{built_plugins, cache_dir, repo_root, wait_until};

fn taskhost(dir: &Path) -> Command {
    taskhost_caching_in(dir, &dir.join("cache"))
}

fn taskhost_caching_in(dir: &Path, cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_taskhost"));
    c.current_dir(dir)
        .arg("--cache-dir")
        .arg(cache)
        .env("VENV", repo_root().join("target/tools/py"))
        .env_remove("TASKHOST_CONFIG")
        .env_remove("TASKHOST_PLUGINS");
    c
}

/// The C handler `taskhost new c hello` writes, in `dir`: the quickest of the four to build.
fn new_c_handler(dir: &Path) {
    built_plugins(); // clang-19 and wasm-tools, as plugins/build.sh installs them
    let o = taskhost(dir).args(["new", "c", "hello"]).output().expect("taskhost new");
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `taskhost new LANGUAGE hello` in `tmp`, its build a copy of the example `component` made from the
/// same SDK (another app inside), counted in `plugins/builds`: componentize-py and componentize-js
/// are not what is tested here, and the shared cache has the example compiled already. A JavaScript
/// build with `TASKHOST_DEV` set copies the example as `taskhost dev` builds it (`dev/`), as the
/// template's build.sh does. The handler's directory and its build script.
fn new_handler_built_as(tmp: &Path, language: &str, component: &str) -> (std::path::PathBuf, String) {
    let o = taskhost(tmp).args(["new", language, "hello"]).output().expect("taskhost new");
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.join("hello");
    let dev = if language == "js" { "${TASKHOST_DEV:+dev/}" } else { "" };
    let built = format!("{}/{dev}{component}.wasm", built_plugins().display());
    let build = format!(
        "mkdir -p plugins && cp \"{built}\" plugins/hello.wasm && echo \"built ${{TASKHOST_DEV:-unset}}\" >> plugins/builds\n"
    );
    std::fs::write(dir.join("build.sh"), &build).expect("build.sh");
    (dir, build)
}

/// Anything but the handler's own source (here the build script) builds again: the third build,
/// before the `n`th run's end.
async fn edit_the_build_script(dir: &Path, build: &str, log: &Path, n: usize) {
    std::fs::write(dir.join("build.sh"), format!("{build}# edited\n")).expect("edit build.sh");
    let printed = || std::fs::read_to_string(log).unwrap_or_default();
    let watching = || async { printed().matches("watching hello for changes").count() >= n };
    wait_until(Duration::from_secs(60), "the build after build.sh changed", watching).await;
    let builds = std::fs::read_to_string(dir.join("plugins/builds")).unwrap_or_default().lines().count();
    assert_eq!(builds, 3, "{}", printed());
}

/// `taskhost dev hello` in `dir` on `{"name": "you"}`, printing to `log` (killed if the test fails).
fn dev_hello(dir: &Path, cache: &Path, log: &Path) -> Killed {
    Killed(Some(
        taskhost_caching_in(dir, cache)
            .args(["dev", "hello", "--data", r#"{"name": "you"}"#])
            .stdout(std::fs::File::create(log).expect("log"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn taskhost dev"),
    ))
}

/// SIGTERM to `dev`, which must exit well within 10 s.
async fn stop(dev: Killed) {
    let child = dev.take();
    signal(&child, "TERM");
    let o = wait_exit(child, Duration::from_secs(10)).await;
    assert!(o.status.success(), "{:?}", o.status);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_the_handler_again_at_each_edit_of_its_source_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().expect("temp dir");
    new_c_handler(tmp.path());
    let log = tmp.path().join("dev.log");
    let child = dev_hello(tmp.path(), &tmp.path().join("cache"), &log);
    let printed = || std::fs::read_to_string(&log).unwrap_or_default();
    let watching = |n: usize| async move { printed().matches("watching hello for changes").count() >= n };
    wait_until(Duration::from_secs(120), "the first build and run", || watching(1)).await;
    assert!(printed().contains(r#"success: {"hello":"you"}"#), "{}", printed());

    let source = tmp.path().join("hello/handler.c");
    let text = std::fs::read_to_string(&source).expect("handler.c");
    std::fs::write(&source, text.replace(r#"{\"hello\":"#, r#"{\"edited\":"#)).expect("edit");
    wait_until(Duration::from_secs(120), "the run after the edit", || watching(2)).await;
    assert!(printed().contains(r#"success: {"edited":"you"}"#), "{}", printed());
    assert_eq!(printed().matches("building hello").count(), 2, "the build's own files started no build: {}", printed());

    std::fs::write(&source, "this is not C").expect("break it");
    wait_until(Duration::from_secs(120), "the failed build", || watching(3)).await;
    assert!(printed().contains("error: the build failed"), "{}", printed());

    stop(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_once_exits_with_the_runs_outcome() {
    let tmp = tempfile::tempdir().expect("temp dir");
    new_c_handler(tmp.path());
    let o = taskhost(tmp.path()).args(["dev", "hello", "--once", "--data", r#"{"name": "x"}"#]).output().expect("run");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(r#"success: {"hello":"x"}"#), "{}", stdout(&o));
    let o = taskhost(tmp.path()).args(["dev", "hello", "--once", "--data", "[1]"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1), "the run failed: {}", stdout(&o));
    assert!(stdout(&o).contains("invalid-input (not retryable)"), "{}", stdout(&o));
    let o = taskhost(tmp.path()).args(["dev", "nowhere", "--once"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("nowhere is not a directory: give a handler's directory"), "{}", stderr(&o));
    // Data that is not JSON is refused before a build (a minute for Python), not after.
    let o = taskhost(tmp.path()).args(["dev", "hello", "--once", "--data", "{bad"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("task data is not valid JSON"), "{}", stderr(&o));
    assert!(!stdout(&o).contains("building"), "no build: {}", stdout(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_a_python_handlers_edited_source_without_building_it_again() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (dir, build) = new_handler_built_as(tmp.path(), "python", "py-webhook");
    std::fs::write(dir.join(".env"), "SECRET=never lent\n").expect(".env");
    let log = tmp.path().join("dev.log");
    let child = dev_hello(tmp.path(), &cache_dir(), &log);
    let printed = || std::fs::read_to_string(&log).unwrap_or_default();
    let builds = || std::fs::read_to_string(dir.join("plugins/builds")).unwrap_or_default().lines().count();
    let watching = |n: usize| async move { printed().matches("watching hello for changes").count() >= n };
    wait_until(Duration::from_secs(180), "the first build and run", || watching(1)).await;
    // The template's handle, read from the directory: the component's own app wants a "url".
    assert!(printed().contains(r#"success: {"hello":"you"}"#), "{}", printed());

    // The run sees a copy of the handler's own .py files, not the rest of its directory.
    let app = dir.join("app.py");
    let text = std::fs::read_to_string(&app).expect("app.py");
    let listed = r#"return {"edited": name, "lent": sorted(os.listdir("/taskhost-dev"))}"#;
    std::fs::write(&app, format!("import os\n{}", text.replace(r#"return {"hello": name}"#, listed))).expect("edit");
    wait_until(Duration::from_secs(60), "the run after the edit", || watching(2)).await;
    assert!(printed().contains(r#"success: {"edited":"you","lent":["app.py"]}"#), "{}", printed());
    assert!(printed().contains("not building hello: only its Python source changed"), "{}", printed());
    assert_eq!(builds(), 1, "{}", printed());

    // A new module of the handler's, and an exception in it: its line is shown from the file.
    std::fs::write(dir.join("helper.py"), "def twice(x):\n    raise ValueError(f\"no twice for {x}\")\n")
        .expect("helper");
    std::fs::write(&app, text.replace(r#"return {"hello": name}"#, "import helper\n    return helper.twice(name)"))
        .expect("edit");
    wait_until(Duration::from_secs(60), "the run of the new module", || watching(3)).await;
    let shown = printed();
    let tail = &shown[shown.rfind("not building").unwrap_or(0)..];
    assert!(tail.contains("failed: uncaught-exception (retryable): ValueError: no twice for you"), "{tail}");
    assert!(tail.contains(r#"raise ValueError(f"no twice for {x}")"#), "the line, read at run time: {tail}");
    assert_eq!(builds(), 1, "{}", printed());

    // The SDK's own errors are still the SDK's.
    std::fs::write(&app, text.replace(r#"return {"hello": name}"#, r#"raise taskhost.Fail("bad-name", "no")"#))
        .expect("edit");
    wait_until(Duration::from_secs(60), "the run that fails", || watching(4)).await;
    assert!(printed().contains("failed: bad-name (not retryable): no"), "{}", printed());

    // A module the component lacks: built again, in case the build brings it.
    std::fs::write(&app, text.replace(r#"return {"hello": name}"#, "import no_such_module")).expect("edit");
    wait_until(Duration::from_secs(60), "the build for a missing module", || watching(5)).await;
    assert!(printed().contains("imports a module the component built last lacks: building it again"), "{}", printed());
    assert_eq!(builds(), 2, "{}", printed());

    edit_the_build_script(&dir, &build, &log, 6).await;

    stop(child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_a_javascript_handlers_edited_source_without_building_it_again() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (dir, build) = new_handler_built_as(tmp.path(), "js", "js-webhook");
    let log = tmp.path().join("dev.log");
    let child = dev_hello(tmp.path(), &cache_dir(), &log);
    let printed = || std::fs::read_to_string(&log).unwrap_or_default();
    let builds = || std::fs::read_to_string(dir.join("plugins/builds")).unwrap_or_default().lines().count();
    let watching = |n: usize| async move { printed().matches("watching hello for changes").count() >= n };
    let last = || {
        let shown = printed();
        shown[shown.rfind("not building").unwrap_or(0)..].to_string()
    };
    wait_until(Duration::from_secs(180), "the first build and run", || watching(1)).await;
    // After a build, what was built runs: the component's own app wants a "url".
    assert!(printed().contains("not an http:// or https:// URL"), "{}", printed());

    // A new module of the handler's, imported under another name: its exception's line is its own.
    let app = dir.join("app.js");
    let text = std::fs::read_to_string(&app).expect("app.js");
    std::fs::write(dir.join("helper.js"), "// twice\nexport function twice(s) {\n  throw new TypeError(`no twice for ${s}`);\n}\nexport const unit = \"x\";\n")
        .expect("helper");
    let edited = format!(
        "import {{ twice as double, unit }} from \"./helper.js\";\n{}",
        text.replace("return { hello: name };", "return { edited: name, unit };")
    );
    std::fs::write(&app, &edited).expect("edit");
    wait_until(Duration::from_secs(60), "the run after the edit", || watching(2)).await;
    assert!(last().contains(r#"success: {"edited":"you","unit":"x"}"#), "{}", printed());
    assert!(last().contains("not building hello: only its JavaScript source changed"), "{}", printed());
    std::fs::write(&app, edited.replace("return { edited: name, unit };", "return double(name);")).expect("edit");
    wait_until(Duration::from_secs(60), "the run of the new module", || watching(3)).await;
    assert!(last().contains("failed: uncaught-exception (retryable): TypeError: no twice for you"), "{}", last());
    assert!(last().contains("/taskhost-dev/helper.js:3:"), "the helper's own line: {}", last());
    assert_eq!(builds(), 1, "{}", printed());

    // The SDK's own errors are still the SDK's; a syntax error names its file and line.
    std::fs::write(&app, text.replace("return { hello: name };", r#"throw new Fail("bad-name", "no");"#))
        .expect("edit");
    wait_until(Duration::from_secs(60), "the run that fails", || watching(4)).await;
    assert!(last().contains("failed: bad-name (not retryable): no"), "{}", last());
    std::fs::write(&app, text.replace("progress(50);", "progress(50;")).expect("edit");
    wait_until(Duration::from_secs(60), "the run with a syntax error", || watching(5)).await;
    assert!(last().contains("failed: syntax-error (not retryable): /taskhost-dev/app.js:7:"), "{}", last());
    // An await in a function that is not async is one too, on its line; the SDK quoted with ' is the SDK.
    let quoted = text.replace("\"./sdk/taskhost.js\"", "'./sdk/taskhost.js'");
    std::fs::write(&app, format!("{quoted}function later() {{\n  await 1;\n}}\n")).expect("edit");
    wait_until(Duration::from_secs(60), "the run with an await in a plain function", || watching(6)).await;
    let line = quoted.lines().count() + 2;
    assert!(
        last().contains(&format!("failed: syntax-error (not retryable): /taskhost-dev/app.js:{line}:")),
        "{}",
        last()
    );
    std::fs::write(&app, quoted.replace("return { hello: name };", "return { quoted: name };")).expect("edit");
    wait_until(Duration::from_secs(60), "the run with the SDK quoted with '", || watching(7)).await;
    assert!(last().contains(r#"success: {"quoted":"you"}"#), "{}", last());
    assert_eq!(builds(), 1, "{}", printed());

    // What only a build reads (a package) builds again, then runs what was built: its own app.
    std::fs::write(&app, format!("import lodash from \"lodash\";\n{text}")).expect("edit");
    wait_until(Duration::from_secs(60), "the build for a package", || watching(8)).await;
    assert!(
        printed()
            .contains(r#"the source is read only by a build (app.js imports "lodash", which only a build brings)"#),
        "{}",
        printed()
    );
    assert!(last().contains("not an http:// or https:// URL"), "the built app ran: {}", last());
    assert_eq!(builds(), 2, "{}", printed());

    edit_the_build_script(&dir, &build, &log, 9).await;

    // An import list over lines, with a comment: the lines below it keep their numbers.
    let listed = format!(
        "import {{\n  twice as double, // the helper's\n  unit,\n}} from \"./helper.js\";\n{}",
        text.replace("return { hello: name };", "return double(name + unit);")
    );
    let line = listed.lines().position(|l| l.contains("return double(")).expect("the call") + 1;
    std::fs::write(&app, &listed).expect("edit");
    wait_until(Duration::from_secs(60), "the run with a listed import", || watching(10)).await;
    assert!(last().contains("TypeError: no twice for youx"), "{}", last());
    assert!(last().contains(&format!("/taskhost-dev/app.js:{line}:")), "app.js's own line {line}: {}", last());

    // A name the module does not export is an error, as a build makes it.
    std::fs::write(&app, listed.replace("  unit,", "  nothing,")).expect("edit");
    wait_until(Duration::from_secs(60), "the run with a missing name", || watching(11)).await;
    assert!(last().contains(r#"does not provide an export named "nothing""#), "{}", last());
    assert_eq!(builds(), 3, "{}", printed());

    // A handle of its own, not made by handler(), reads no lent source: each change builds, and so
    // does the change back, since what was built then does not read it either.
    std::fs::write(&app, "export async function handle() {\n  return \"own\";\n}\n").expect("edit");
    wait_until(Duration::from_secs(60), "the build of a handle of its own", || watching(12)).await;
    assert_eq!(builds(), 4, "{}", printed());
    std::fs::write(&app, &text).expect("edit back");
    wait_until(Duration::from_secs(60), "the build back to handler()", || watching(13)).await;
    assert_eq!(builds(), 5, "{}", printed());
    std::fs::write(&app, text.replace("return { hello: name };", "return { again: name };")).expect("edit");
    wait_until(Duration::from_secs(60), "the run read again", || watching(14)).await;
    assert!(last().contains(r#"success: {"again":"you"}"#), "{}", last());
    assert_eq!(builds(), 5, "{}", printed());

    // Built meanwhile for a deploy (`sh build.sh`: no reader in it), the next change builds again.
    let o = Command::new("sh").arg("build.sh").current_dir(&dir).env_remove("TASKHOST_DEV").output().expect("sh");
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(&app, text.replace("return { hello: name };", "return { deployed: name };")).expect("edit");
    wait_until(Duration::from_secs(60), "the build after a build for a deploy", || watching(15)).await;
    assert!(last().contains("not an http:// or https:// URL"), "what was built ran: {}", printed());
    assert_eq!(builds(), 7, "{}", printed());

    // A build.sh that never builds the reader in (`task-handler-js` named, TASKHOST_DEV not, as the
    // template did before sdk/dev.js) builds at each change: what it built would run, not the edit.
    let plain = format!(
        "# componentize-js app.js -n task-handler-js\nmkdir -p plugins && cp \"{}\" plugins/hello.wasm && echo built >> plugins/builds\n",
        built_plugins().join("js-webhook.wasm").display()
    );
    std::fs::write(dir.join("build.sh"), plain).expect("build.sh");
    wait_until(Duration::from_secs(60), "the build after build.sh changed", || watching(16)).await;
    std::fs::write(&app, text.replace("return { hello: name };", "return { plain: name };")).expect("edit");
    wait_until(Duration::from_secs(60), "the build of a plain build's edit", || watching(17)).await;
    assert!(last().contains("not an http:// or https:// URL"), "what was built ran: {}", printed());
    assert_eq!(builds(), 9, "{}", printed());
    stop(child).await;

    // dev builds with TASKHOST_DEV=1, but under --once (which lends nothing): what a worker runs.
    std::fs::write(dir.join("build.sh"), &build).expect("build.sh");
    let o = taskhost(tmp.path()).args(["dev", "hello", "--once"]).output().expect("dev --once");
    assert_eq!(o.status.code(), Some(1), "the built app wants a url: {}", stdout(&o));
    let built = std::fs::read_to_string(dir.join("plugins/builds")).expect("builds");
    let kinds: Vec<&str> = built.lines().collect();
    assert_eq!(kinds.first(), Some(&"built 1"), "{built}");
    assert_eq!((kinds.get(5), kinds.last()), (Some(&"built unset"), Some(&"built unset")), "{built}");
}
