//! `taskhost serve` against careless and hostile clients, who need no token to connect: slow,
//! idle and half-sent requests are cut off, a thousand of them stop nothing, a `Host` that only
//! starts like loopback is refused, every answer says `nosniff` and none names the server's
//! paths, field errors name the field, and a page of large tasks ends when its bytes are spent.
//! Real `serve` processes on real SQLite files.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::served::{until_closed, Served};
use common::{taskhost_command_caching_in, Env};
use serde_json::{json, Value};
use taskhost::NewTask;

fn raise_own_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain calls on a struct of this function's.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_idle_and_half_sent_requests_are_cut_off_and_a_thousand_of_them_stop_nothing() {
    raise_own_open_files_limit();
    let env = Env::new(&["echo"]).await;
    let args = ["--listen", "127.0.0.1:0", "--header-timeout", "1s", "--request-timeout", "2s"];
    // Started under the usual soft limit of 1,024 open files, which it raises.
    let served = Served::start_with(&env, &args, Some(1024));
    let host = served.host();
    let mut slow = Vec::new();
    for i in 0..1_100 {
        let mut s = TcpStream::connect(&host).unwrap_or_else(|e| panic!("connection {i}: {e}"));
        s.write_all(b"GET /api/v1/hea").expect("half a request line");
        slow.push(s);
    }
    let (status, answer) = served.call("GET", "/health", None, None);
    assert_eq!((status, &answer), (200, &json!({"status": "ok"})), "health answers beside 1,100 slow clients");
    for s in slow {
        let sent = until_closed(s, Duration::from_secs(30));
        assert!(sent.is_empty() || sent.starts_with("HTTP/1.1 408"), "{sent}");
    }
    // A head trickled a line at a time is cut off like half a line.
    let mut trickled = TcpStream::connect(&host).expect("connect");
    trickled.write_all(format!("GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n").as_bytes()).expect("send");
    assert!(!until_closed(trickled, Duration::from_secs(30)).contains("200 OK"));
    // A kept-alive connection gets its answer, and is closed once it idles.
    let mut idle = TcpStream::connect(&host).expect("connect");
    idle.write_all(format!("GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).expect("send");
    let sent = until_closed(idle, Duration::from_secs(30));
    assert!(sent.starts_with("HTTP/1.1 200 OK") && sent.ends_with(r#"{"status":"ok"}"#), "{sent}");
    // A body sent in part is answered with a 408 at the request timeout.
    let mut body = TcpStream::connect(&host).expect("connect");
    let head = format!(
        "POST /api/v1/tasks HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    );
    body.write_all(format!("{head}{{\"handler\"").as_bytes()).expect("send");
    let sent = until_closed(body, Duration::from_secs(30));
    assert!(sent.starts_with("HTTP/1.1 408") && sent.contains("request-timeout"), "{sent}");
    assert_eq!(env.app.client.store().counts().await.expect("counts").scheduled, 0, "nothing was queued");
}

/// A client that sends many requests and reads none of the answers holds its connection only
/// until its answers have waited the request timeout: with one connection allowed, the next
/// client is answered then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_none_of_its_answers_loses_its_connection() {
    let env = Env::new(&["echo"]).await;
    let args = ["--listen", "127.0.0.1:0", "--request-timeout", "1s", "--max-connections", "1"];
    let served = Served::start_with(&env, &args, None);
    let host = served.host();
    let mut greedy = TcpStream::connect(&host).expect("connect");
    let one = format!("GET /api/openapi.json HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let pipeline = one.repeat(5_000);
    // Sent from a thread: the server stops reading them once its answers back up.
    let writer = {
        let mut greedy = greedy.try_clone().expect("clone");
        std::thread::spawn(move || greedy.write_all(pipeline.as_bytes()).is_ok())
    };
    let (status, answer) = served.call("GET", "/health", None, None);
    assert_eq!((status, &answer), (200, &json!({"status": "ok"})), "the next client is answered");
    let mut rest = Vec::new();
    greedy.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let _ = greedy.read_to_end(&mut rest);
    let answered = String::from_utf8_lossy(&rest).matches("HTTP/1.1 200 OK").count();
    assert!(answered < 5_000, "the greedy client's connection was dropped before all its answers");
    let _ = writer.join();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_only_starts_like_loopback_an_absolute_target_and_a_get_with_a_body_are_refused() {
    let env = Env::new(&["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let port = served.host().rsplit_once(':').map(|(_, p)| p.to_string()).expect("a port");
    for host in ["localhost:evil.example", &format!("127.0.0.1:{port}.evil.example"), "[::1].evil.example"] {
        let (status, answer) = served.raw("GET", "/health", &format!("Host: {host}\r\n"), "");
        assert_eq!((status, answer["error"]["code"].as_str()), (403, Some("forbidden-host")), "{host}: {answer}");
    }
    for host in ["localhost", &format!("127.0.0.1:{port}"), &format!("[::1]:{port}")] {
        assert_eq!(served.raw("GET", "/health", &format!("Host: {host}\r\n"), "").0, 200, "{host}");
    }
    // A GET with a body is refused before it waits, holding none of the bytes it announced.
    let (status, answer) = served.raw("GET", "/tasks/1?wait=60s", "Content-Length: 16777216\r\n", "{}");
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("body-not-allowed")), "{answer}");
    let (status, _, body) = served.exchange("GET", "http://evil.example/api/v1/health", "", "");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("absolute-target"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_says_nosniff_and_no_answer_names_the_servers_paths() {
    let env = Env::new(&["echo"]).await;
    std::fs::write(env.plugins.join("broken.wasm"), b"\0asm not really").expect("a broken plugin");
    let served = Served::start(&env, "127.0.0.1:0");
    for path in ["/api/v1/health", "/api/openapi.json", "/metrics", "/", "/api/v1/nothing", "/ui/app.js"] {
        let (_, head, _) = served.page(path);
        assert!(head.contains("x-content-type-options: nosniff"), "{path}: {head}");
    }
    let dir = env.plugins.display().to_string();
    let (status, answer) = served.call("POST", "/tasks", None, Some(r#"{"handler": "nope"}"#));
    assert_eq!(status, 400, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("nope.wasm") && !message.contains(&dir), "{answer}");
    let (status, answer) = served.call("POST", "/tasks", None, Some(r#"{"handler": "broken"}"#));
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("handler-broken")), "{answer}");
    assert!(!answer.to_string().contains(&dir), "{answer}");
    let (status, plugins) = served.call("GET", "/plugins", None, None);
    assert_eq!(status, 200, "{plugins}");
    assert!(!plugins.to_string().contains(&dir), "{plugins}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_errors_name_the_field_and_numbers_are_held_to_their_ranges() {
    let env = Env::new(&["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    for (body, named) in [
        (r#"{"handler": "echo", "at": 123}"#, "\"at\": invalid type: integer `123`, expected a string"),
        (r#"{"handler": "echo", "priority": "high"}"#, "\"priority\": invalid type"),
        (r#"{"handler": "echo", "run_timeout": "0s"}"#, "invalid run_timeout: 0s is out of range (1s to 1year)"),
        (r#"{"handler": "echo", "run_timeout": "1ns"}"#, "invalid run_timeout"),
        (r#"{"handler": "echo", "max_attempts": 2147483648}"#, "invalid max_attempts: 2147483648 is over the maximum"),
        (r#"{"handler": "echo", "max_attempts": 4294967296}"#, "\"max_attempts\": invalid value"),
        (r#"{"handler": "echo", "max_attempts": 0}"#, "invalid max_attempts: 0 is under the minimum of 1"),
        (r#"{"handler": "echo", "max_attempts": 2, "max_retries": 2}"#, "or its old name \"max_retries\", not both"),
        (r#"{"tasks": [{"handler": "echo"}, {"handler": "echo", "queue": 7}]}"#, "tasks[1]: \"queue\": invalid type"),
    ] {
        let (status, answer) = served.call("POST", "/tasks", None, Some(body));
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(message.contains(named), "{body}: {message}");
    }
    let (status, answer) = served.call("POST", "/tasks/cancel", None, Some(r#"{"queue": 5}"#));
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(status == 400 && message.starts_with("\"queue\": invalid type"), "{answer}");
    assert_eq!(env.app.client.store().counts().await.expect("counts").scheduled, 0, "nothing was queued");
    let ok = r#"{"handler": "echo", "run_timeout": "1s", "max_attempts": 2147483647}"#;
    assert_eq!(served.call("POST", "/tasks", None, Some(ok)).0, 201, "the bounds themselves are accepted");
    // The old name is read as the same number (0, which allowed one run, as 1).
    for (old, attempts) in [(4, 4), (0, 1)] {
        let body = format!(r#"{{"handler": "echo", "max_retries": {old}}}"#);
        let (status, answer) = served.call("POST", "/tasks", None, Some(&body));
        assert_eq!(status, 201, "{answer}");
        let (_, shown) = served.call("GET", &format!("/tasks/{}", answer["id"]), None, None);
        assert_eq!(shown["task"]["max_attempts"], attempts, "{shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_large_tasks_ends_when_its_bytes_are_spent_and_the_next_goes_on() {
    let env = Env::new(&["echo"]).await;
    let large = format!("{{\"blob\": \"{}\"}}", "x".repeat(900_000));
    let tasks: Vec<NewTask> = (0..7).map(|_| NewTask::new("echo", large.clone())).collect();
    env.app.client.add_many(tasks).await.expect("add");
    let served = Served::start(&env, "127.0.0.1:0");
    let (mut seen, mut after, mut pages) = (0, String::new(), 0);
    loop {
        let (status, page) = served.call("GET", &format!("/tasks?limit=1000{after}"), None, None);
        assert_eq!(status, 200);
        let n = page["tasks"].as_array().map_or(0, Vec::len);
        let bytes: usize = page["tasks"].as_array().into_iter().flatten().map(|t| t["data"].to_string().len()).sum();
        assert!(n >= 1 && bytes <= taskhost::api::PAGE_BYTES, "{n} tasks, {bytes} bytes");
        (seen, pages) = (seen + n, pages + 1);
        match page["next"].as_i64() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    assert_eq!((seen, pages), (7, 2), "four tasks fit a page of 4 MiB, three the next");
}

/// Queueing a handler is checked from its file once per version of it, and the plugins page
/// compiles nothing: the server's cache stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_is_checked_again_only_when_its_file_changes_and_the_plugins_page_compiles_nothing() {
    let env = Env::new(&["echo"]).await;
    let cache = env.dir.path().join("empty-cache");
    let mut command = taskhost_command_caching_in(&env, &cache);
    let served = Served::spawn(command.args(["serve", "--listen", "127.0.0.1:0"]));
    let task = Some(r#"{"handler": "echo"}"#);
    assert_eq!(served.call("POST", "/tasks", None, task).0, 201);
    let file = env.plugins.join("echo.wasm");
    let good = std::fs::read(&file).expect("read");
    std::fs::write(&file, b"\0asm\x0d\0\x01\0 a broken version").expect("replace");
    let (status, answer) = served.call("POST", "/tasks", None, task);
    assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("handler-broken")), "{answer}");
    std::fs::write(&file, &good).expect("restore");
    assert_eq!(served.call("POST", "/tasks", None, task).0, 201, "the good version again");
    let (status, plugins) = served.call("GET", "/plugins", None, None);
    let echo: &Value = &plugins["plugins"][0];
    assert_eq!(
        (status, &echo["name"], &echo["ok"], &echo["compiled"]),
        (200, &json!("echo"), &json!(true), &json!(false))
    );
    assert_eq!(echo["served_by"], json!(0), "{plugins}");
    let cached = std::fs::read_dir(&cache).map_or(0, |d| d.count());
    assert_eq!(cached, 0, "nothing was compiled");
}

/// Waits and event streams hold at most three quarters of the server's connections: with four,
/// a fourth long-held request is refused (503 `busy`), and a plain request is still answered;
/// with one, none is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_and_event_streams_never_hold_every_connection() {
    let env = Env::new(&["echo"]).await;
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let served = Served::start_with(&env, &["--listen", "127.0.0.1:0", "--max-connections", "4"], None);
    let host = served.host();
    let mut held = Vec::new();
    for path in
        [format!("/api/v1/tasks/{id}?wait=60s"), format!("/api/v1/tasks/{id}?wait=60s"), "/api/v1/events".into()]
    {
        let mut s = TcpStream::connect(&host).expect("connect");
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).expect("send");
        held.push(s);
    }
    let counted = "taskhost_api_waiting_requests 2\n";
    let streams = "taskhost_api_event_streams 1\n";
    common::wait_until(Duration::from_secs(30), "two waits and a stream", || async {
        let metrics = served.page("/metrics").2;
        metrics.contains(counted) && metrics.contains(streams)
    })
    .await;
    for path in [format!("/tasks/{id}?wait=1s"), "/events".into()] {
        let (status, answer) = served.raw("GET", &path, "", "");
        assert_eq!((status, answer["error"]["code"].as_str()), (503, Some("busy")), "{path}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("three quarters"), "{answer}");
        // Only a wait can be asked again without one; a stream is told to ask later.
        assert_eq!(message.ends_with("or without wait"), path.contains("wait="), "{path}: {message}");
    }
    let (status, task) = served.call("GET", &format!("/tasks/{id}"), None, None);
    assert_eq!((status, &task["task"]["id"]), (200, &json!(id)), "a plain read is answered beside them");
    // A wait for a task final already holds nothing: it is answered all the same.
    let done = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    env.app.store.cancel_tasks(&[done], env.clock.now()).await.expect("cancel");
    let (status, task) = served.call("GET", &format!("/tasks/{done}?wait=30s"), None, None);
    assert_eq!((status, &task["task"]["state"]), (200, &json!("cancelled")), "{task}");
    drop(held);
    // A server of one connection keeps it for requests answered at once: a wait may be asked
    // again without one (busy), a stream never opens there, so asking again is no use.
    let one = Served::start_with(&env, &["--listen", "127.0.0.1:0", "--max-connections", "1"], None);
    for (path, refused) in [(format!("/tasks/{id}?wait=1s"), (503, "busy")), ("/events".into(), (501, "no-streams"))] {
        let (status, answer) = one.raw("GET", &path, "", "");
        assert_eq!((status, answer["error"]["code"].as_str()), (refused.0, Some(refused.1)), "{path}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("one connection at a time"), "{path}: {message}");
    }
    let (status, task) = one.call("GET", &format!("/tasks/{done}?wait=30s"), None, None);
    assert_eq!((status, &task["task"]["state"]), (200, &json!("cancelled")), "{task}");
}

/// `[serve]` in the configuration file sets `serve`'s options, `listen` among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configuration_file_sets_where_serve_listens() {
    let mut env = Env::new(&["echo"]).await;
    env.set_config("[serve]\nlisten = \"127.0.0.1:0\"\nheader_timeout = \"5s\"\nmax_connections = 100\n").await;
    let served = Served::start_with(&env, &[], None);
    assert_eq!(served.call("GET", "/health", None, None).0, 200);
    env.set_config("[serve]\nheader_timeout = \"1ms\"\n").await;
    let o = common::taskhost_command(&env).args(["serve"]).output().expect("run");
    let err = common::process::stderr(&o);
    assert!(err.contains("[serve] header_timeout") && err.contains("at least 100ms"), "{err}");
}
