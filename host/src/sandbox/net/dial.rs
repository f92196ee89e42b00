//! After a request passed the grant's checks: resolve its name (a bounded number of lookups at
//! once in the process), keep only the addresses the destination allows, choose TLS settings,
//! and hand it to [`super::send`]. Every error ends the request's log line here.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use wasmtime_wasi_http::{Error, WasiBody};

use super::policy::{Destination, HttpPolicy, Scheme};
use super::record::RequestRecord;
use super::send::{self, IoFuture};
use crate::sandbox::codes;

/// Name lookups at once in this process. A lookup holds a blocking thread until the resolver
/// answers, timed out or not, and the blocking pool is shared (files, compiles): a slow resolver
/// must not fill it.
const MAX_LOOKUPS: usize = 32;

/// Outbound connections at once in this process, whatever the runs: each is a file descriptor
/// the worker also needs for its database.
pub(super) const MAX_CONNECTIONS: usize = 1024;

pub(super) fn connections() -> Arc<Semaphore> {
    static CONNECTIONS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    CONNECTIONS.get_or_init(|| Arc::new(Semaphore::new(MAX_CONNECTIONS))).clone()
}

fn lookups() -> Arc<Semaphore> {
    static LOOKUPS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    LOOKUPS.get_or_init(|| Arc::new(Semaphore::new(MAX_LOOKUPS))).clone()
}

/// A checked request, ready to go.
pub(super) struct Dial {
    /// The name (or IP literal, without brackets) as the request gave it.
    pub host: String,
    pub port: u16,
    pub scheme: Scheme,
    pub destination: Arc<Destination>,
    pub policy: Arc<HttpPolicy>,
    /// The refusal's words, should no address be allowed.
    pub not_granted: String,
    /// Name lookup, TCP and TLS all end by then.
    pub connect_by: Instant,
    pub first_byte_timeout: Duration,
    pub between_bytes_timeout: Duration,
    pub deadline: Instant,
    /// The run's in-flight slot and the process's connection slot, held until the response
    /// body is read or dropped.
    pub permits: Vec<OwnedSemaphorePermit>,
}

type Sent = Result<(http::Response<WasiBody>, IoFuture), Error>;

impl Dial {
    pub(super) async fn send(self, request: http::Request<WasiBody>, record: RequestRecord) -> Sent {
        let deadline = self.deadline;
        let sent = tokio::time::timeout_at(deadline, self.go(request, record.clone())).await;
        let sent = sent.unwrap_or_else(|_| Err(Error::ConnectionTimeout));
        if let Err(e) = &sent {
            // A refusal ended the line already; only the first end counts.
            let why = if Instant::now() >= deadline { "cut at the run's deadline".to_string() } else { e.to_string() };
            record.end(Some(why));
        }
        sent
    }

    async fn go(self, request: http::Request<WasiBody>, record: RequestRecord) -> Sent {
        let addrs = lookup(&self.host, self.port, self.connect_by).await?;
        let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
            addrs.iter().partition(|a| self.destination.allows_address(a.ip()));
        if allowed.is_empty() {
            let list: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
            let list = if list.is_empty() { "nothing".to_string() } else { list.join(", ") };
            let message =
                format!("{} ({} resolves to {list}, an address the grant does not name)", self.not_granted, self.host);
            record.refuse(codes::DENIED, message);
            return Err(Error::DestinationIpProhibited);
        }
        let tls = match self.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|_| Error::HttpRequestUriInvalid)?;
                Some((tls_config(&self.policy).map_err(|e| Error::InternalError(Some(e)))?, name))
            }
        };
        let b = self.policy.bounds;
        let plan = send::Plan {
            addrs: allowed,
            tls,
            connect_by: self.connect_by,
            first_byte_timeout: self.first_byte_timeout,
            between_bytes_timeout: self.between_bytes_timeout,
            deadline: self.deadline,
            max_request_bytes: b.max_request_bytes,
            max_response_bytes: b.max_response_bytes,
        };
        send::send(request, plan, record, self.permits).await
    }
}

/// The addresses of `host`; an IP literal is its own. The lookup's thread holds a permit until
/// the resolver answers, so at most [`MAX_LOOKUPS`] threads wait on it, however many time out.
pub(super) async fn lookup(host: &str, port: u16, by: Instant) -> Result<Vec<SocketAddr>, Error> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let permit = match tokio::time::timeout_at(by, lookups().acquire_owned()).await {
        Ok(Ok(p)) => p,
        Ok(Err(_)) => return Err(Error::InternalError(Some("the lookup semaphore closed".into()))),
        Err(_) => return Err(Error::DnsTimeout),
    };
    let name = host.to_string();
    let task = tokio::task::spawn_blocking(move || {
        let _held = permit;
        (name.as_str(), port).to_socket_addrs().map(Iterator::collect::<Vec<_>>)
    });
    match tokio::time::timeout_at(by, task).await {
        Err(_) => Err(Error::DnsTimeout),
        Ok(Err(e)) => Err(Error::InternalError(Some(format!("the lookup failed: {e}")))),
        Ok(Ok(Err(_))) => Err(Error::DnsError { rcode: Some("name unresolvable".into()), info_code: None }),
        Ok(Ok(Ok(found))) => Ok(found),
    }
}

/// TLS settings: the public roots, or the grant's (built once, when its configuration loaded).
fn tls_config(policy: &HttpPolicy) -> Result<Arc<ClientConfig>, String> {
    static PUBLIC: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    match &policy.roots {
        Some(roots) => Ok(roots.config.clone()),
        None => PUBLIC.get_or_init(|| client_config(&[])).clone(),
    }
}

/// Client settings trusting the public roots and `extra` (DER certificates).
pub(super) fn client_config(extra: &[Vec<u8>]) -> Result<Arc<ClientConfig>, String> {
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
}
