//! Outbound HTTP for handlers the operator grants it (`[handlers.NAME.grants.http]`, see
//! [`policy`]). Every handler's component may import `wasi:http`: it is linked for all, so a
//! component built with it (a default JavaScript build, say) loads, and each request it makes
//! passes through [`RunNet::send_request`], which refuses what the grant does not allow before
//! any byte leaves:
//!
//! 1. the number of requests of the run and of those in flight (`http-limit`);
//! 2. scheme, host, port, method and path against the grant's destinations, with the `Host`
//!    header equal to the checked authority and no user in it (`denied`);
//! 3. every address the name resolves to: public, or named by the grant (`denied`); the
//!    connection then goes to a checked address ([`addr`]);
//! 4. then `send` bounds the rest: timeouts ending at the run's deadline, both bodies capped.
//!
//! A refusal fails the guest's request with a wasi:http error code, says why in the run's logs,
//! and, if the run then fails, is the run's error (see `record`). Redirects are not followed by the host: a guest that follows one makes a new
//! request, checked again.

pub mod addr;
mod destination;
mod dial;
pub mod policy;
mod record;
mod send;
pub mod socket_grant;
mod sockets;

pub(crate) use sockets::link_sockets;
pub use sockets::SocketRun;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::uri::Scheme as UriScheme;
use http_body_util::BodyExt;
use tokio::sync::Semaphore;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{
    Error, ForbiddenHeaderFilter, RequestOptions, WasiBody, WasiHttpHooks, DEFAULT_FORBIDDEN_HEADERS,
};

pub use policy::{HttpBounds, HttpGrantConfig, HttpPolicy};
pub use record::{NetLog, Refusal};
pub use socket_grant::{SocketGrantConfig, SocketPolicy};

use crate::sandbox::codes;
use policy::{Scheme, Target};

type SendFuture = Box<dyn Future<Output = Result<(http::Response<WasiBody>, send::IoFuture), Error>> + Send>;

/// Longest a refused request's body is read before the refusal is returned: a guest writing
/// its body and awaiting the response together would otherwise see a reset, not the refusal.
const REFUSED_BODY_WAIT: Duration = Duration::from_millis(500);

/// One run's network state: its grant, its counts and its log.
pub struct RunNet {
    handler: Arc<str>,
    policy: Option<Arc<HttpPolicy>>,
    deadline: tokio::time::Instant,
    requests: u32,
    in_flight: Arc<Semaphore>,
    log: NetLog,
    sockets: Arc<SocketRun>,
}

impl RunNet {
    /// The network of one run of `handler`, as `grants` allow, ending at `deadline`.
    pub fn new(handler: &str, grants: &crate::sandbox::Grants, deadline: std::time::Instant) -> Self {
        let policy = grants.http.clone();
        let concurrent = policy.as_ref().map_or(0, |p| p.bounds.max_concurrent);
        let (handler, log, deadline): (Arc<str>, _, _) = (handler.into(), NetLog::default(), deadline.into());
        let sockets = Arc::new(SocketRun::new(handler.clone(), grants.sockets.clone(), log.clone(), deadline));
        RunNet {
            handler,
            policy,
            deadline,
            requests: 0,
            in_flight: Arc::new(Semaphore::new(concurrent as usize)),
            log,
            sockets,
        }
    }

    /// The run's sockets, shared with its WASI context's address check.
    pub fn sockets(&self) -> &Arc<SocketRun> {
        &self.sockets
    }

    /// What the run asked for and got.
    pub fn log(&self) -> &NetLog {
        &self.log
    }

    /// The handler the run belongs to.
    pub fn handler(&self) -> &str {
        &self.handler
    }

    fn not_granted(&self, what: &str) -> String {
        format!(
            "network access to {what} is not granted to handler {}; grants are set in the operator's configuration",
            self.handler
        )
    }

