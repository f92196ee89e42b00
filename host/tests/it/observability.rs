//! Observability. Prometheus metrics: `serve` answers `/metrics` with what it queued and gauges read from the
//! database, a worker with `--metrics ADDR` with its runs by outcome, their durations, waits and
//! fuel, and its plugin loads. Real processes and a real SQLite file; every sample line is
//! checked to be in the text format. Tracing: what is logged during a run carries its span, and
//! with `--otlp` each run is a span sent to an OpenTelemetry collector (one played here by a
//! socket that reads OTLP/HTTP JSON).

use crate::common;

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::process::{signal, spawn_worker, wait_exit, Killed};
use common::served::Served;
use common::{wait_until, Env};

/// `GET http://ADDR/metrics`: the status and the body.
fn scrape(addr: &str) -> (u16, String) {
    scrape_with(addr, None)
}

fn scrape_with(addr: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n").expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    if status != 200 {
        return (status, body.to_string());
    }
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    for line in body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line:?}"));
        assert!(value.parse::<f64>().is_ok() || value == "+Inf", "not a number in {line:?}");
        let name_ends = series.find('{').unwrap_or(series.len());
        assert!(series[..name_ends].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'), "{line:?}");
        assert!(name_ends == series.len() || series.ends_with('}'), "{line:?}");
    }
    (status, body.to_string())
}

