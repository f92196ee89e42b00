//! The clients in `clients/` against a live `taskhost serve` and worker on each database: the
//! Python package and the Node.js one installed by path (`pip install ./clients/python`, `npm
//! install ./clients/node`, into directories of the test's), their routes and fields checked
//! against the server's OpenAPI document, then enqueue, enqueue many, get, wait (at the task's
//! end, and running out), cancel, retry and their errors, and event streams, one of which
//! reconnects through a proxy that cut it and is told what it missed.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::process::{signal, spawn_worker, stderr, stdout, wait_exit};
use common::served::Served;
use common::{repo_root, Db, Env};
use serde_json::{json, Value};

/// The Python client installed once for the test run, from a copy of its source (the build
/// leaves its files beside the source).
fn python_client() -> &'static PathBuf {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let root = repo_root().join("target/tools/python-client");
        let (source, into) = (root.join("source"), root.join("lib"));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("dir");
        let copied = Command::new("cp").arg("-r").arg(repo_root().join("clients/python")).arg(&source).status();
        assert!(copied.expect("cp").success());
        let o = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"])
            .arg(&into)
            .arg(&source)
            .output()
            .expect("pip");
        assert!(o.status.success(), "pip install ./clients/python: {}{}", stdout(&o), stderr(&o));
        into
    })
}

/// The Node.js client installed once for the test run (`npm install ./clients/node` into a
/// directory of the test's, where the test's script is copied: ESM resolves packages from the
/// script's own directory).
fn node_client() -> &'static PathBuf {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let root = repo_root().join("target/tools/node-client");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("dir");
        let copied =
            Command::new("cp").arg("-r").arg(repo_root().join("clients/node")).arg(root.join("source")).status();
        assert!(copied.expect("cp").success());
        std::fs::write(root.join("package.json"), r#"{"private": true}"#).expect("package.json");
        let o = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "./source"])
            .current_dir(&root)
            .output()
            .expect("npm");
        assert!(o.status.success(), "npm install ./clients/node: {}{}", stdout(&o), stderr(&o));
        let script = repo_root().join("host/tests/clients/client_node.mjs");
        std::fs::copy(script, root.join("client_node.mjs")).expect("copy the script");
        root
    })
}

