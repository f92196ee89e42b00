//! A Server-Sent Events stream of a live `serve` (`GET /api/v1/events`), read on its own thread:
//! each event's name and data as it arrives, until the server ends the stream.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::served::Served;

/// An open event stream.
pub struct Events {
    /// The answer's status and head (lowercase).
    pub status: u16,
    pub head: String,
    rx: Receiver<(String, Value)>,
}

impl Events {
    /// Open `path` (under the API's base) as HTTP/1.0, so the body is the events themselves,
    /// not chunks, and ends when the server closes it.
    pub fn open(served: &Served, path: &str) -> Events {
        let host = served.host();
        let path = format!("{}{path}", served.base.split_once(&host).map_or("", |(_, p)| p));
        let mut s = TcpStream::connect(&host).expect("connect");
        let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n");
        s.write_all(request.as_bytes()).expect("send");
        let mut reader = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).expect("head") == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let (mut name, mut data) = (String::new(), String::new());
            for line in reader.lines().map_while(Result::ok) {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                } else if line.is_empty() && !data.is_empty() {
                    let value = serde_json::from_str(&data).unwrap_or(Value::String(data.clone()));
                    if tx.send((std::mem::take(&mut name), value)).is_err() {
                        return;
                    }
                    data.clear();
                }
            }
        });
        Events { status, head: head.to_ascii_lowercase(), rx }
    }

    /// The next event within `within`; None once the stream ended. Panics when none comes.
    pub fn next(&self, within: Duration) -> Option<(String, Value)> {
        match self.rx.recv_timeout(within) {
            Ok(event) => Some(event),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no event within {within:?}"),
        }
    }

    /// The `task` events up to and including the first for which `done` holds, within `within`.
    pub fn until(&self, within: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = match self.rx.recv_timeout(left) {
                Ok(event) => event,
                Err(e) => panic!("{what}: not told within {within:?} ({e}); told {seen:?}"),
            };
            if event.0 == "task" {
                seen.push(event.1);
                if done(seen.last().unwrap_or(&Value::Null)) {
                    return seen;
                }
            }
        }
    }
}
