//! A small HTTP/1.1 server on a loopback address, for the network grant's tests. Each
//! connection carries one request; every request is recorded. Routes:
//! `/echo` (the request's body back), `/redirect?to=URL` (302), `/big?bytes=N` (N bytes, chunked),
//! `/big-announced?bytes=N` (N bytes with Content-Length), `/trickle` (1,000 bytes announced, one
//! a second), `/hang` (reads the request, never answers), `/busy?times=N&after=S` (429 with
//! `Retry-After: S` to the first N requests of that target, then 200 `ok`; with `&dated=1` the
//! Retry-After is the HTTP date S seconds past the answer's `Date`); anything else is 200 `ok`.
//! [`HttpServer::start_tls`] serves the same over TLS, with a certificate from [`TestCa`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio_rustls::rustls;

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub host: Option<String>,
    pub body_len: usize,
}

pub struct HttpServer {
    pub addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    /// Listen on `ip` (`127.0.0.1`, `127.0.0.2`, ...), on a free port.
    pub async fn start(ip: &str) -> HttpServer {
        Self::listen(ip, None).await
    }

    /// The same over TLS, presenting `cert` (signed by a [`TestCa`]).
    pub async fn start_tls(ip: &str, cert: &TestCert) -> HttpServer {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = rustls::pki_types::PrivateKeyDer::try_from(cert.key_der.clone()).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der.clone().into()], key)
            .expect("server certificate");
        Self::listen(ip, Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))).await
    }

    async fn listen(ip: &str, tls: Option<tokio_rustls::TlsAcceptor>) -> HttpServer {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind a loopback address");
        let addr = listener.local_addr().expect("local address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let record = record.clone();
                match &tls {
                    None => drop(tokio::spawn(serve(conn, record))),
                    Some(acceptor) => {
                        let accept = acceptor.accept(conn);
                        tokio::spawn(async move {
                            if let Ok(conn) = accept.await {
                                serve(conn, record).await
                            }
                        });
                    }
                }
            }
        });
        HttpServer { addr, seen, task }
    }

    /// `http://IP:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `IP:PORT`.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn query_number(target: &str, key: &str) -> usize {
    target
        .split_once('?')
        .and_then(|(_, q)| q.split('&').find_map(|kv| kv.strip_prefix(&format!("{key}="))))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A certificate authority made for one test, and certificates it signs.
pub struct TestCa {
    params: rcgen::CertificateParams,
    key: rcgen::KeyPair,
    /// The CA's certificate, PEM: what a grant's `ca_file` holds.
    pub pem: String,
}

