//! HTTP requests over wasi:http, sent where the operator's grant for this handler allows.
//!
//! ```ignore
//! let response = taskhost::http::get("https://api.example.com/items").timeout_secs(10.0).send()?;
//! let items = response.error_for_status()?.json()?;
//! ```
//!
//! A request that gets no answer is an [`Error`] in the handler's terms: `request-denied` (not
//! granted; the run's code is the host's `denied`), `request-timeout` (retried),
//! `response-too-large` (past the grant's `max_response_bytes`; the run's code is the host's
//! `http-limit`) or `request-failed` (retried). [`Response::error_for_status`] makes a 5xx answer
//! `http-5xx` (retried) and a 4xx one `http-4xx` (not, but 408 and 429).
//!
//! wasi:http resources are freed children first (a body's stream before the body): the order
//! the host requires.

use std::time::Duration;

use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme};
use wasi::io::streams::StreamError;

use crate::{Error, Result, Value};

/// A request to send: [`get`], [`post`], [`request`], then options, then [`Request::send`].
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout: Option<Duration>,
}

/// A GET of `url`.
pub fn get(url: &str) -> Request {
    request("GET", url)
}

/// A POST to `url`.
pub fn post(url: &str) -> Request {
    request("POST", url)
}

/// A request with any method.
pub fn request(method: &str, url: &str) -> Request {
    let headers = vec![("user-agent".into(), "taskhost".into())];
    Request {
        method: method.to_ascii_uppercase(),
        url: url.into(),
        headers,
        body: Vec::new(),
        timeout: Some(Duration::from_secs(30)),
    }
}

impl Request {
    /// Add a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// Send `value` as a JSON body.
    pub fn json(mut self, value: &Value) -> Self {
        self.body = value.to_string().into_bytes();
        self.header("content-type", "application/json")
    }

    /// Send these bytes as the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The time to connect, to the first byte of the answer and between its bytes (default
    /// 30 s); None: the host's limits only.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// [`Request::timeout`] in seconds.
    pub fn timeout_secs(self, seconds: f64) -> Self {
        self.timeout(Duration::try_from_secs_f64(seconds).ok())
    }

    /// Send it and read the whole answer.
    pub fn send(self) -> Result<Response> {
        let failed = |code: &str, what: String, retryable: bool| Error {
            code: code.into(),
            message: format!("{} {}: {what}", self.method, self.url),
            retryable,
            snooze: None,
            waiting: false,
        };
        let (scheme, rest) = match self.url.split_once("://") {
            Some(("http", rest)) => (Scheme::Http, rest),
            Some(("https", rest)) => (Scheme::Https, rest),
            _ => return Err(failed("request-failed", "not an http:// or https:// URL".into(), false)),
        };
        let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
        let mut headers = self.headers.clone();
        if !self.body.is_empty() || matches!(self.method.as_str(), "POST" | "PUT" | "PATCH") {
            headers.push(("content-length".into(), self.body.len().to_string()));
        }
        let entries: Vec<(String, Vec<u8>)> = headers.into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
        let fields = Fields::from_list(&entries)
            .map_err(|e| failed("request-failed", format!("a header is refused ({e:?})"), false))?;
        let req = OutgoingRequest::new(fields);
        let method = match self.method.as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.into()),
        };
        let refused = || failed("request-failed", "the host refused its method or URL".into(), false);
        req.set_method(&method).map_err(|_| refused())?;
        req.set_scheme(Some(&scheme)).map_err(|_| refused())?;
        req.set_authority(Some(authority)).map_err(|_| refused())?;
        req.set_path_with_query(Some(path)).map_err(|_| refused())?;
        let out = req.body().map_err(|_| refused())?;
        let options = self.timeout.map(|t| {
            let o = RequestOptions::new();
            let ns = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX).max(1);
            let _ = o.set_connect_timeout(Some(ns));
            let _ = o.set_first_byte_timeout(Some(ns));
            let _ = o.set_between_bytes_timeout(Some(ns));
            o
        });
        let future = outgoing_handler::handle(req, options).map_err(|e| self.error(&e))?;
        if let Ok(stream) = out.write() {
            for chunk in self.body.chunks(4096) {
                // The host stopped taking the body: the answer says why.
                if stream.blocking_write_and_flush(chunk).is_err() {
                    break;
                }
            }
        }
        let _ = OutgoingBody::finish(out, None);
        future.subscribe().block();
        let response = match future.get() {
            Some(Ok(Ok(r))) => r,
            Some(Ok(Err(e))) => return Err(self.error(&e)),
            _ => return Err(failed("request-failed", "no response".into(), true)),
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let incoming = response.consume().map_err(|_| failed("request-failed", "no body".into(), true))?;
        let mut body = Vec::new();
        let mut broken = None;
        if let Ok(stream) = incoming.stream() {
            loop {
                match stream.blocking_read(64 << 10) {
                    Ok(chunk) => body.extend_from_slice(&chunk),
                    Err(StreamError::Closed) => break,
                    Err(StreamError::LastOperationFailed(e)) => {
                        broken = Some(match wasi::http::types::http_error_code(&e) {
                            Some(code) => self.error(&code),
                            None => self.broken(&e.to_debug_string()),
                        });
                        break;
                    }
                }
            }
        }
        drop(wasi::http::types::IncomingBody::finish(incoming));
        match broken {
            Some(e) => Err(e),
            None => Ok(Response { method: self.method, url: self.url, status, headers, body }),
        }
    }

    /// The error for a wasi:http error code.
    fn error(&self, code: &ErrorCode) -> Error {
        let at = format!("{} {}", self.method, self.url);
        match code {
            ErrorCode::HttpRequestDenied => {
                Error::fail("request-denied", format!("{at}: not granted to this handler by the operator"))
            }
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::HttpResponseTimeout
            | ErrorCode::DnsTimeout => Error::retry("request-timeout", format!("{at}: {code:?}")),
            ErrorCode::HttpResponseBodySize(_) => {
                Error::fail("response-too-large", format!("{at}: the response is over this handler's limit"))
            }
            other => Error::retry("request-failed", format!("{at}: {other:?}")),
        }
    }

    /// The error for a body that broke off: wasi:http gives no code for one, only text.
    fn broken(&self, text: &str) -> Error {
        let at = format!("{} {}", self.method, self.url);
        let text: String = text.chars().take(300).collect();
        if text.contains("body size exceeds limit") {
            Error::fail("response-too-large", format!("{at}: the response is over this handler's limit"))
        } else if text.contains("timeout") || text.contains("timed out") {
            Error::retry("request-timeout", format!("{at}: reading the response: {text}"))
        } else {
            Error::retry("request-failed", format!("{at}: reading the response: {text}"))
        }
    }
}

