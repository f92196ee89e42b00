//! A live `taskhost serve` process, and plain HTTP/1.1 requests to its API.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{taskhost_command, Env};

/// A `taskhost serve` process and the API's base URL it printed.
pub struct Served {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT/api/v1`
    pub base: String,
}

impl Served {
    pub fn start(env: &Env, listen: &str) -> Served {
        Self::start_with(env, &["--listen", listen], None)
    }

    /// `serve` with these arguments, started under this soft limit of open files if one is given.
    pub fn start_with(env: &Env, args: &[&str], soft_open_files: Option<u64>) -> Served {
        let mut command = taskhost_command(env);
        command.arg("serve").args(args).env("TASKHOST_TEST_SECRET", "hunter2-value");
        if let Some(soft) = soft_open_files {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit runs between fork and exec, on a struct of this closure's.
            unsafe {
                command.pre_exec(move || {
                    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                    libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
                    limit.rlim_cur = soft;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                    Ok(())
                });
            }
        }
        Self::spawn(&mut command)
    }

    /// `serve` as `command` starts it.
    pub fn spawn(command: &mut std::process::Command) -> Served {
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn serve");
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("serve says where it listens");
        let base = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        Served { child: Some(child), base }
    }

    /// Another handle on the same server, for requests from another thread (it does not own
    /// the process: dropping it stops nothing).
    pub fn handle(&self) -> Served {
        Served { child: None, base: self.base.clone() }
    }

    /// The server's process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether the server's process has exited.
    pub fn exited(&mut self) -> bool {
        self.child.as_mut().is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// One request: its status and JSON body.
    pub fn call(&self, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> (u16, Value) {
        let body = body.unwrap_or("");
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        let head = format!("{auth}Content-Length: {}\r\n", body.len());
        self.raw(method, path, &head, body)
    }

    /// A request with these header lines (each ending in CRLF) and body: its status and JSON body.
    pub fn raw(&self, method: &str, path: &str, headers: &str, body: &str) -> (u16, Value) {
        let (status, head, rest) = self.exchange(method, &format!("/api/v1{path}"), headers, body);
        assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{head}\r\n\r\n{rest}");
        (status, serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{e}: {head}\r\n\r\n{rest}")))
    }

    /// `host:port` of the server.
    pub fn host(&self) -> String {
        self.base.trim_start_matches("http://").split('/').next().unwrap_or_default().to_string()
    }

    /// GET a path outside the API (`/`, `/ui/app.js`): status, head (lowercase) and body.
    pub fn page(&self, path: &str) -> (u16, String, String) {
        let (status, head, body) = self.exchange("GET", path, "", "");
        (status, head.to_ascii_lowercase(), body)
    }

    /// One HTTP/1.1 exchange; `Host` is the server's unless `headers` name one.
    pub fn exchange(&self, method: &str, path: &str, headers: &str, body: &str) -> (u16, String, String) {
        let host = self.host();
        let mut s = TcpStream::connect(&host).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let named = headers.to_ascii_lowercase().split("\r\n").any(|l| l.starts_with("host:"));
        let host_line = if named { String::new() } else { format!("Host: {host}\r\n") };
        let request = format!(
            "{method} {path} HTTP/1.1\r\n{host_line}Connection: close\r\nContent-Type: application/json\r\n\
             {headers}\r\n{body}"
        );
        s.write_all(request.as_bytes()).expect("send");
        let mut answer = String::new();
        s.read_to_string(&mut answer).expect("read");
        let (head, rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, head.to_string(), rest.to_string())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Everything the server sends on `s` until it closes the connection; a failure if it keeps it
/// open past the deadline.
pub fn until_closed(mut s: TcpStream, deadline: Duration) -> String {
    s.set_read_timeout(Some(deadline)).expect("timeout");
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server kept the connection open past {deadline:?}: {e}; sent {got:?}"),
    }
    String::from_utf8_lossy(&got).into_owned()
}
