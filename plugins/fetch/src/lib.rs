//! Makes HTTP requests over raw wasi:http, for the network grant's tests. The task data:
//! `{"url": U}` (GET), with `"method"`, `"body"` (text) or `"body_bytes": N` (N bytes of `x`),
//! `"follow": N` (follow up to N redirects, each a new request), `"parallel": N` (N GETs of
//! `url` started at once, then each awaited), `"chunked": true` (the body sent without a length),
//! `"timeout_ms": N` (the request's connect, first-byte and between-bytes timeouts). Returns `{"status", "bytes", "body" (first 200
//! bytes), "hops"}`; a failed request ends the run with code `request-failed` and the wasi:http
//! error code in the message.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

use std::time::Duration;

use wasi::http::outgoing_handler;
use wasi::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingResponse, Method, OutgoingBody, OutgoingRequest,
    RequestOptions, Scheme,
};
use wasi::io::streams::StreamError;

struct Fetch;

fn failed(message: String) -> HandlerError {
    HandlerError { code: "request-failed".into(), message, retryable: false }
}

struct Url<'a> {
    scheme: Scheme,
    authority: &'a str,
    path: &'a str,
}

fn parse(url: &str) -> Result<Url<'_>, HandlerError> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| failed(format!("bad url {url}")))?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_string()),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    Ok(Url { scheme, authority, path })
}

/// Start one request; its body is written (and finished) before this returns.
fn start(
    method: &Method,
    url: &str,
    body: &[u8],
    timeout: Option<Duration>,
    chunked: bool,
) -> Result<FutureIncomingResponse, HandlerError> {
    let u = parse(url)?;
    let headers = Fields::new();
    if !body.is_empty() && !chunked {
        let _ = headers.set("content-length", &[body.len().to_string().into_bytes()]);
    }
    let req = OutgoingRequest::new(headers);
    let bad = |what: &str| failed(format!("the host refused the request's {what}"));
    req.set_method(method).map_err(|_| bad("method"))?;
    req.set_scheme(Some(&u.scheme)).map_err(|_| bad("scheme"))?;
    req.set_authority(Some(u.authority)).map_err(|_| bad("authority"))?;
    req.set_path_with_query(Some(u.path)).map_err(|_| bad("path"))?;
    let out = req.body().map_err(|_| bad("body"))?;
    let options = timeout.map(|t| {
        let o = RequestOptions::new();
        let ns = t.as_nanos() as u64;
        let _ = o.set_connect_timeout(Some(ns));
        let _ = o.set_first_byte_timeout(Some(ns));
        let _ = o.set_between_bytes_timeout(Some(ns));
        o
    });
    let future = outgoing_handler::handle(req, options).map_err(|e| failed(format!("handle: {e:?}")))?;
    {
        let stream = out.write().map_err(|_| bad("body stream"))?;
        for chunk in body.chunks(4096) {
            if let Err(e) = stream.blocking_write_and_flush(chunk) {
                // The host stopped taking the body: the response says why.
                let _ = e;
                break;
            }
        }
    }
    let _ = OutgoingBody::finish(out, None);
    Ok(future)
}

fn wait(future: FutureIncomingResponse) -> Result<IncomingResponse, ErrorCode> {
    future.subscribe().block();
    match future.get() {
        Some(Ok(r)) => r,
        _ => Err(ErrorCode::InternalError(Some("no response".into()))),
    }
}

/// Read the whole body; a stream error is the request's failure.
fn read(resp: &IncomingResponse) -> Result<Vec<u8>, String> {
    let body = resp.consume().map_err(|_| "no body".to_string())?;
    let stream = body.stream().map_err(|_| "no body stream".to_string())?;
    let mut all = Vec::new();
    loop {
        match stream.blocking_read(64 << 10) {
            Ok(chunk) => all.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => return Err(format!("reading the body: {}", e.to_debug_string())),
        }
    }
    Ok(all)
}

impl Guest for Fetch {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).unwrap_or_default();
        let mut url = data.get("url").and_then(|v| v.as_str()).unwrap_or("").to_string();
        let method = match data.get("method").and_then(|v| v.as_str()).unwrap_or("GET") {
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            "GET" => Method::Get,
            other => Method::Other(other.to_string()),
        };
        let mut body = data.get("body").and_then(|v| v.as_str()).unwrap_or("").as_bytes().to_vec();
        if let Some(n) = data.get("body_bytes").and_then(|v| v.as_u64()) {
            body = vec![b'x'; n as usize];
        }
        let timeout = data.get("timeout_ms").and_then(|v| v.as_u64()).map(Duration::from_millis);
        let chunked = data.get("chunked").and_then(|v| v.as_bool()).unwrap_or(false);

        if let Some(n) = data.get("parallel").and_then(|v| v.as_u64()) {
            let started: Vec<_> = (0..n).map(|_| start(&Method::Get, &url, &[], timeout, false)).collect();
            let (mut ok, mut errors) = (0, Vec::new());
            for s in started {
                match s.map_err(|e| e.message).and_then(|f| wait(f).map_err(|e| format!("{e:?}"))) {
                    Ok(r) => {
                        let _ = read(&r);
                        ok += 1
                    }
                    Err(e) => errors.push(e),
                }
            }
            if let Some(first) = errors.first() {
                return Err(failed(format!("{} of {n} requests failed, the first with {first}", errors.len())));
            }
            return Ok(Some(serde_json::json!({ "ok": ok }).to_string()));
        }

        if let Some(n) = data.get("repeat").and_then(|v| v.as_u64()) {
            let mut bytes = 0;
            for _ in 0..n {
                let resp = wait(start(&Method::Get, &url, &[], timeout, false)?).map_err(|e| failed(format!("{url}: {e:?}")))?;
                bytes += read(&resp).map_err(|e| failed(format!("{url}: {e}")))?.len();
            }
            return Ok(Some(serde_json::json!({ "requests": n, "bytes": bytes }).to_string()));
        }

        let follow = data.get("follow").and_then(|v| v.as_u64()).unwrap_or(0);
        let mut hops = Vec::new();
        loop {
            let resp = wait(start(&method, &url, &body, timeout, chunked)?).map_err(|e| failed(format!("{url}: {e:?}")))?;
            let status = resp.status();
            let location = resp.headers().get("location").into_iter().next();
            if (300..400).contains(&status) && (hops.len() as u64) < follow {
                if let Some(to) = location.and_then(|l| String::from_utf8(l).ok()) {
                    hops.push(url.clone());
                    url = to;
                    body.clear();
                    continue;
                }
            }
            let bytes = read(&resp).map_err(|e| failed(format!("{url}: {e}")))?;
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).to_string();
            let out = serde_json::json!({ "status": status, "bytes": bytes.len(), "body": text, "hops": hops });
            return Ok(Some(out.to_string()));
        }
    }
}

export!(Fetch);