pub struct TestCert {
    pub der: Vec<u8>,
    pub key_der: Vec<u8>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "taskhost test CA");
        let pem = params.self_signed(&key).expect("CA certificate").pem();
        TestCa { params, key, pem }
    }

    /// A server certificate for `names` (host names or IP addresses).
    pub fn issue(&self, names: &[&str]) -> TestCert {
        let key = rcgen::KeyPair::generate().expect("key");
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("certificate");
        TestCert { der: cert.der().to_vec(), key_der: key.serialize_der() }
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(conn: S, seen: Arc<Mutex<Vec<Seen>>>) {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let (mut host, mut length, mut chunked, mut content_type) = (None, 0usize, false, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).await.unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap_or((&h, ""));
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_string());
        match name.as_str() {
            "host" => host = Some(value),
            "content-length" => length = value.parse().unwrap_or(0),
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "content-type" => content_type = Some(value),
            _ => {}
        }
    }
    if target.starts_with("/unread") {
        // As a server that refuses a method (Python's http.server answers 501): it answers at once
        // and closes without reading the body.
        let mut conn = reader.into_inner();
        let _ = conn.write_all(b"HTTP/1.1 501 Not Implemented\r\nconnection: close\r\ncontent-length: 0\r\n\r\n").await;
        let _ = conn.shutdown().await;
        return;
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).await.unwrap_or(0) == 0 {
                break;
            }
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; n + 2];
            if n == 0 || reader.read_exact(&mut chunk).await.is_err() {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if length > 0 {
        body.resize(length, 0);
        let _ = reader.read_exact(&mut body).await;
    }
    if let Ok(mut s) = seen.lock() {
        s.push(Seen { method: method.clone(), target: target.clone(), host, body_len: body.len() });
    }
    let mut conn = reader.into_inner();
    let path = target.split('?').next().unwrap_or("");
    let head = |status: &str, extra: &str| format!("HTTP/1.1 {status}\r\nconnection: close\r\n{extra}\r\n");
    let _ = match path {
        // The body back, with its content type.
        "/echo" => {
            let kind = content_type.map(|t| format!("content-type: {t}\r\n")).unwrap_or_default();
            let h = head("200 OK", &format!("{kind}content-length: {}\r\n", body.len()));
            conn.write_all(&[h.as_bytes(), &body].concat()).await
        }
        // `?code=N`: that status, with a short body naming it.
        "/status" => {
            let code = query_number(&target, "code");
            let text = format!("status {code}");
            let h = head(&format!("{code} Status"), &format!("content-length: {}\r\n", text.len()));
            conn.write_all(format!("{h}{text}").as_bytes()).await
        }
        "/busy" => {
            let count = seen.lock().map(|s| s.iter().filter(|r| r.target == target).count()).unwrap_or(0);
            if count <= query_number(&target, "times") {
                let after = query_number(&target, "after");
                let retry = match target.contains("dated=1") {
                    false => format!("retry-after: {after}\r\n"),
                    true => {
                        let (now, form) = (chrono::Utc::now(), "%a, %d %b %Y %H:%M:%S GMT");
                        let then = now + chrono::Duration::seconds(after as i64);
                        format!("date: {}\r\nretry-after: {}\r\n", now.format(form), then.format(form))
                    }
                };
                let h = head("429 Too Many Requests", &format!("{retry}content-length: 4\r\n"));
                conn.write_all(format!("{h}busy").as_bytes()).await
            } else {
                conn.write_all(head("200 OK", "content-length: 2\r\n").as_bytes())
                    .await
                    .and(conn.write_all(b"ok").await)
            }
        }
        "/redirect" => {
            let to = target.split_once("to=").map(|(_, u)| u).unwrap_or("/");
            conn.write_all(head("302 Found", &format!("location: {to}\r\ncontent-length: 0\r\n")).as_bytes()).await
        }
        "/big" => {
            let mut left = query_number(&target, "bytes");
            let _ = conn.write_all(head("200 OK", "transfer-encoding: chunked\r\n").as_bytes()).await;
            let chunk = vec![b'b'; 64 << 10];
            while left > 0 {
                let n = left.min(chunk.len());
                let framed = [format!("{n:x}\r\n").as_bytes(), &chunk[..n], b"\r\n"].concat();
                if conn.write_all(&framed).await.is_err() {
                    return;
                }
                left -= n;
            }
            conn.write_all(b"0\r\n\r\n").await
        }
        "/big-announced" => {
            let n = query_number(&target, "bytes");
            let _ = conn.write_all(head("200 OK", &format!("content-length: {n}\r\n")).as_bytes()).await;
            conn.write_all(&vec![b'b'; n]).await
        }
        "/trickle" => {
            let _ = conn.write_all(head("200 OK", "content-length: 1000\r\n").as_bytes()).await;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            for _ in 0..1000 {
                tick.tick().await;
                if conn.write_all(b"t").await.is_err() {
                    return;
                }
            }
            Ok(())
        }
        "/hang" => {
            std::future::pending::<()>().await;
            Ok(())
        }
        _ => conn.write_all(head("200 OK", "content-length: 2\r\n").as_bytes()).await.and(conn.write_all(b"ok").await),
    };
    let _ = conn.shutdown().await;
}
