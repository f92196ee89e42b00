//! Hosts of their own on this machine, for tests where the network fails: a network namespace
//! joined to this one by a veth pair, whose link can be cut (iptables drops every packet both
//! ways, as a partition does) or slowed (the forwarder below holds each chunk back). Made and
//! torn down by the test; needs root and `ip` and `iptables` (`make test` installs them).
//!
//! The database servers listen on 127.0.0.1 alone, so a host reaches one through a forwarder in
//! the test process: it listens on this side's end of the host's link and connects to the
//! server. A server restart drops the forwarded connections as it would direct ones.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{}: {e}", args[0]));
    assert!(out.status.success(), "{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
}

/// Whether this process may make namespaces: a test that needs them fails without, never skips.
pub fn require_root() {
    assert!(super::process::is_root(), "network namespaces need root (the tests run as root in CI)");
    for tool in ["ip", "iptables"] {
        let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().expect("sh");
        assert!(found.status.success(), "{tool} is missing: scripts/test-services.sh installs it");
    }
}

/// A host: a network namespace with one link to this one.
pub struct Host {
    /// The namespace's name (`ip netns exec NAME ...`).
    pub name: String,
    /// This side's end of the link, where the host reaches this machine.
    pub gateway: Ipv4Addr,
    inside: String,
    outside: String,
}

impl Host {
    /// Host `index` (0 to 250) of this test process: 10.R.index.2 inside, .1 on this side.
    pub fn new(index: u8) -> Host {
        let pid = std::process::id() % 100_000;
        let subnet = 200 + (std::process::id() % 50) as u8;
        let (name, outside, inside) =
            (format!("th{pid}n{index}"), format!("th{pid}o{index}"), format!("th{pid}i{index}"));
        let gateway = Ipv4Addr::new(10, subnet, index, 1);
        let address = Ipv4Addr::new(10, subnet, index, 2);
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let _ = Command::new("ip").args(["link", "del", &outside]).output();
        sh(&["ip", "netns", "add", &name]);
        let host = Host { name: name.clone(), gateway, inside: inside.clone(), outside: outside.clone() };
        sh(&["ip", "link", "add", &outside, "type", "veth", "peer", "name", &inside]);
        sh(&["ip", "link", "set", &inside, "netns", &name]);
        sh(&["ip", "addr", "add", &format!("{gateway}/24"), "dev", &outside]);
        sh(&["ip", "link", "set", &outside, "up"]);
        host.exec(&["ip", "addr", "add", &format!("{address}/24"), "dev", &inside]);
        host.exec(&["ip", "link", "set", &inside, "up"]);
        host.exec(&["ip", "link", "set", "lo", "up"]);
        host.exec(&["ip", "route", "add", "default", "via", &gateway.to_string()]);
        host
    }

    fn exec(&self, args: &[&str]) {
        sh(&[&["ip", "netns", "exec", &self.name], args].concat());
    }

    /// `program` to be run on this host.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// Cut the link: every packet both ways is dropped, connections stall as across a real
    /// partition (no reset, no refusal).
    pub fn partition(&self) {
        self.exec(&["iptables", "-A", "OUTPUT", "-o", &self.inside, "-j", "DROP"]);
        self.exec(&["iptables", "-A", "INPUT", "-i", &self.inside, "-j", "DROP"]);
    }

    /// Make the link lossy: each packet, either way, is dropped with probability `p` (TCP
    /// retransmits: connections slow down and stall now and then).
    pub fn lossy(&self, p: f64) {
        let p = format!("{p}");
        for (chain, dir) in [("OUTPUT", "-o"), ("INPUT", "-i")] {
            let rule =
                [chain, dir, &self.inside, "-m", "statistic", "--mode", "random", "--probability", &p, "-j", "DROP"];
            self.exec(&[&["iptables", "-A"][..], &rule[..]].concat());
        }
    }

    /// Mend the link.
    pub fn heal(&self) {
        self.exec(&["iptables", "-F"]);
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
        let _ = Command::new("ip").args(["link", "del", &self.outside]).output();
    }
}

/// A forwarder from `listen` to `upstream`, holding each chunk back by its delay (0 at first).
/// Stops, with every connection it holds, when dropped.
pub struct Forwarder {
    delay_ms: Arc<AtomicU64>,
    accept: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> Forwarder {
        let listener = TcpListener::bind(listen).await.unwrap_or_else(|e| panic!("listen on {listen}: {e}"));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = delay_ms.clone();
        let accept = tokio::spawn(async move {
            // Dropped with the accept loop, the set stops every connection.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let delay = delay.clone();
                connections.spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else { return };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::select! {
                        _ = pipe(cr, sw, delay.clone()) => {}
                        _ = pipe(sr, cw, delay) => {}
                    }
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Forwarder { delay_ms, accept }
    }

    /// Hold each chunk back this long from now on, both ways.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn pipe(mut from: impl AsyncReadExt + Unpin, mut to: impl AsyncWriteExt + Unpin, delay: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let ms = delay.load(Ordering::SeqCst);
        if ms > 0 {
            // The injected latency itself, not a wait for something to happen.
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