    /// Refuse a request: note it, wait briefly for the guest's body, then fail with `error`.
    fn refuse(
        &self,
        request: http::Request<WasiBody>,
        code: &'static str,
        message: String,
        error: Error,
    ) -> SendFuture {
        self.log.refuse(code, message);
        Box::new(async move {
            let mut body = request.into_body();
            let cap = 1u64 << 20;
            let _ = tokio::time::timeout(REFUSED_BODY_WAIT, async {
                let mut seen = 0u64;
                while let Some(Ok(frame)) = body.frame().await {
                    seen += frame.data_ref().map_or(0, |d| d.len() as u64);
                    if seen > cap {
                        break;
                    }
                }
            })
            .await;
            Err(error)
        })
    }

    fn check(&mut self, request: http::Request<WasiBody>, options: Option<RequestOptions>) -> SendFuture {
        let admitted = match self.admit(&request) {
            Ok(a) => a,
            Err(Refused { code, message, error }) => return self.refuse(request, code, message, error),
        };
        let Admitted { scheme, host, port, destination, policy, permits } = admitted;
        let b = policy.bounds;
        let endpoint = format!("{}://{host}:{port}", scheme.as_str());
        let record = self.log.start(format!("{} {endpoint}{}", request.method(), request.uri().path()));
        // The guest's own timeouts apply when shorter than the grant's; all end at the deadline.
        let shorter = |grant: Duration, guest: Option<Duration>| guest.map_or(grant, |g| g.min(grant));
        let opts = options.unwrap_or_default();
        let deadline = self.deadline;
        let by = |after: Duration| tokio::time::Instant::now().checked_add(after).map_or(deadline, |t| t.min(deadline));
        let dial = dial::Dial {
            host: host.trim_start_matches('[').trim_end_matches(']').to_string(),
            port,
            scheme,
            destination,
            not_granted: self.not_granted(&endpoint),
            connect_by: by(shorter(b.connect_timeout, opts.connect_timeout)),
            first_byte_timeout: shorter(b.first_byte_timeout, opts.first_byte_timeout),
            between_bytes_timeout: shorter(b.between_bytes_timeout, opts.between_bytes_timeout),
            deadline,
            policy,
            permits,
        };
        Box::new(dial.send(request, record))
    }