/// An answer, read whole.
#[derive(Debug, Clone)]
pub struct Response {
    pub method: String,
    pub url: String,
    pub status: u16,
    /// Lower-case names, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::fail("invalid-response", format!("{} {}: not JSON: {e}", self.method, self.url)))
    }

    /// The answer, or for a 4xx or 5xx one an error: `http-5xx` (retried), `http-4xx` (not, but
    /// 408 and 429).
    pub fn error_for_status(self) -> Result<Response> {
        if self.status < 400 {
            return Ok(self);
        }
        let s = self.status;
        let text: String = self.text().chars().take(500).collect();
        let message = format!("{} {} answered {s}: {text}", self.method, self.url);
        let code = if s >= 500 { "http-5xx" } else { "http-4xx" };
        Err(Error {
            code: code.into(),
            message,
            retryable: s >= 500 || s == 408 || s == 429,
            snooze: None,
            waiting: false,
        })
    }

    /// A 429 or 503 answer as a snooze ([`Error::snooze`]) after its `Retry-After` (seconds or
    /// an HTTP date; 10 s without one), any other answer as it is:
    /// `http::get(url).send()?.snooze_if_busy()?`.
    pub fn snooze_if_busy(self) -> Result<Response> {
        if self.status != 429 && self.status != 503 {
            return Ok(self);
        }
        // A server's longer Retry-After is cut to the longest snooze the host takes, 30 days.
        Err(Error::snooze(retry_after(self.header("retry-after")).min(Duration::from_secs(30 * 24 * 3600))))
    }
}

/// What a `Retry-After` asks for: seconds, or an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`)
/// from now; 10 s when absent or unreadable.
fn retry_after(value: Option<&str>) -> Duration {
    const BUSY: Duration = Duration::from_secs(10);
    let Some(v) = value.map(str::trim) else { return BUSY };
    if let Ok(secs) = v.parse::<u64>() {
        return Duration::from_secs(secs);
    }
    let Some(at) = http_date(v) else { return BUSY };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    Duration::from_secs(at.saturating_sub(now))
}

/// Seconds since 1970 of an IMF-fixdate, the form HTTP sends; None for anything out of range.
fn http_date(v: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let mut parts = v.split_whitespace().skip(1);
    let day: u64 = parts.next()?.parse().ok().filter(|d| (1..=31).contains(d))?;
    let name = parts.next()?;
    let month = MONTHS.iter().position(|m| *m == name)? as u64 + 1;
    let year: u64 = parts.next()?.parse().ok().filter(|y| (1970..=9999).contains(y))?;
    let mut hms = parts.next()?.split(':').map(|n| n.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm); every value is bounded above.
    let (y, mo) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let (era, yoe) = (y / 400, y % 400);
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}