/// A worker with `--metrics 127.0.0.1:0`, and the address it says it serves them on.
fn worker_with_metrics(env: &Env) -> (Killed, String) {
    let mut worker = spawn_worker(env, &["--metrics", "127.0.0.1:0"]);
    let err = worker.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr = loop {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("the worker says where its metrics are");
        if let Some(rest) = line.split("serving metrics on http://").nth(1) {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    (worker, addr)
}

fn has(body: &str, sample: &str) -> bool {
    body.lines().any(|l| l == sample)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_workers_export_what_they_did_and_what_the_queue_holds() {
    let env = Env::new(&["echo"]).await;
    let served = Served::start(&env, "127.0.0.1:0");
    let server = served.base.trim_start_matches("http://").trim_end_matches("/api/v1").to_string();
    let (worker, metrics) = worker_with_metrics(&env);
    let two = r#"{"tasks": [{"handler": "echo", "data": {"n": 1}}, {"handler": "echo", "data": {"n": 2}}]}"#;
    assert_eq!(served.call("POST", "/tasks", None, Some(two)).0, 201);
    assert_eq!(served.call("POST", "/queues/held/pause", None, None).0, 200);
    assert_eq!(served.call("POST", "/tasks", None, Some(r#"{"handler": "echo", "queue": "held"}"#)).0, 201);
    let done = "taskhost_runs_total{handler=\"echo\",queue=\"default\",outcome=\"success\"} 2";
    wait_until(Duration::from_secs(60), "the worker counts two successes", || async { has(&scrape(&metrics).1, done) })
        .await;

    let (status, worker_side) = scrape(&metrics);
    assert_eq!(status, 200);
    for sample in [
        "taskhost_runs_started_total{handler=\"echo\",queue=\"default\"} 2",
        "taskhost_run_duration_seconds_count{handler=\"echo\",queue=\"default\"} 2",
        "taskhost_run_wait_seconds_count{handler=\"echo\",queue=\"default\"} 2",
        "taskhost_run_fuel_count{handler=\"echo\"} 2",
        "taskhost_run_fuel_bucket{handler=\"echo\",le=\"+Inf\"} 2",
        "# TYPE taskhost_run_duration_seconds histogram",
    ] {
        assert!(has(&worker_side, sample), "{sample} in:\n{worker_side}");
    }
    assert!(worker_side.contains("taskhost_plugin_loads_total{outcome=\"ok\","), "{worker_side}");

    // The worker counts a run as it ends, a moment before the outcome's write lands.
    let written = "taskhost_tasks{status=\"success\"} 2";
    wait_until(Duration::from_secs(60), "both outcomes are written", || async { has(&scrape(&server).1, written) })
        .await;
    let (status, server_side) = scrape(&server);
    assert_eq!(status, 200);
    for sample in [
        "taskhost_tasks_added_total{queue=\"default\"} 2",
        "taskhost_tasks_added_total{queue=\"held\"} 1",
        "taskhost_tasks{status=\"success\"} 2",
        "taskhost_tasks{status=\"scheduled\"} 1",
        "taskhost_queue_depth{queue=\"held\",state=\"due\"} 1",
        "taskhost_queue_depth{queue=\"default\",state=\"due\"} 0",
        "taskhost_queue_paused{queue=\"held\"} 1",
        "taskhost_dead_letters{handler=\"echo\",queue=\"default\"} 0",
        "taskhost_runs_ended_total{handler=\"echo\",queue=\"default\",outcome=\"success\"} 2",
        "taskhost_handler_tasks{handler=\"echo\",queue=\"default\",state=\"scheduled\"} 0",
        "# TYPE taskhost_runs_ended_total counter",
        "taskhost_runners 1",
    ] {
        assert!(has(&server_side, sample), "{sample} in:\n{server_side}");
    }
    assert!(server_side.contains("taskhost_queue_lag_seconds{queue=\"held\"} "), "{server_side}");
    signal(&worker, "TERM");
    wait_exit(worker, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_read_token_when_the_operator_set_tokens() {
    let mut env = Env::new(&["echo"]).await;
    env.set_config("[api]\ntokens = [{ name = \"prom\", token = \"prom-0123456789abcdef\", role = \"read\" }]\n").await;
    let served = Served::start(&env, "127.0.0.1:0");
    let server = served.base.trim_start_matches("http://").trim_end_matches("/api/v1").to_string();
    let (status, answer) = scrape(&server);
    assert_eq!(status, 401, "{answer}");
    assert!(answer.contains("\"unauthorized\""), "{answer}");
    let (status, answer) = scrape_with(&server, Some("prom-0123456789abcdef"));
    assert_eq!(status, 200, "{answer}");
    assert!(has(&answer, "taskhost_runners 0"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_run_logs_carries_its_task_run_handler_and_attempt() {
    let env = Env::new(&["word-count"]).await;
    let id = env.app.client.add(taskhost::NewTask::new("word-count", r#"{"text": "a b c"}"#)).await.expect("add").id;
    let worker = spawn_worker(&env, &["--drain", "--log", "taskhost=debug", "--log-format", "json"]);
    let out = wait_exit(worker, Duration::from_secs(60)).await;
    let logs = String::from_utf8_lossy(&out.stderr);
    let line = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["fields"]["message"].as_str().is_some_and(|m| m.starts_with("guest: counted 3 words")))
        .unwrap_or_else(|| panic!("the guest's line is logged:\n{logs}"));
    let span = &line["span"];
    assert_eq!(span["name"], "run", "{line}");
    assert_eq!((span["task_id"].as_i64(), span["attempt"].as_i64()), (Some(id), Some(1)), "{line}");
    assert_eq!((&span["handler"], &span["queue"]), (&serde_json::json!("word-count"), &serde_json::json!("default")));
    assert!(span["run_id"].as_i64().is_some(), "{line}");
}

/// An OTLP/HTTP collector: each request's path and body, as they come.
fn collector() -> (String, std::sync::mpsc::Receiver<(String, String)>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
            let mut head = Vec::new();
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                head.push(std::mem::take(&mut line));
            }
            let length = head
                .iter()
                .find_map(|h| h.to_ascii_lowercase().strip_prefix("content-length:").map(|n| n.trim().to_string()))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let path = head.first().and_then(|l| l.split_whitespace().nth(1)).unwrap_or_default().to_string();
            let _ =
                stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
            let _ = tx.send((path, String::from_utf8_lossy(&body).into_owned()));
        }
    });
    (addr, rx)
}

/// An OTLP attribute's value as text, whatever its type.
fn attribute(attributes: &serde_json::Value, key: &str) -> Option<String> {
    let value = &attributes.as_array()?.iter().find(|a| a["key"] == key)?["value"];
    let inner = value.as_object()?.values().next()?;
    Some(inner.as_str().map_or_else(|| inner.to_string(), str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_otlp_each_run_is_a_span_sent_to_the_collector() {
    let env = Env::new(&["word-count"]).await;
    let id = env.app.client.add(taskhost::NewTask::new("word-count", r#"{"text": "a b c"}"#)).await.expect("add").id;
    let (addr, received) = collector();
    let worker = spawn_worker(&env, &["--drain", "--otlp", &format!("http://{addr}")]);
    let out = wait_exit(worker, Duration::from_secs(60)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Spans are batched and the last batch leaves at exit.
    let (path, body) = received.recv_timeout(Duration::from_secs(10)).expect("spans were sent");
    assert_eq!(path, "/v1/traces", "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let resource = &doc["resourceSpans"][0];
    assert_eq!(attribute(&resource["resource"]["attributes"], "service.name").as_deref(), Some("taskhost"), "{doc}");
    let spans: Vec<&serde_json::Value> = resource["scopeSpans"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["spans"].as_array().into_iter().flatten())
        .collect();
    let run = spans.iter().find(|s| s["name"] == "run").unwrap_or_else(|| panic!("a run span in {doc}"));
    let of = |key| attribute(&run["attributes"], key);
    assert_eq!(of("task_id"), Some(id.to_string()), "{run}");
    assert_eq!((of("handler").as_deref(), of("queue").as_deref()), (Some("word-count"), Some("default")), "{run}");
    assert_eq!((of("attempt").as_deref(), of("outcome").as_deref()), (Some("1"), Some("success")), "{run}");

    // A URL it cannot use is one clear line, before anything runs.
    let o = common::taskhost_command(&env).args(["--otlp", "https://collector.example", "list"]).output().expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("https is not built in"), "{err}");
}
