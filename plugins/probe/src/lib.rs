//! Hostile: reaches for what it was not given. The task data picks the probe:
//! `{"read": PATH}`, `{"write": PATH}`, `{"env": NAME}`, `{"connect": "HOST:PORT"}` (with
//! `"send": TEXT`: writes it, reads the answer to its end), `{"udp": "HOST:PORT", "send": TEXT}`
//! (one datagram, one answer back),
//! `{"sleep_ms": N}` (blocks in a host call), `{"hold_ms": N}` (reports 1% progress, then
//! sleeps: the host can tell it is running), `{"steps": N, "step_ms": M}` (N steps of M ms,
//! reporting progress and logging a line after each: a task that moves while watched), `{"log_lines": N}` (a log flood),
//! `{"sockets": N}` (creates up to N TCP sockets and holds them; reports how many it got),
//! `{"pollables": N}` (creates N timers' pollables and holds them all), `{"reread": N}` (calls
//! `dependencies` N times, keeping nothing: reports how many calls were answered, and the refusal),
//! `{"scatter": N}` (counts the pages of its memory an earlier run left written, then writes every
//! other page of its initialized memory and N pages, each apart, of its zeroed memory).
//! A refused capability ends the run with code `refused`.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

use std::time::Duration;

use taskhost::plugin::host::log;
use taskhost::plugin::types::LogLevel;

struct Probe;

/// Memory pages as the host resets them (4 KiB), and statics spanning many of them: one the
/// component's image fills with [`FILL`], one zeroed. `UnsafeCell`: written through raw pointers.
const PAGE: usize = 4096;
const FILL: u8 = 0x5a;
struct Pages<const N: usize>(std::cell::UnsafeCell<[u8; N]>);
// SAFETY: a component runs on one thread.
unsafe impl<const N: usize> Sync for Pages<N> {}
static FILLED: Pages<{ 80 * PAGE }> = Pages(std::cell::UnsafeCell::new([FILL; 80 * PAGE]));
static ZEROED: Pages<{ 1200 * PAGE }> = Pages(std::cell::UnsafeCell::new([0; 1200 * PAGE]));

impl<const N: usize> Pages<N> {
    /// Pages whose byte 17 is not `want`; then `mark` written to every other page's, `limit` at most.
    fn scatter(&self, want: u8, mark: u8, limit: usize) -> (usize, usize) {
        let base = self.0.get().cast::<u8>();
        let pages = N / PAGE;
        // SAFETY: every offset is inside the static; volatile so each page is really touched.
        let stale = (0..pages).filter(|p| unsafe { std::ptr::read_volatile(base.add(p * PAGE + 17)) } != want).count();
        let written = (0..pages).step_by(2).take(limit).inspect(|p| unsafe {
            std::ptr::write_volatile(base.add(p * PAGE + 17), mark);
        });
        (stale, written.count())
    }
}

fn denied(what: &str, e: impl std::fmt::Display) -> HandlerError {
    HandlerError { code: "refused".into(), message: format!("{what}: {e}"), retryable: false }
}

fn ok(v: serde_json::Value) -> Result<Option<String>, HandlerError> {
    Ok(Some(v.to_string()))
}

