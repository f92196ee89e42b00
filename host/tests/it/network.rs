//! Outbound HTTP under the operator's grant, through a real worker on a SQLite file: test servers
//! on loopback addresses (127.0.0.1, 127.0.0.2), the `fetch` handler built from source making
//! real requests. Every refused or bounded request ends its run with a clear code while the
//! worker goes on with the next task.

use crate::common;

use std::time::{Duration, Instant};

use common::http::HttpServer;
use common::{drain_config, wait_until, Env};
use serde_json::json;
use taskhost::model::{NewTask, Run, RunStatus};
use taskhost::runner::WorkerConfig;

/// An environment with `fetch` and `echo`, and `config` as the operator's configuration.
async fn env_with(config: &str) -> Env {
    env_of(&["fetch", "echo"], config).await
}

async fn env_of(plugins: &[&str], config: &str) -> Env {
    let mut env = Env::new(plugins).await;
    if !config.is_empty() {
        env.set_config(config).await;
    }
    env
}

fn grant(allow: &str, extra: &str) -> String {
    format!("[handlers.fetch.grants.http]\nallow = {allow}\n{extra}")
}

/// Run `fetch` once with `data`, then a good task: the worker must run both.
async fn fetch(env: &Env, data: serde_json::Value) -> Run {
    run_once(env, "fetch", data).await
}

async fn run_once(env: &Env, handler: &str, data: serde_json::Value) -> Run {
    let id = env.app.client.add(NewTask::new(handler, data.to_string()).with_max_attempts(1)).await.expect("add").id;
    let next = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, 2, "{report:?}");
    let (after, _) = env.app.client.show(next).await.expect("show");
    assert_eq!(after.last_status, RunStatus::Success, "the worker ran the next task");
    let (_, runs) = env.app.client.show(id).await.expect("show");
    runs.into_iter().next().expect("one run")
}

fn results(run: &Run) -> serde_json::Value {
    serde_json::from_str(run.results.as_deref().unwrap_or("null")).expect("results are JSON")
}

fn logs(run: &Run) -> &str {
    run.logs.as_deref().unwrap_or("")
}

