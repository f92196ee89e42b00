//! Plain TCP and UDP under the operator's socket grant, through a real worker on a SQLite file:
//! echo servers on loopback started by the tests, the `probe` handler built from source
//! connecting with Rust's std. A socket reaches only a granted address and port; a granted name
//! reaches only what it resolves to, and loopback only when the grant lists it; each refusal
//! says what and where in the run's error and logs, and nothing reaches the server.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{drain_config, Env};
use serde_json::json;
use taskhost::model::{NewTask, Run, RunStatus};

/// Run one probe task to its end, then a good task the worker must also run.
async fn probe(env: &Env, data: serde_json::Value) -> Run {
    let id = env.app.client.add(NewTask::new("probe", data.to_string()).with_max_attempts(1)).await.expect("add").id;
    let next = env.app.client.add(NewTask::new("echo", "{}")).await.expect("add").id;
    let report = env.drain(drain_config()).await;
    assert_eq!(report.runs_finished, 2, "{report:?}");
    assert_eq!(env.app.client.show(next).await.expect("show").0.last_status, RunStatus::Success);
    env.app.client.show(id).await.expect("show").1.remove(0)
}

async fn env_with(config: &str) -> Env {
    let mut env = Env::new(&["probe", "echo"]).await;
    env.set_config(config).await;
    env
}

fn results(run: &Run) -> serde_json::Value {
    serde_json::from_str(run.results.as_deref().unwrap_or("null")).expect("results are JSON")
}

fn logs(run: &Run) -> &str {
    run.logs.as_deref().unwrap_or("")
}

fn message(run: &Run) -> &str {
    run.error_message.as_deref().unwrap_or("")
}