impl Guest for Probe {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).unwrap_or_default();
        let s = |k: &str| data.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let n = |k: &str| data.get(k).and_then(|v| v.as_u64());
        if let Some(path) = s("read") {
            let text = std::fs::read_to_string(&path).map_err(|e| denied(&format!("reading {path}"), e))?;
            return ok(serde_json::json!({ "read": text }));
        }
        if let Some(path) = s("write") {
            std::fs::write(&path, b"written by a guest").map_err(|e| denied(&format!("writing {path}"), e))?;
            return ok(serde_json::json!({ "wrote": path }));
        }
        if let Some(name) = s("env") {
            let value = std::env::var(&name).map_err(|e| denied(&format!("environment variable {name}"), e))?;
            return ok(serde_json::json!({ "env": value }));
        }
        if let Some(addr) = s("connect") {
            use std::io::{Read, Write};
            let mut stream =
                std::net::TcpStream::connect(&addr).map_err(|e| denied(&format!("connecting to {addr}"), e))?;
            let mut received = String::new();
            if let Some(text) = s("send") {
                stream.write_all(text.as_bytes()).map_err(|e| denied("sending", e))?;
                stream.shutdown(std::net::Shutdown::Write).map_err(|e| denied("shutting down", e))?;
                stream.take(1 << 16).read_to_string(&mut received).map_err(|e| denied("receiving", e))?;
            }
            return ok(serde_json::json!({ "connected": addr, "received": received }));
        }
        if let Some(addr) = s("udp") {
            let socket = std::net::UdpSocket::bind("0.0.0.0:0").map_err(|e| denied("binding a UDP socket", e))?;
            let text = s("send").unwrap_or_default();
            socket.send_to(text.as_bytes(), &addr).map_err(|e| denied(&format!("sending to {addr}"), e))?;
            let mut buf = [0u8; 2048];
            let (n, from) = socket.recv_from(&mut buf).map_err(|e| denied("receiving", e))?;
            let received = String::from_utf8_lossy(&buf[..n]).to_string();
            return ok(serde_json::json!({ "sent_to": addr, "from": from.to_string(), "received": received }));
        }
        if let Some(steps) = n("steps").filter(|s| *s > 0) {
            let ms = n("step_ms").unwrap_or(100);
            for i in 1..=steps {
                std::thread::sleep(Duration::from_millis(ms));
                taskhost::plugin::host::set_progress((i * 100 / steps).min(100) as u8);
                log(LogLevel::Info, &format!("step {i} of {steps}"));
            }
            return ok(serde_json::json!({ "steps": steps }));
        }
        if let Some(ms) = n("hold_ms") {
            taskhost::plugin::host::set_progress(1);
            std::thread::sleep(Duration::from_millis(ms));
            return ok(serde_json::json!({ "held_ms": ms }));
        }
        if let Some(times) = n("reread") {
            for call in 0..times {
                if let Err(e) = taskhost::plugin::host::dependencies() {
                    return ok(serde_json::json!({ "calls": call, "refused": e }));
                }
            }
            return ok(serde_json::json!({ "calls": times }));
        }
        if let Some(ms) = n("sleep_ms") {
            std::thread::sleep(Duration::from_millis(ms));
            return ok(serde_json::json!({ "slept_ms": ms }));
        }
        if let Some(count) = n("sockets") {
            use wasi::sockets::network::IpAddressFamily;
            use wasi::sockets::tcp_create_socket::create_tcp_socket;
            let mut held = Vec::new();
            let mut error = None;
            for _ in 0..count {
                match create_tcp_socket(IpAddressFamily::Ipv4) {
                    Ok(s) => held.push(s),
                    Err(e) => {
                        error = Some(format!("{e:?}"));
                        break;
                    }
                }
            }
            return ok(serde_json::json!({ "sockets": held.len(), "error": error }));
        }
        if let Some(count) = n("pollables") {
            let held: Vec<_> =
                (0..count).map(|_| wasi::clocks::monotonic_clock::subscribe_duration(1_000_000_000)).collect();
            return ok(serde_json::json!({ "pollables": held.len() }));
        }
        if let Some(limit) = n("scatter") {
            let (stale_filled, filled) = FILLED.scatter(FILL, 0x33, usize::MAX);
            let (stale_zeroed, zeroed) = ZEROED.scatter(0, 0x33, usize::try_from(limit).unwrap_or(usize::MAX));
            return ok(serde_json::json!({ "stale": stale_filled + stale_zeroed, "written": filled + zeroed }));
        }
        if let Some(lines) = n("log_lines") {
            let line = "x".repeat(1000);
            for _ in 0..lines {
                log(LogLevel::Info, &line);
            }
            return ok(serde_json::json!({ "logged": lines }));
        }
        ok(serde_json::json!({}))
    }
}

export!(Probe);