fn code(run: &Run) -> Option<&str> {
    run.error_code.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_request_succeeds_and_is_logged() {
    let server = HttpServer::start("127.0.0.1").await;
    let env = env_with(&grant(&format!("[\"{}\"]", server.url("")), "")).await;
    let run = fetch(&env, json!({"url": server.url("/echo"), "method": "POST", "body": "hello"})).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    let got = results(&run);
    assert_eq!((got["status"].as_u64(), got["body"].as_str()), (Some(200), Some("hello")), "{got}");
    let line = format!("[host] http POST {}/echo -> 200, 5 bytes out, 5 bytes in, ", server.url(""));
    assert!(logs(&run).contains(&line), "{}", logs(&run));
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].host.as_deref(), Some(server.authority().as_str()), "the Host header names the destination");
    assert_eq!((seen[0].method.as_str(), seen[0].body_len), ("POST", 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_without_a_grant_is_denied_and_told_why() {
    let server = HttpServer::start("127.0.0.1").await;
    let env = env_with("").await;
    let run = fetch(&env, json!({"url": server.url("/echo")})).await;
    assert_eq!((run.status, code(&run)), (RunStatus::Error, Some("denied")), "{run:?}");
    let why = format!(
        "network access to {} is not granted to handler fetch; grants are set in the operator's configuration",
        server.authority()
    );
    assert!(run.error_message.as_deref().unwrap_or("").starts_with(&why), "{:?}", run.error_message);
    assert!(logs(&run).contains(&format!("[host] http refused, denied: {why}")), "{}", logs(&run));
    assert!(server.seen().is_empty(), "no byte left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_methods_and_paths_outside_the_grant_are_denied() {
    let (granted, other) = (HttpServer::start("127.0.0.1").await, HttpServer::start("127.0.0.2").await);
    let allow = format!("[{{ url = \"{}\", methods = [\"POST\"] }}]", granted.url("/hooks/"));
    let env = env_with(&grant(&allow, "")).await;
    for (data, says) in [
        (json!({"url": other.url("/hooks/a"), "method": "POST"}), other.url("")),
        (json!({"url": granted.url("/hooks/a")}), format!("GET requests to {}", granted.url(""))),
        (json!({"url": granted.url("/admin"), "method": "POST"}), format!("path /admin on {}", granted.url(""))),
        (json!({"url": granted.url("/hooks/../admin"), "method": "POST"}), "path /hooks/../admin".to_string()),
        (json!({"url": granted.url("/hooks/..;/admin"), "method": "POST"}), "path /hooks/..;/admin".to_string()),
        (
            json!({"url": format!("http://user@{}/hooks/a", granted.authority()), "method": "POST"}),
            "is not a host and port".to_string(),
        ),
        (
            json!({"url": format!("http://[::1]:{}/hooks/a", granted.addr.port()), "method": "POST"}),
            format!("http://[::1]:{}", granted.addr.port()),
        ),
    ] {
        let run = fetch(&env, data.clone()).await;
        assert_eq!(code(&run), Some("denied"), "{data}: {run:?}");
        assert!(run.error_message.as_deref().unwrap_or("").contains(&says), "{data}: {:?}", run.error_message);
    }
    assert!(granted.seen().is_empty() && other.seen().is_empty(), "no byte left");
    let run = fetch(&env, json!({"url": granted.url("/hooks/a"), "method": "POST", "body": "x"})).await;
    assert_eq!(run.status, RunStatus::Success, "the granted method and path: {run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_to_loopback_is_denied_unless_the_grant_names_the_address() {
    let server = HttpServer::start("127.0.0.1").await;
    let port = server.addr.port();
    let env = env_with(&grant(&format!("[\"http://localhost:{port}\"]"), "")).await;
    let run = fetch(&env, json!({"url": format!("http://localhost:{port}/echo")})).await;
    assert_eq!(code(&run), Some("denied"), "{run:?}");
    let message = run.error_message.as_deref().unwrap_or("");
    assert!(message.contains("localhost resolves to") && message.contains("127.0.0.1"), "{message}");
    assert!(server.seen().is_empty(), "no connection was made");

    // Naming another address does not do: the check is of the addresses the name resolves to.
    let other = format!("[{{ url = \"http://localhost:{port}\", addresses = [\"127.0.0.2\"] }}]");
    let env = env_with(&grant(&other, "")).await;
    let run = fetch(&env, json!({"url": format!("http://localhost:{port}/echo")})).await;
    assert_eq!(code(&run), Some("denied"), "{run:?}");
    assert!(server.seen().is_empty(), "no connection was made");

    let named = format!("[{{ url = \"http://localhost:{port}\", addresses = [\"127.0.0.1\", \"::1\"] }}]");
    let env = env_with(&grant(&named, "")).await;
    let run =
        fetch(&env, json!({"url": format!("http://localhost:{port}/echo"), "method": "POST", "body": "hi"})).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(server.seen()[0].host.as_deref(), Some(format!("localhost:{port}").as_str()), "Host keeps the name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_redirect_is_a_new_request_checked_again() {
    let (granted, other) = (HttpServer::start("127.0.0.1").await, HttpServer::start("127.0.0.2").await);
    let env = env_with(&grant(&format!("[\"{}\"]", granted.url("")), "")).await;
    let to_denied = granted.url(&format!("/redirect?to={}", other.url("/echo")));
    let run = fetch(&env, json!({"url": to_denied, "follow": 3})).await;
    assert_eq!(code(&run), Some("denied"), "{run:?}");
    assert!(run.error_message.as_deref().unwrap_or("").contains(&other.authority()), "{:?}", run.error_message);
    assert!(other.seen().is_empty(), "the redirect's target was never reached");
    assert!(logs(&run).contains("-> 302"), "the first request is logged: {}", logs(&run));

    let to_allowed = granted.url(&format!("/redirect?to={}", granted.url("/ok")));
    let run = fetch(&env, json!({"url": to_allowed, "follow": 3})).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(results(&run)["hops"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_response_or_request_ends_with_http_limit() {
    let server = HttpServer::start("127.0.0.1").await;
    let bounds = "max_response_bytes = 100_000\nmax_request_bytes = 1_000\n";
    let env = env_with(&grant(&format!("[\"{}\"]", server.url("")), bounds)).await;
    for (data, says) in [
        (json!({"url": server.url("/big?bytes=5000000")}), "the response body passed the grant's max_response_bytes"),
        (json!({"url": server.url("/big-announced?bytes=5000000")}), "the response body is 5000000 bytes"),
        (
            json!({"url": server.url("/echo"), "method": "POST", "body_bytes": 200_000}),
            "the request body is 200000 bytes",
        ),
        (
            json!({"url": server.url("/echo"), "method": "POST", "body_bytes": 200_000, "chunked": true}),
            "the request body passed the grant's max_request_bytes of 1000 bytes",
        ),
    ] {
        let run = fetch(&env, data.clone()).await;
        assert_eq!((run.status, code(&run)), (RunStatus::Error, Some("http-limit")), "{data}: {run:?}");
        assert!(run.error_message.as_deref().unwrap_or("").contains(says), "{data}: {:?}", run.error_message);
    }
}

/// 20 MB sent under the default bound (1 MiB), with a length or without: the host's limit, named,
/// not the guest's own connection error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_of_20_mb_under_the_default_bound_ends_with_http_limit() {
    let server = HttpServer::start("127.0.0.1").await;
    let env = env_with(&grant(&format!("[\"{}\"]", server.url("")), "")).await;
    for chunked in [false, true] {
        let data = json!({"url": server.url("/echo"), "method": "POST", "body_bytes": 20_000_000, "chunked": chunked});
        let run = fetch(&env, data.clone()).await;
        assert_eq!((run.status, code(&run)), (RunStatus::Error, Some("http-limit")), "{data}: {run:?}");
        let message = run.error_message.as_deref().unwrap_or("");
        assert!(message.contains("max_request_bytes of 1048576"), "{data}: {message}");
    }
}

/// A server that answers without reading the body (as Python's http.server does for a method it
/// lacks) and closes: a body over the bound with a length is refused before it goes, as
/// `http-limit`; one sent without a length ends at the bound or where the server closed, which the
/// run's log says (the guest sees `connection-terminated`, not a protocol error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_to_a_server_that_does_not_read_it_is_refused_by_its_length_or_told_as_the_servers_close() {
    let server = HttpServer::start("127.0.0.1").await;
    let env = env_with(&grant(&format!("[\"{}\"]", server.url("")), "")).await;
    let post =
        |chunked| json!({"url": server.url("/unread"), "method": "POST", "body_bytes": 20_000_000, "chunked": chunked});
    let run = fetch(&env, post(false)).await;
    assert_eq!((run.status, code(&run)), (RunStatus::Error, Some("http-limit")), "{run:?}");
    assert!(run.error_message.as_deref().unwrap_or("").contains("max_request_bytes of 1048576"), "{run:?}");
    // Without a length, whichever comes first: the bound passed (the host's buffers took more than
    // 1 MiB before the server closed), or the server's close.
    for _ in 0..5 {
        let run = fetch(&env, post(true)).await;
        let message = run.error_message.as_deref().unwrap_or("");
        if code(&run) == Some("http-limit") {
            assert!(message.contains("max_request_bytes of 1048576"), "{run:?}");
            continue;
        }
        assert_eq!(code(&run), Some("request-failed"), "the handler's own error: {run:?}");
        assert!(message.contains("ConnectionTerminated"), "{message}");
        assert!(logs(&run).contains("the server closed the connection"), "{}", logs(&run));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_at_once_or_in_all_end_with_http_limit() {
    let server = HttpServer::start("127.0.0.1").await;
    let env = env_with(&grant(&format!("[\"{}\"]", server.url("")), "max_concurrent = 4\nmax_requests = 10\n")).await;
    let run = fetch(&env, json!({"url": server.url("/hang"), "parallel": 5, "timeout_ms": 500})).await;
    assert_eq!(code(&run), Some("http-limit"), "{run:?}");
    assert!(run.error_message.as_deref().unwrap_or("").contains("max_concurrent of 4"), "{:?}", run.error_message);
    assert_eq!(server.seen().len(), 4, "four went out, the fifth did not");
    let env = env_with(&grant(&format!("[\"{}\"]", server.url("")), "max_concurrent = 20\nmax_requests = 10\n")).await;
    let run = fetch(&env, json!({"url": server.url("/ok"), "parallel": 11})).await;
    assert_eq!(code(&run), Some("http-limit"), "{run:?}");
    assert!(run.error_message.as_deref().unwrap_or("").contains("max_requests of 10"), "{:?}", run.error_message);
    assert_eq!(server.seen().len(), 4 + 10, "ten more went out, the eleventh did not");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_is_cut_by_the_first_byte_timeout_or_the_deadline() {
    let server = HttpServer::start("127.0.0.1").await;
    let config = grant(&format!("[\"{}\"]", server.url("")), "first_byte_timeout = \"300ms\"\n");
    let env = env_with(&config).await;
    let run = fetch(&env, json!({"url": server.url("/hang")})).await;
    assert_eq!(code(&run), Some("request-failed"), "the handler's own error: {run:?}");
    assert!(logs(&run).contains("-> no response"), "{}", logs(&run));
    let limits = "[handlers.fetch.limits]\ndeadline = \"2s\"\n";
    let env = env_with(&format!("{}{limits}", grant(&format!("[\"{}\"]", server.url("")), ""))).await;
    let run = fetch(&env, json!({"url": server.url("/hang")})).await;
    assert_eq!((run.status, code(&run)), (RunStatus::Timeout, Some("deadline")), "{run:?}");
    assert!(logs(&run).contains("cut at the run's deadline"), "{}", logs(&run));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_server_is_cut_at_the_runs_deadline() {
    let server = HttpServer::start("127.0.0.1").await;
    let config =
        format!("{}[handlers.fetch.limits]\ndeadline = \"2s\"\n", grant(&format!("[\"{}\"]", server.url("")), ""));
    let env = env_with(&config).await;
    let run = fetch(&env, json!({"url": server.url("/trickle")})).await;
    assert_eq!((run.status, code(&run)), (RunStatus::Timeout, Some("deadline")), "{run:?}");
    assert!(logs(&run).contains("cut at the run's deadline"), "{}", logs(&run));
    // A server slower than the grant's between-bytes timeout ends the request, not the run.
    let config = grant(&format!("[\"{}\"]", server.url("")), "between_bytes_timeout = \"300ms\"\n");
    let env = env_with(&config).await;
    let run = fetch(&env, json!({"url": server.url("/trickle")})).await;
    assert_eq!(code(&run), Some("request-failed"), "the handler's own error: {run:?}");
    assert!(logs(&run).contains("between_bytes_timeout"), "{}", logs(&run));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_blocked_in_a_request_is_cancelled_at_once() {
    let server = HttpServer::start("127.0.0.1").await;
    let env = env_with(&grant(&format!("[\"{}\"]", server.url("")), "")).await;
    let client = &env.app.client;
    let id = client.add(NewTask::new("fetch", json!({"url": server.url("/hang")}).to_string())).await.expect("add").id;
    let cfg = WorkerConfig { drain: false, concurrency: 1, shutdown_grace: Duration::from_secs(600), ..drain_config() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(env.app.worker(cfg).run(async move {
        let _ = stopped.await;
    }));
    wait_until(Duration::from_secs(30), "the request reached the server", || async { !server.seen().is_empty() }).await;
    let next = client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let cancelled = Instant::now();
    assert_eq!(client.cancel(&[id]).await.expect("cancel"), vec![id]);
    let store = env.app.store.clone();
    wait_until(Duration::from_secs(10), "the next task ran in the freed slot", || async {
        store.get_task(next).await.expect("get").map(|t| t.last_status) == Some(RunStatus::Success)
    })
    .await;
    eprintln!("a run blocked in an HTTP request was cancelled, its slot free within {:?}", cancelled.elapsed());
    let _ = stop.send(());
    let report =
        tokio::time::timeout(Duration::from_secs(60), worker).await.expect("stopped").expect("join").expect("ran");
    assert_eq!((report.runs_ended_elsewhere, report.runs_abandoned), (1, 0), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_webhooks_post_their_payload_in_rust_python_javascript_and_c() {
    let server = HttpServer::start("127.0.0.1").await;
    let mut config = String::new();
    let handlers = ["webhook", "py-webhook", "js-webhook", "c-webhook"];
    for handler in handlers {
        config.push_str(&format!("[handlers.{handler}.grants.http]\nallow = [\"{}\"]\n", server.url("/hooks/")));
    }
    let env = env_of(&["webhook", "py-webhook", "js-webhook", "c-webhook", "echo"], &config).await;
    for handler in handlers {
        let data = json!({"url": server.url("/hooks/../echo"), "payload": {"order": 7}});
        let run = run_once(&env, handler, data).await;
        assert_eq!(code(&run), Some("denied"), "{handler}: {run:?}");
        let run = run_once(&env, handler, json!({"url": server.url("/hooks/x"), "payload": {"order": 7}})).await;
        assert_eq!(run.status, RunStatus::Success, "{handler}: {run:?}");
        assert_eq!(results(&run), json!({"status": 200, "response": "ok"}), "{handler}");
        assert!(logs(&run).contains(&format!("[host] http POST {}/hooks/x -> 200", server.url(""))), "{}", logs(&run));
    }
    let posted: Vec<_> = server.seen().into_iter().map(|s| (s.method, s.target, s.body_len)).collect();
    let one = ("POST".to_string(), "/hooks/x".to_string(), r#"{"order":7}"#.len());
    assert_eq!(posted, vec![one; 4], "each example POSTed its payload once, and nothing else left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_applies_the_operators_grant_so_an_author_can_try_a_request() {
    let server = HttpServer::start("127.0.0.1").await;
    let mut env = env_with("").await;
    let data = json!({"url": server.url("/echo"), "method": "POST", "body": "hi"}).to_string();
    let run_once = |env: &Env| {
        let mut command = common::taskhost_command(env);
        command.args(["run-once", "fetch", "--data", &data]);
        tokio::task::spawn_blocking(move || command.output().expect("run taskhost"))
    };
    let denied = run_once(&env).await.expect("join");
    assert!(!denied.status.success(), "no grant: the request is refused");
    let out = format!("{}{}", common::process::stdout(&denied), common::process::stderr(&denied));
    assert!(out.contains("denied") && out.contains("is not granted to handler fetch"), "{out}");
    env.set_config(&grant(&format!("[\"{}\"]", server.url("")), "")).await;
    let granted = run_once(&env).await.expect("join");
    let out = format!("{}{}", common::process::stdout(&granted), common::process::stderr(&granted));
    assert!(granted.status.success(), "{out}");
    assert!(out.contains(&format!("[host] http POST {}/echo -> 200", server.url(""))), "{out}");
    assert_eq!(server.seen().len(), 1, "one request reached the server: the granted one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_is_verified_against_the_destinations_name_and_the_grants_roots() {
    let ca = common::http::TestCa::new();
    let server = HttpServer::start_tls("127.0.0.1", &ca.issue(&["localhost"])).await;
    let port = server.addr.port();
    let env = Env::new(&["fetch", "echo"]).await;
    let ca_file = env.dir.path().join("test-ca.pem");
    std::fs::write(&ca_file, &ca.pem).expect("write the CA");
    let allow = format!(
        "[{{ url = \"https://localhost:{port}\", addresses = [\"127.0.0.1\", \"::1\"] }}, \"https://127.0.0.1:{port}\"]"
    );
    let mut env = env;
    env.set_config(&grant(&allow, &format!("ca_file = \"{}\"\n", ca_file.display()))).await;
    let run =
        fetch(&env, json!({"url": format!("https://localhost:{port}/echo"), "method": "POST", "body": "tls"})).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(results(&run)["body"], "tls");
    // The certificate names localhost only: the same server by its address is refused.
    let run = fetch(&env, json!({"url": format!("https://127.0.0.1:{port}/echo")})).await;
    assert_eq!(code(&run), Some("request-failed"), "{run:?}");
    assert!(logs(&run).contains("(TLS certificate error)"), "{}", logs(&run));
    // Without the grant's roots, the test CA is no one's.
    env.set_config(&grant(&allow, "")).await;
    let run = fetch(&env, json!({"url": format!("https://localhost:{port}/echo")})).await;
    assert_eq!(code(&run), Some("request-failed"), "{run:?}");
    assert!(logs(&run).contains("(TLS certificate error)"), "{}", logs(&run));
    assert_eq!(server.seen().len(), 1, "only the verified connection carried a request");
}