/// A TCP server on 127.0.0.1 answering `echo: ` and what it read; counts its connections.
struct TcpEcho {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl TcpEcho {
    async fn start() -> TcpEcho {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
        let port = listener.local_addr().expect("addr").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let _ = (&mut stream).take(1 << 16).read_to_end(&mut got).await;
                    let _ = stream.write_all(&[b"echo: ", &got[..]].concat()).await;
                });
            }
        });
        TcpEcho { port, connections }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_tcp_address_is_reached_and_logged_and_no_other_port_is() {
    let (server, other) = (TcpEcho::start().await, TcpEcho::start().await);
    let env =
        env_with(&format!("[handlers.probe.grants.sockets]\nallow = [\"tcp://127.0.0.1:{}\"]\n", server.port)).await;
    let run = probe(&env, json!({"connect": format!("127.0.0.1:{}", server.port), "send": "ping"})).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(results(&run)["received"], "echo: ping");
    assert!(
        logs(&run).contains(&format!("[host] socket tcp connect to 127.0.0.1:{}\n", server.port)),
        "{}",
        logs(&run)
    );

    let run = probe(&env, json!({"connect": format!("127.0.0.1:{}", other.port), "send": "ping"})).await;
    assert_eq!(run.error_code.as_deref(), Some("denied"), "{run:?}");
    let why = format!(
        "network access to 127.0.0.1:{} over TCP is not granted to handler probe; grants are set in the operator's \
         configuration ([handlers.probe.grants.sockets]",
        other.port
    );
    assert!(message(&run).starts_with(&why), "{}", message(&run));
    assert!(logs(&run).contains(&format!("[host] socket refused, denied: {why}")), "{}", logs(&run));
    assert_eq!(other.connections(), 0, "nothing reached the port not granted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_name_that_resolves_to_loopback_is_refused_unless_the_grant_lists_it() {
    let server = TcpEcho::start().await;
    let port = server.port;
    let mut env = env_with(&format!("[handlers.probe.grants.sockets]\nallow = [\"tcp://localhost:{port}\"]\n")).await;
    // localhost is granted by name, but it resolves to a loopback address the grant does not list.
    let run = probe(&env, json!({"connect": format!("localhost:{port}"), "send": "ping"})).await;
    assert_eq!(run.error_code.as_deref(), Some("denied"), "{run:?}");
    assert!(message(&run).contains(&format!(":{port} over TCP is not granted to handler probe")), "{}", message(&run));
    assert_eq!(server.connections(), 0, "nothing reached the server");

    // A name the grant does not hold is not even looked up.
    let run = probe(&env, json!({"connect": format!("ip6-localhost:{port}")})).await;
    assert_eq!(run.error_code.as_deref(), Some("denied"), "{run:?}");
    assert!(message(&run).starts_with("name lookup of \"ip6-localhost\" is not granted to handler probe"), "{run:?}");

    let allow = format!("{{ url = \"tcp://localhost:{port}\", addresses = [\"127.0.0.0/8\", \"::1/128\"] }}");
    env.set_config(&format!("[handlers.probe.grants.sockets]\nallow = [{allow}]\n")).await;
    let run = probe(&env, json!({"connect": format!("localhost:{port}"), "send": "ping"})).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(results(&run)["received"], "echo: ping");
    assert!(
        logs(&run).contains(&format!("[host] socket tcp connect to 127.0.0.1:{port} (localhost)")),
        "{}",
        logs(&run)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_reaches_a_granted_address_and_needs_a_udp_grant() {
    let server = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("bind");
    let port = server.local_addr().expect("addr").port();
    let received = Arc::new(AtomicUsize::new(0));
    let counted = received.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = server.recv_from(&mut buf).await {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = server.send_to(&[b"echo: ", &buf[..n]].concat(), from).await;
        }
    });
    let mut env = env_with(&format!("[handlers.probe.grants.sockets]\nallow = [\"tcp://127.0.0.1:{port}\"]\n")).await;
    let run = probe(&env, json!({"udp": format!("127.0.0.1:{port}"), "send": "gauge:1|g"})).await;
    assert_eq!(run.error_code.as_deref(), Some("denied"), "{run:?}");
    assert!(message(&run).starts_with("a UDP socket is not granted to handler probe"), "{}", message(&run));
    assert_eq!(received.load(Ordering::SeqCst), 0);

    env.set_config(&format!("[handlers.probe.grants.sockets]\nallow = [\"udp://127.0.0.1:{port}\"]\n")).await;
    let run = probe(&env, json!({"udp": format!("127.0.0.1:{port}"), "send": "gauge:1|g"})).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(results(&run)["received"], "echo: gauge:1|g");
    assert!(logs(&run).contains(&format!("[host] socket udp send to 127.0.0.1:{port}")), "{}", logs(&run));
    let run = probe(&env, json!({"udp": format!("127.0.0.1:{}", port ^ 1), "send": "x"})).await;
    assert_eq!(run.error_code.as_deref(), Some("denied"), "another port: {run:?}");
    assert_eq!(received.load(Ordering::SeqCst), 1, "only the granted datagram arrived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_past_the_grants_max_sockets_are_refused_as_socket_limit() {
    let env = env_with("[handlers.probe.grants.sockets]\nallow = [\"tcp://192.0.2.1:80\"]\nmax_sockets = 3\n").await;
    let run = probe(&env, json!({"sockets": 10})).await;
    assert_eq!(run.status, RunStatus::Success, "the handler carries on: {run:?}");
    assert_eq!(results(&run)["sockets"], 3, "{:?}", run.results);
    let line = "[host] socket refused, socket-limit: a TCP socket: more than the grant's max_sockets of 3";
    assert!(logs(&run).contains(line), "{}", logs(&run));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_waiting_on_a_silent_server_is_stopped_at_its_deadline() {
    // Accepts, then never answers nor closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let config = format!(
        "[handlers.probe]\nlimits = {{ deadline = \"1s\" }}\n[handlers.probe.grants.sockets]\nallow = [\"tcp://127.0.0.1:{port}\"]\n"
    );
    let env = env_with(&config).await;
    let run = probe(&env, json!({"connect": format!("127.0.0.1:{port}"), "send": "ping"})).await;
    assert_eq!((run.status, run.error_code.as_deref()), (RunStatus::Timeout, Some("deadline")), "{run:?}");
    assert!(logs(&run).contains(&format!("[host] socket tcp connect to 127.0.0.1:{port}")), "{}", logs(&run));
}
