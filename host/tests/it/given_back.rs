//! A full `serve` gives back a kept-alive connection for a client waiting for a slot (`kept.rs`):
//! one, idle or the next to be answered, never a request in flight. Real `serve` processes on
//! real SQLite files, spoken to over raw sockets.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::served::{until_closed, Served};
use common::Env;
use serde_json::json;
use taskhost::NewTask;

/// Reads `s` until the server has sent `told` (within 30 s), failing if it closes first.
fn answered(s: &mut TcpStream, told: &str) {
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(told) {
        let n = s.read(&mut buf).expect("an answer within 30 s");
        assert!(n > 0, "closed before its answer: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}

/// Whether a kept-alive connection still answers a request (false: the server had closed it).
fn still_serves(mut s: TcpStream, host: &str) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    if s.write_all(format!("GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).is_err() {
        return false;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(r#"{"status":"ok"}"#) {
        match s.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return false,
            Err(e) => panic!("no answer nor a close within 30 s: {e}"),
        }
    }
    true
}

/// A client's kept-alive connections do not hold the server's slots: with three allowed, all
/// idle after an answer, a fourth client is answered at once (not after the hour's header
/// timeout), and one of the idle ones is closed, only one. A connection whose wait is in flight is not, and its
/// wait is answered at the task's end; nor is a new one that has sent nothing yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_kept_alive_connections_are_closed_when_a_new_one_waits_for_a_slot() {
    let env = Env::new(&["echo"]).await;
    let args = ["--listen", "127.0.0.1:0", "--max-connections", "3", "--header-timeout", "3600s"];
    let served = Served::start_with(&env, &args, None);
    let host = served.host();
    let send = |s: &mut TcpStream, path: &str| {
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).expect("send");
    };
    let health = r#"{"status":"ok"}"#;
    let kept_alive = || {
        let mut s = TcpStream::connect(&host).expect("connect");
        send(&mut s, "/api/v1/health");
        answered(&mut s, health);
        s
    };
    let idle: Vec<TcpStream> = (0..3).map(|_| kept_alive()).collect();
    let (status, answer) = served.call("GET", "/health", None, None);
    assert_eq!((status, &answer), (200, &json!({"status": "ok"})), "a fourth client beside three idle connections");
    // One gave its slot back, having sent nothing more; the other two are still their client's.
    let open: Vec<bool> = idle.into_iter().map(|s| still_serves(s, &host)).collect();
    assert_eq!(open.iter().filter(|o| !**o).count(), 1, "exactly one closed: {open:?}");
    // A wait in flight and a connection yet to send its request hold theirs: the next client
    // takes the idle one's slot only.
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let mut waiting = TcpStream::connect(&host).expect("connect");
    send(&mut waiting, &format!("/api/v1/tasks/{id}?wait=60s"));
    let mut fresh = TcpStream::connect(&host).expect("connect");
    let other = kept_alive();
    let (status, task) = served.call("GET", &format!("/tasks/{id}"), None, None);
    assert_eq!((status, &task["task"]["state"]), (200, &json!("scheduled")), "{task}");
    assert_eq!(until_closed(other, Duration::from_secs(30)), "");
    send(&mut fresh, "/api/v1/health");
    answered(&mut fresh, health);
    env.app.store.cancel_tasks(&[id], env.clock.now()).await.expect("cancel");
    answered(&mut waiting, r#""state":"cancelled""#);
}

/// A request in flight when a client waits for a slot is finished, not cut: with one connection
/// allowed, a task posted with its body sent in two parts is queued and answered while a second
/// client waits, then the connection closes and the second client is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_when_a_client_waits_for_a_slot_is_answered_then_its_connection_closes() {
    let env = Env::new(&["echo"]).await;
    let args = ["--listen", "127.0.0.1:0", "--max-connections", "1", "--header-timeout", "3600s"];
    let served = Served::start_with(&env, &args, None);
    let host = served.host();
    let body = r#"{"handler": "echo", "data": {"n": 1}}"#;
    let (first, rest) = body.split_at(10);
    let mut posting = TcpStream::connect(&host).expect("connect");
    let head = format!(
        "POST /api/v1/tasks HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    posting.write_all(format!("{head}{first}").as_bytes()).expect("send the head and part of the body");
    let waiting = {
        let served = served.handle();
        std::thread::spawn(move || served.call("GET", "/health", None, None))
    };
    posting.write_all(rest.as_bytes()).expect("send the rest");
    let sent = until_closed(posting, Duration::from_secs(30));
    assert!(sent.starts_with("HTTP/1.1 201") || sent.starts_with("HTTP/1.1 200"), "{sent}");
    let (status, answer) = waiting.join().expect("the waiting client");
    assert_eq!((status, &answer), (200, &json!({"status": "ok"})), "the waiting client is answered");
    assert_eq!(env.app.store.list_tasks(&Default::default()).await.expect("list").len(), 1, "the task was queued");
}

/// Only one connection a waiting client: with three allowed, two waits in flight and a new
/// connection yet to send its request, a fourth client waits; at the task's end one wait's
/// connection gives its slot back, the other's still serves, and both waits, the new connection's
/// request and the fourth client are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_is_given_back_for_a_client_waiting_for_a_slot_not_every_one_answered() {
    let env = Env::new(&["echo"]).await;
    let args = ["--listen", "127.0.0.1:0", "--max-connections", "3", "--header-timeout", "3600s"];
    let served = Served::start_with(&env, &args, None);
    let host = served.host();
    let id = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let waits: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(&host).expect("connect");
            let ask = format!("GET /api/v1/tasks/{id}?wait=60s HTTP/1.1\r\nHost: {host}\r\n\r\n");
            s.write_all(ask.as_bytes()).expect("send");
            s
        })
        .collect();
    let counted = "taskhost_api_waiting_requests 2\n";
    common::wait_until(Duration::from_secs(30), "two waits", || async { served.page("/metrics").2.contains(counted) })
        .await;
    let fresh = TcpStream::connect(&host).expect("connect");
    let fourth = {
        let served = served.handle();
        std::thread::spawn(move || served.call("GET", "/health", None, None))
    };
    env.app.store.cancel_tasks(&[id], env.clock.now()).await.expect("cancel");
    let mut open = Vec::new();
    for mut s in waits {
        answered(&mut s, r#""state":"cancelled""#);
        open.push(still_serves(s, &host));
    }
    assert_eq!(open.iter().filter(|o| !**o).count(), 1, "exactly one wait's connection closed: {open:?}");
    let (status, answer) = fourth.join().expect("the fourth client");
    assert_eq!((status, &answer), (200, &json!({"status": "ok"})), "the waiting client is answered");
    assert!(still_serves(fresh, &host), "the new connection's request is answered");
}