/// What both clients' scripts print, checked alike.
fn check_what_a_client_saw(seen: &Value) {
    assert_eq!(seen["one"]["same_id"], json!(true), "a second add with the unique key gets the first's id: {seen}");
    assert_eq!(seen["unique"], json!([true, false, true, true]), "queued once, then told a task holds the key: {seen}");
    assert_eq!(seen["one"]["state"], "succeeded", "{seen}");
    assert_eq!(seen["one"]["results"], json!({"n": 1}), "{seen}");
    assert_eq!(seen["many"], json!([{"n": 0}, {"n": 1}, {"n": 2}]), "{seen}");
    assert_eq!(seen["many_unique"], json!([[false, true], true]), "a batch told which it queued: {seen}");
    assert_eq!(seen["timeout"], "scheduled", "{seen}");
    assert_eq!((&seen["cancel"], &seen["cancel_again"]), (&json!(true), &json!([409, "conflict"])), "{seen}");
    assert_eq!((&seen["retry"], &seen["after_retry"]), (&json!(2), &json!("succeeded")), "{seen}");
    let signal = json!([false, [["go/ahead now", {"by": "client"}]], [409, "conflict"]]);
    assert_eq!(seen["signal"], signal, "kept, shown, refused once finished: {seen}");
    let errors = &seen["errors"];
    let code = |name: &str| (errors[name][0].clone(), errors[name][1].clone());
    assert_eq!(code("unknown_handler"), (json!(400), json!("unknown-handler")), "{errors}");
    assert_eq!(code("bad_time"), (json!(400), json!("invalid")), "{errors}");
    assert!(errors["bad_time"][2].as_str().unwrap_or("").contains("at"), "{errors}");
    assert_eq!(code("not_found"), (json!(404), json!("not-found")), "{errors}");
    assert_eq!(code("unreachable"), (json!(0), json!("unreachable")), "{errors}");
    assert!(errors["unknown_field"].as_str().unwrap_or("").contains("colour"), "{errors}");
    assert!(
        errors["unique_key_missing"].as_str().unwrap_or("").contains("must be"),
        "refused before sending: {errors}"
    );
    let refused = &seen["refused"];
    let said = |name: &str| refused[name][1].as_str().unwrap_or_default().to_string();
    for name in ["fraction", "bool", "none"] {
        assert!(said(name).starts_with("not a task id"), "{name}: {refused}");
    }
    assert!(said("negative_wait").contains("at least 0"), "{refused}");
    assert!(said("empty_tasks").contains("tasks"), "named as the argument is: {refused}");
    let token = said("token_line_break");
    assert!(token.starts_with("the token is not text") && !token.contains("secret"), "{refused}");
    assert_eq!(refused["no_handler"][0], json!(400), "{refused}");
    assert!(said("no_handler").contains("missing field `handler`"), "{refused}");
    assert_eq!(seen["events_asked"], json!(["task", true, "succeeded"]), "{seen}");
    let states = seen["events_queue"].as_array().expect("the states a stream was told");
    assert_eq!(states.last(), Some(&json!("succeeded")), "{seen}");
    assert!(states.iter().all(|s| ["scheduled", "running", "succeeded"].contains(&s.as_str().unwrap_or(""))), "{seen}");
    // A stream whose connection was cut: told first the task queued while it was away.
    assert_eq!(seen["events_resumed"], json!([true, true, true, "task", true]), "{seen}");
    // Broken before the server told it a place: told by the client that events may be lost.
    assert_eq!(seen["events_lagged_unplaced"], json!(["lagged", {"reason": "resume"}, false]), "{seen}");
    // Reconnects taken and never answered: given up at the 6 s deadline (an attempt waits at least
    // 5 s), not after the minute an answer is otherwise waited for.
    let given_up = seen["events_given_up"].as_array().expect("how a hung reconnect ended");
    assert_eq!(given_up[..2], [json!(0), json!("unreachable")], "{seen}");
    assert!(given_up[2].as_u64().is_some_and(|secs| secs < 40), "given up too late: {seen}");
    // Reconnects answered 503 `busy` to the deadline: given up as unreachable, saying the last answer.
    assert_eq!(seen["events_given_up_busy"], json!([0, "unreachable", true]), "{seen}");
    // A stream opened on a busy server is asked for again while its reconnect time lasts.
    assert_eq!(seen["events_opened_busy"], json!([0, "task", true]), "{seen}");
    assert_eq!(seen["events_open_busy_at_once"], json!([503, "busy", 0]), "{seen}");
    // A server holding all the waits it may (503 `busy`): the task read plainly, the wait asked
    // again while the time lasts; a task the read found final returned; past the time, a timeout.
    assert_eq!(seen["wait_busy"], json!(["succeeded", 3]), "{seen}");
    assert_eq!(seen["wait_busy_past_deadline"], json!(["timeout", "scheduled", true]), "{seen}");
    assert_eq!(seen["wait_busy_read_final"], json!(["succeeded", 1]), "{seen}");
}

