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
//! 4. then [`send`] bounds the rest: timeouts ending at the run's deadline, both bodies capped.
//!
//! A refusal fails the guest's request with a wasi:http error code, writes a `[host] http
//! refused` line in the run's logs, and, if the run then fails, is the run's error (see
//! [`record`]). Redirects are not followed by the host: a guest that follows one makes a new
//! request, checked again.

pub mod addr;
pub mod policy;
mod record;
mod send;
mod sockets;

pub(crate) use sockets::refuse_sockets;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::uri::Scheme as UriScheme;
use http_body_util::BodyExt;
use tokio::sync::Semaphore;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

pub use policy::{HttpBounds, HttpGrantConfig, HttpPolicy};
pub use record::{NetLog, Refusal};

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
}

impl RunNet {
    pub fn new(handler: &str, policy: Option<Arc<HttpPolicy>>, deadline: std::time::Instant) -> Self {
        let concurrent = policy.as_ref().map_or(0, |p| p.bounds.max_concurrent);
        RunNet {
            handler: handler.into(),
            policy,
            deadline: deadline.into(),
            requests: 0,
            in_flight: Arc::new(Semaphore::new(concurrent as usize)),
            log: NetLog::default(),
        }
    }

    pub fn log(&self) -> &NetLog {
        &self.log
    }

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
        let uri = request.uri().clone();
        let scheme = match uri.scheme() {
            Some(s) if *s == UriScheme::HTTPS => Scheme::Https,
            Some(s) if *s == UriScheme::HTTP => Scheme::Http,
            _ => {
                return self.refuse(
                    request,
                    codes::DENIED,
                    "only http and https requests are possible".into(),
                    Error::HttpProtocolError,
                )
            }
        };
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
        let parsed = policy::split_host_port(authority).filter(|_| !authority.contains('@'));
        let Some((host, port)) = parsed else {
            let message = format!("{authority:?} is not a host and port");
            return self.refuse(request, codes::DENIED, message, Error::HttpRequestUriInvalid);
        };
        let port = port.unwrap_or(if scheme == Scheme::Https { 443 } else { 80 });
        let endpoint = format!("{host}:{port}");
        // Refused requests count too: a guest without a grant cannot spin on refusals.
        self.requests = self.requests.saturating_add(1);
        let max_requests = self.policy.as_ref().map_or(HttpBounds::DEFAULT.max_requests, |p| p.bounds.max_requests);
        if self.requests > max_requests {
            let message = format!("more than the grant's max_requests of {max_requests} in one run");
            return self.refuse(request, codes::HTTP_LIMIT, message, Error::ConnectionLimitReached);
        }
        let Some(policy) = self.policy.clone() else {
            let message = self.not_granted(&endpoint);
            return self.refuse(request, codes::DENIED, message, Error::HttpRequestDenied);
        };
        // wasmtime sets Host to the authority and guests cannot set it; checked all the same.
        if request.headers().get(http::header::HOST).map(|h| h.as_bytes()) != Some(authority.as_bytes()) {
            let message = format!("the Host header does not name {authority}");
            return self.refuse(request, codes::DENIED, message, Error::HttpRequestDenied);
        }
        let method = request.method().as_str().to_string();
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let target = Target { scheme, host, port, method: &method, path: &path };
        let at_endpoint: Vec<_> = policy.destinations.iter().filter(|d| d.allows_endpoint(&target)).collect();
        let Some(dest) = at_endpoint.iter().find(|d| d.allows_method(&method) && d.allows_path(&path)) else {
            let what = if at_endpoint.is_empty() {
                format!("{}://{endpoint}", scheme.as_str())
            } else if !at_endpoint.iter().any(|d| d.allows_method(&method)) {
                format!("{method} requests to {}://{endpoint}", scheme.as_str())
            } else {
                format!("path {} on {}://{endpoint}", uri.path(), scheme.as_str())
            };
            let message = self.not_granted(&what);
            return self.refuse(request, codes::DENIED, message, Error::HttpRequestDenied);
        };
        let dest = (*dest).clone();
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            let message =
                format!("more than the grant's max_concurrent of {} requests in flight", policy.bounds.max_concurrent);
            return self.refuse(request, codes::HTTP_LIMIT, message, Error::ConnectionLimitReached);
        };
        let b = policy.bounds;
        let announced = request
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(n) = announced.filter(|n| *n > b.max_request_bytes) {
            let message =
                format!("the request body is {n} bytes, over the grant's max_request_bytes of {}", b.max_request_bytes);
            return self.refuse(
                request,
                codes::HTTP_LIMIT,
                message,
                Error::HttpRequestBodySize(Some(b.max_request_bytes)),
            );
        }
        let record = self.log.start(format!("{method} {}://{endpoint}{}", scheme.as_str(), uri.path()));
        let (log, not_granted) = (record.clone(), self.not_granted(&format!("{}://{endpoint}", scheme.as_str())));
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let deadline = self.deadline;
        // The guest's own timeouts apply when shorter than the grant's.
        let shorter = |grant: Duration, guest: Option<Duration>| guest.map_or(grant, |g| g.min(grant));
        let opts = options.unwrap_or_default();
        let (connect, first_byte, between) = (
            shorter(b.connect_timeout, opts.connect_timeout),
            shorter(b.first_byte_timeout, opts.first_byte_timeout),
            shorter(b.between_bytes_timeout, opts.between_bytes_timeout),
        );
        Box::new(async move {
            let resolved = tokio::time::timeout_at(
                tokio::time::Instant::now().checked_add(connect).map_or(deadline, |t| t.min(deadline)),
                tokio::net::lookup_host((host.as_str(), port)),
            )
            .await;
            let addrs: Vec<std::net::SocketAddr> = match resolved {
                Err(_) => {
                    log.end(Some("name lookup timed out".into()));
                    return Err(Error::DnsTimeout);
                }
                Ok(Err(e)) => {
                    log.end(Some(format!("name lookup failed: {e}")));
                    return Err(Error::DnsError { rcode: Some("name unresolvable".into()), info_code: None });
                }
                Ok(Ok(found)) => found.collect(),
            };
            let (allowed, refused): (Vec<std::net::SocketAddr>, Vec<std::net::SocketAddr>) =
                addrs.iter().partition(|a| dest.allows_address(a.ip()));
            if allowed.is_empty() {
                let list: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
                let message = format!(
                    "{not_granted} ({host} resolves to {}, an address the grant does not name)",
                    if list.is_empty() { "nothing".to_string() } else { list.join(", ") }
                );
                log.refuse(codes::DENIED, message);
                return Err(Error::DestinationIpProhibited);
            }
            let tls = match scheme {
                Scheme::Http => None,
                Scheme::Https => {
                    let name = rustls::pki_types::ServerName::try_from(host.clone())
                        .map_err(|_| Error::HttpRequestUriInvalid)?;
                    Some((tls_config(&policy).map_err(|e| Error::InternalError(Some(e)))?, name))
                }
            };
            let plan = send::Plan {
                addrs: allowed,
                tls,
                connect_timeout: connect,
                first_byte_timeout: first_byte,
                between_bytes_timeout: between,
                deadline,
                max_request_bytes: b.max_request_bytes,
                max_response_bytes: b.max_response_bytes,
            };
            let sent = tokio::time::timeout_at(deadline, send::send(request, plan, log.clone(), permit)).await;
            match sent {
                Ok(Ok(done)) => Ok(done),
                Ok(Err(e)) => {
                    log.end(Some(e.to_string()));
                    Err(e)
                }
                Err(_) => {
                    log.end(Some("cut at the run's deadline".into()));
                    Err(Error::ConnectionTimeout)
                }
            }
        })
    }
}

/// TLS settings: the public roots, plus the grant's own when it has any.
fn tls_config(policy: &HttpPolicy) -> Result<Arc<ClientConfig>, String> {
    static PUBLIC: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    let build = |extra: &[Vec<u8>]| -> Result<Arc<ClientConfig>, String> {
        let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
        for der in extra {
            roots.add(der.clone().into()).map_err(|e| format!("a ca_file certificate cannot be used: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    };
    if policy.extra_roots.is_empty() {
        PUBLIC.get_or_init(|| build(&[])).clone()
    } else {
        build(&policy.extra_roots)
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