    /// Whether `request` may go, in the order of the module's list; what it may use if so.
    fn admit(&mut self, request: &http::Request<WasiBody>) -> Result<Admitted, Refused> {
        // Every request counts, refused ones too: a guest cannot spin on refusals.
        self.requests = self.requests.saturating_add(1);
        let max_requests = self.policy.as_ref().map_or(HttpBounds::DEFAULT.max_requests, |p| p.bounds.max_requests);
        if self.requests > max_requests {
            let message = format!("more than the grant's max_requests of {max_requests} in one run");
            return Err(Refused::limit(message, Error::ConnectionLimitReached));
        }
        let uri = request.uri();
        let scheme = match uri.scheme() {
            Some(s) if *s == UriScheme::HTTPS => Scheme::Https,
            Some(s) if *s == UriScheme::HTTP => Scheme::Http,
            _ => {
                return Err(Refused::denied(
                    "only http and https requests are possible".into(),
                    Error::HttpProtocolError,
                ))
            }
        };
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
        // A host name has at most 253 bytes: anything longer is refused before it is quoted.
        let parsed = policy::split_host_port(authority).filter(|_| authority.len() <= 261 && !authority.contains('@'));
        let Some((host, port)) = parsed else {
            let shown = crate::text::bounded(authority, 64, "…");
            return Err(Refused::denied(format!("{shown:?} is not a host and port"), Error::HttpRequestUriInvalid));
        };
        let port = port.unwrap_or(scheme.default_port());
        let endpoint = format!("{}://{host}:{port}", scheme.as_str());
        let Some(policy) = self.policy.clone() else {
            return Err(Refused::denied(self.not_granted(&format!("{host}:{port}")), Error::HttpRequestDenied));
        };
        // wasmtime sets Host to the authority and guests cannot set it; checked all the same.
        if request.headers().get(http::header::HOST).map(|h| h.as_bytes()) != Some(authority.as_bytes()) {
            let message = format!("the Host header does not name {authority}");
            return Err(Refused::denied(message, Error::HttpRequestDenied));
        }
        let method = request.method().as_str();
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let target = Target { scheme, host, port, method, path };
        let at_endpoint: Vec<_> = policy.destinations.iter().filter(|d| d.allows_endpoint(&target)).collect();
        let Some(destination) = at_endpoint.iter().find(|d| d.allows_method(method) && d.allows_path(path)) else {
            let what = if at_endpoint.is_empty() {
                endpoint
            } else if !at_endpoint.iter().any(|d| d.allows_method(method)) {
                format!("{method} requests to {endpoint}")
            } else {
                format!("path {} on {endpoint}", uri.path())
            };
            return Err(Refused::denied(self.not_granted(&what), Error::HttpRequestDenied));
        };
        let destination = Arc::new((*destination).clone());
        let b = policy.bounds;
        if let Some(n) = send::content_length(request.headers()).filter(|n| *n > b.max_request_bytes) {
            let message =
                format!("the request body is {n} bytes, over the grant's max_request_bytes of {}", b.max_request_bytes);
            return Err(Refused::limit(message, Error::HttpRequestBodySize(Some(b.max_request_bytes))));
        }
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            let message = format!("more than the grant's max_concurrent of {} requests in flight", b.max_concurrent);
            return Err(Refused::limit(message, Error::ConnectionLimitReached));
        };
        let Ok(connection) = dial::connections().try_acquire_owned() else {
            // The worker's bound, not the grant's: another attempt may find room (retried).
            let message = format!("all {} outbound connections of this worker are in use", dial::MAX_CONNECTIONS);
            return Err(Refused { code: codes::HOST_BUSY, message, error: Error::ConnectionLimitReached });
        };
        let host = host.to_string();
        Ok(Admitted { scheme, host, port, destination, policy, permits: vec![permit, connection] })
    }
}

/// A request that may go: where, under which grant, holding its slots.
struct Admitted {
    scheme: Scheme,
    host: String,
    port: u16,
    destination: Arc<policy::Destination>,
    policy: Arc<HttpPolicy>,
    permits: Vec<tokio::sync::OwnedSemaphorePermit>,
}

/// Why a request may not go: the run's log and error code, and the guest's error.
struct Refused {
    code: &'static str,
    message: String,
    error: Error,
}

impl Refused {
    fn denied(message: String, error: Error) -> Self {
        Refused { code: codes::DENIED, message, error }
    }

    fn limit(message: String, error: Error) -> Self {
        Refused { code: codes::HTTP_LIMIT, message, error }
    }
}

impl WasiHttpHooks for RunNet {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        self.check(request, options)
    }

    /// Headers some servers take as the path to serve: they would route around a path prefix.
    fn forbidden_header_filter(&mut self) -> ForbiddenHeaderFilter {
        Arc::new(|name| DEFAULT_FORBIDDEN_HEADERS.contains(name) || name == "x-original-url" || name == "x-rewrite-url")
    }

    /// What one write to a request body may hold in the host: bodies exist before any request
    /// is checked (a guest with no grant can make them), so little; 16 KiB once granted.
    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        if self.policy.is_some() {
            16 << 10
        } else {
            1 << 10
        }
    }

    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    /// A request body stopped at its cap reaches the guest as that, not a protocol error.
    fn p2_error_from_hyper(&mut self, err: &hyper::Error) -> ErrorCode {
        let mut source = std::error::Error::source(err);
        while let Some(e) = source {
            if let Some(Error::HttpRequestBodySize(n)) = e.downcast_ref::<Error>() {
                return ErrorCode::HttpRequestBodySize(*n);
            }
            source = e.source();
        }
        ErrorCode::HttpProtocolError
    }
}