/// A client's script run against a live serve and worker on `db` (`command`: the script's
/// command for the server's base URL), what it printed checked; what it printed.
async fn a_client_against_a_live_server(db: Db, queued_by: &str, command: impl FnOnce(&str) -> Command) -> Value {
    let env = Env::on(db, &["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let worker = spawn_worker(&env, &["--poll-interval", "20ms"]);
    let base = served.base.trim_end_matches("/api/v1").to_string();
    let o = command(&base).output().expect("run the client's script");
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let seen: Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON line");
    assert_eq!(seen["one"]["queued_by"], queued_by, "{seen}");
    check_what_a_client_saw(&seen);
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
    seen
}

async fn the_node_client_queues_waits_cancels_and_retries(db: Db) {
    let seen = a_client_against_a_live_server(db, "node-client", |base| {
        let mut c = Command::new("node");
        c.arg(node_client().join("client_node.mjs")).arg(base);
        c
    })
    .await;
    assert_eq!(seen["events_closed_reconnecting"], json!(true), "closed while reconnecting: {seen}");
    assert_eq!(seen["wait_aborted"], json!(["TimeoutError", true]), "a wait ended by the caller's signal: {seen}");
    assert_eq!(seen["events_aborted"], json!(["task"]), "a stream closed by the caller's signal: {seen}");
    let released = json!([0, ["TimeoutError", true]]);
    assert_eq!(seen["signal_released"], released, "no listeners left; a connect aborted at once: {seen}");
    // Five calls one after another on at most two connections (not five); four at once on at most
    // four more, kept: the next five open none.
    assert_eq!(seen["node_kept"], json!([[true, 5], [true, 0, 14]]), "{seen}");
    // A kept connection closed unanswered as the next request came: sent again, on a new one.
    assert_eq!(seen["resent_once"], json!([["succeeded", "succeeded", "succeeded"], 3]), "{seen}");
    assert_eq!(seen["closed_unanswered"], json!(["unreachable", true]), "{seen}");
    assert_eq!(seen["json_refused"], json!(["TypeError", false]), "{seen}");
    // A wait across a restart of serve asked again; one never answered given up on in time.
    assert_eq!(seen["wait_across_restart"], json!(["succeeded", 5]), "{seen}");
    assert_eq!(seen["wait_frozen"], json!(["unreachable", true]), "{seen}");
    // Not asked again for a certificate not trusted, nor TLS spoken to a plain server: at once.
    assert_eq!(seen["wait_lasting"], json!([["unreachable", true], ["unreachable", true]]), "{seen}");
}

async fn the_python_client_queues_waits_cancels_and_retries(db: Db) {
    let seen = a_client_against_a_live_server(db, "py-client", |base| {
        let mut c = Command::new("python3");
        c.arg(repo_root().join("host/tests/clients/client_py.py")).arg(base).env("PYTHONPATH", python_client());
        c
    })
    .await;
    // Not reconnected (the proxy holds a new connection: the script would not end): a cut between
    // two chunks reads as the body's end, within one as a break.
    let left = &seen["events_not_reconnected"];
    assert!(*left == json!("ended") || *left == json!([0, "unreachable"]), "reconnect=0, cut: {seen}");
    // Its HTTP read from a stand-in server's answers written in pieces.
    let http = &seen["async_http"];
    assert_eq!(http["read"], json!([true, true, true]), "chunked, by length, to the end: {http}");
    let refused = json!([[302, "http"], [0, "unreachable"], [0, "unreachable"]]);
    assert_eq!(http["refused"], refused, "a redirect, a broken chunk's size, a chunk without its CRLF: {http}");
    assert_eq!(http["dropped"], json!([0, "unreachable", true]), "closed without an answer, said so: {http}");
    assert_eq!(http["dropped_blocking"], json!([0, "unreachable", true]), "and by the blocking client: {http}");
    assert_eq!(http["across_restart"], json!(["succeeded", "succeeded", 8]), "waits across a restart: {http}");
    assert_eq!(
        http["frozen"],
        json!(["unreachable", true, "unreachable", true]),
        "a wait never answered, given up on in time: {http}"
    );
    assert_eq!(http["not_json_closed"], json!([true, true]), "an event not JSON lets its connection go: {http}");
    assert_eq!(http["closed_while_reading"], json!(true), "a blocking stream closed from another thread: {http}");
    assert_eq!(http["line_break"], "refused", "a token holding a line break: {http}");
    assert_eq!(http["events"], json!([["task", "running"], ["task", "dead"]]), "{http}");
    assert_eq!(http["last_event_id"], "7", "{http}");
    // A reconnect late in its time, then quiet longer than was left of it: read to its event, not
    // broken and reconnected again (each client two events of two connections, four in all).
    assert_eq!(http["late_reconnect"], json!([[1, 2], [3, 4], 4]), "{http}");
    // The asyncio client: 21 waits at once on the loop's one thread (no executor's), the rest as
    // the blocking client's.
    let told = &seen["async"];
    assert_eq!(told["waits"], json!([21, {"n": 10}, "py-async", true]), "{told}");
    assert_eq!(told["unique"], json!([[true, false], false]), "{told}");
    assert_eq!((&told["timeout"], &told["cancel"], &told["retry"]), (&json!("scheduled"), &json!(true), &json!(2)));
    assert_eq!(told["got"], json!(true), "{told}");
    assert_eq!(told["signal"], json!([false, {}]), "{told}");
    let errors = json!({"unknown_handler": [400, "unknown-handler"], "not_found": [404, "not-found"],
                        "unreachable": [0, "unreachable"]});
    assert_eq!(told["errors"], errors, "{told}");
    let states = told["events"].as_array().expect("the states a stream was told");
    assert_eq!(states.last(), Some(&json!("succeeded")), "{told}");
    assert_eq!(told["resumed"], json!([true, true, "task", true]), "cut, resumed with its place: {told}");
    assert_eq!(told["cancelled_read"], json!(["task", true, true]), "a cancelled read loses nothing: {told}");
    assert_eq!(told["lagged_unplaced"], json!(["lagged", {"reason": "resume"}]), "{told}");
    let given_up = told["given_up"].as_array().expect("how a hung reconnect ended");
    assert_eq!(given_up[..2], [json!(0), json!("unreachable")], "{told}");
    assert!(given_up[2].as_u64().is_some_and(|secs| secs < 40), "given up too late: {told}");
    assert_eq!(told["wait_busy"], json!(["succeeded", 3]), "a busy server's wait asked again: {told}");
    assert_eq!(told["kept"], json!([1, 1]), "the server keeps a connection: five calls on one: {told}");
    // Kept connections against a stand-in server: five calls on one connection; one closed as it
    // was reused replaced (the request sent twice); `Connection: close` not kept; of 20 at once 8
    // kept; kept too long not used; a second event loop's call on a connection of its own.
    let kept = &seen["async_kept"];
    assert_eq!(*kept, json!([[1, 5], [1, 2, 7], 3, 8, 1, [1, 1]]), "{kept}");
    // The blocking client's alike, its threads sharing them; a proxy named in the environment
    // (`http_proxy`) used as before: the request's target the whole URL.
    // Over https:// with the application's own `ssl_context` (a self-signed certificate it
    // trusts): answered on one kept connection, each client; without it, `unreachable` naming the
    // certificate.
    // A wait there raises at once (not when its 30 s end): retrying does not mend a certificate
    // not trusted, nor TLS spoken to a plain server.
    let refused = json!([0, "unreachable", true]);
    let (r, w) = (&refused, &refused);
    assert_eq!(seen["tls"], json!([[1, 1, 1], 1, [[1, 1, 1], 1], r, r, w, w, w, w]), "{}", seen["tls"]);
    let proxied = json!([true, 1, "http://taskhost.invalid:9/api/v1/tasks/1"]);
    assert_eq!(seen["kept"], json!([[1, 5], [1, 2, 7], 3, 8, 1, proxied]), "{}", seen["kept"]);
}

crate::on_every_database!(
    the_python_client_queues_waits_cancels_and_retries,
    the_node_client_queues_waits_cancels_and_retries
);

/// Each client as installed, with an application's use of it (`tests/clients/typed_use.*`), passes
/// its language's strict type checker (`make test-tools` installs mypy and TypeScript): the types
/// fit the code, and Node's `index.d.ts` is itself checked. The Python client's types hold on the
/// oldest Python mypy checks (3.10), and nothing it uses needs a Python after its 3.9 (vermin
/// reads each name, module and syntax it uses against the versions that have them): only 3.11
/// runs here.
#[test]
fn the_clients_as_installed_pass_strict_type_checks() {
    let tools = repo_root().join("target/tools");
    let work = tools.join("python-types");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("dir");
    let copied = Command::new("cp").arg("-r").arg(python_client().join("taskhost_client")).arg(&work).status();
    assert!(copied.expect("cp").success());
    std::fs::copy(repo_root().join("host/tests/clients/typed_use.py"), work.join("typed_use.py")).expect("copy");
    // Each check: the tool under target/tools/st/bin, its arguments, what its failure means.
    let checks: [(&str, &[&str], &str); 3] = [
        ("mypy", &["--strict", "--cache-dir", ".mypy-cache", "typed_use.py", "taskhost_client"], "mypy --strict"),
        (
            "mypy",
            &["--strict", "--python-version", "3.10", "--cache-dir", ".mypy-cache-310", "taskhost_client"],
            "mypy --strict for Python 3.10",
        ),
        (
            "vermin",
            &["--no-tips", "--violations", "--eval-annotations", "-t=3.9-", "taskhost_client"],
            "the client needs a Python after 3.9",
        ),
    ];
    for (tool, args, failed) in checks {
        let o = Command::new(tools.join("st/bin").join(tool))
            .args(args)
            .current_dir(&work)
            .output()
            .unwrap_or_else(|e| panic!("{tool} (make test-tools): {e}"));
        assert!(o.status.success(), "{failed}: {}{}", stdout(&o), stderr(&o));
    }

    let root = node_client();
    std::fs::copy(repo_root().join("host/tests/clients/typed_use.mts"), root.join("typed_use.mts")).expect("copy");
    let o = Command::new(tools.join("browser/node_modules/.bin/tsc"))
        .args(["--noEmit", "--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext"])
        .arg("typed_use.mts")
        .current_dir(root)
        .output()
        .expect("tsc (make test-tools)");
    assert!(o.status.success(), "tsc --strict: {}{}", stdout(&o), stderr(&o));
}
