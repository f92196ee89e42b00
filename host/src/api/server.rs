//! The HTTP server under `taskhost serve` (and a worker's `--metrics`): the [`super::router`] on
//! HTTP/1.1, bounded against clients that are slow, idle or many, none of whom need a token to
//! connect.
//!
//! - A request's head must arrive within [`ServerLimits::header_timeout`], on a new connection
//!   and between requests on a kept-alive one: a client that trickles its head (slowloris), sends
//!   half a request line or keeps an idle connection open is cut off then.
//! - A request's body must arrive within [`ServerLimits::request_timeout`] of its start, then a
//!   408: a body sent a byte at a time holds nothing longer; and a client that takes no byte of
//!   its answer for that long loses its connection (see `slow.rs`).
//! - At most [`ServerLimits::max_connections`] are served at once (a further one, accepted,
//!   waits for one to close, and the rest in the listen backlog), below the open-file limit, which is raised to its hard
//!   maximum at start: running out of file descriptors would stop every caller, health probes too.
//!   While a new connection waits for one, an idle kept-alive connection is closed (see `kept.rs`).
//!   Of those, waits (`?wait=`) and event streams hold at most three quarters ([`LongHeld`]), so
//!   that, however many a client opens, the others are answered.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::kept::{Busy, Connection, Connections};
use super::ApiError;

/// How long and how many: see the module's documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Most time for a request's head to arrive, on a new connection or an idle kept-alive one.
    pub header_timeout: Duration,
    /// Most time for a request's body to arrive, and for a client to take the next byte of its
    /// answer.
    pub request_timeout: Duration,
    /// Most connections open at once (lowered to fit the open-file limit).
    pub max_connections: usize,
}

impl ServerLimits {
    /// The shortest timeout accepted: below it, ordinary clients on a slow link would be cut off.
    pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);
    /// The longest timeout accepted: an hour.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 4096,
        }
    }
}

/// File descriptors kept for everything but connections: the database pool, plugin files, logs.
const RESERVED_FILES: usize = 128;

/// Serve `router` on `listener` until `shutdown` completes; then stop accepting, let requests in
/// flight finish (at most one request timeout) and return.
pub fn serve<'a>(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'a,
) -> BoxFuture<'a, std::io::Result<()>> {
    serve_boxed(listener, router, limits, Box::pin(shutdown))
}

// Not generic and boxed: a crate awaiting `serve` would otherwise compile the server again.
#[inline(never)]
fn serve_boxed(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    shutdown: BoxFuture<'_, ()>,
) -> BoxFuture<'_, std::io::Result<()>> {
    Box::pin(serve_now(listener, router, limits, shutdown))
}

async fn serve_now(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    mut shutdown: BoxFuture<'_, ()>,
) -> std::io::Result<()> {
    let open_files = raise_open_files_limit();
    let cap = limits.max_connections.min(open_files.saturating_sub(RESERVED_FILES)).max(1);
    if cap < limits.max_connections {
        tracing::warn!("serving at most {cap} connections at once: the open-file limit is {open_files}");
    }
    let request_timeout = limits.request_timeout;
    let (stop, stopping) = watch::channel(false);
    // Requests waiting for a task's end (`?wait=`) end when the server stops.
    let router = router
        .layer(middleware::from_fn(move |req: Request, next: Next| super::slow::within(request_timeout, req, next)))
        .layer(axum::Extension(super::wait::Stopping(stopping.clone())))
        .layer(axum::Extension(LongHeld::of(cap)));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(Some(limits.header_timeout)).keep_alive(true);
    let slots = Arc::new(Semaphore::new(cap));
    let connections = Arc::new(Connections::default());
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        let Some(slot) = slot_for(&slots, &connections, &mut shutdown).await? else { break };
        let _ = stream.set_nodelay(true);
        let stream = super::slow::WriteStall::new(stream, request_timeout);
        let member = connections.join();
        let service = counted(TowerToHyperService::new(router.clone()), member.connection.clone());
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let _slot = slot;
            tokio::pin!(connection);
            // Biased, the connection first: bytes of a request already come are read (and the
            // request counted in flight) before the connection is given back.
            tokio::select! {
                biased;
                _ = connection.as_mut() => {}
                _ = stopping.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
                _ = member.connection.given_back() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(member);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    // Requests in flight finish; kept-alive connections close after their answer.
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(request_timeout, slots.acquire_many(all)).await;
    Ok(())
}

/// A slot for the connection just accepted: at once, or once a kept-alive connection gives its
/// back (kept.rs); None when the server is stopped meanwhile.
async fn slot_for(
    slots: &Arc<Semaphore>,
    connections: &Connections,
    shutdown: &mut BoxFuture<'_, ()>,
) -> std::io::Result<Option<OwnedSemaphorePermit>> {
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        return Ok(Some(slot));
    }
    connections.starved(true);
    let slot = loop {
        tokio::select! {
            _ = &mut *shutdown => break Ok(None),
            slot = slots.clone().acquire_owned() => break slot.map(Some).map_err(std::io::Error::other),
            _ = connections.rescan() => connections.starved(true),
        }
    };
    connections.starved(false);
    slot
}

/// `service` counting its requests in flight on `connection`, each until its answer's body is
/// sent (or dropped).
fn counted(
    service: TowerToHyperService<Router>,
    connection: Arc<Connection>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send,
> + Send {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let busy = connection.busy();
        if holds_long(&req) {
            busy.holds_long();
        }
        let answer = hyper::service::Service::call(&service, req);
        async move {
            let mut answer = match answer.await {
                Ok(answer) => answer,
                Err(never) => match never {},
            };
            let stream =
                answer.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes() == b"text/event-stream");
            if busy.closes_after(!stream) {
                // A client waits for a slot: this connection closes after its answer, and says so,
                // so that the client does not send its next request into the close.
                answer.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(answer.map(|body: Body| {
                Body::new(body.map_frame(move |frame| {
                    let _held: &Busy = &busy;
                    frame
                }))
            }))
        }
    })
}

/// Whether `req` may hold its connection long: an event stream or a wait for a task's end.
fn holds_long(req: &Request<Incoming>) -> bool {
    req.uri().path().ends_with("/events")
        || req.uri().query().is_some_and(|q| q.split('&').any(|p| p.starts_with("wait=")))
}

/// The connections that waits and event streams may hold at once on one server: three quarters of
/// its own, rounded down, so that at least one is left to requests answered at once (a server of
/// one connection holds none). A router served otherwise has none, and bounds them by their own
/// counts only.
#[derive(Clone)]
pub struct LongHeld {
    turns: Arc<Semaphore>,
    most: usize,
    of: usize,
}

impl LongHeld {
    fn of(connections: usize) -> Self {
        let most = connections * 3 / 4;
        LongHeld { turns: Arc::new(Semaphore::new(most)), most, of: connections }
    }

    /// A connection's turn to be held long, kept while the permit lives; 503 `busy` when every
    /// turn is taken, telling a wait (`wait`) that it may ask without one. A server that holds
    /// none answers a stream 501 `no-streams`: asking again cannot open it.
    pub(super) fn take(&self, wait: bool) -> Result<OwnedSemaphorePermit, ApiError> {
        const ONE: &str = "this server serves one connection at a time (its --max-connections, or its open-file \
                           limit), kept for requests answered at once";
        if self.most == 0 && !wait {
            let message = format!("{ONE}: it serves no event stream");
            return Err(ApiError::new(axum::http::StatusCode::NOT_IMPLEMENTED, "no-streams", message));
        }
        self.turns.clone().try_acquire_owned().map_err(|_| {
            let message = match self.most {
                0 => format!("{ONE}: ask without wait"),
                most => format!(
                    "{most} of this server's {} connections, as many as waits and event streams may hold (three \
                     quarters), are held by them already: ask again later{}",
                    self.of,
                    if wait { ", or without wait" } else { "" }
                ),
            };
            ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "busy", message)
        })
    }
}

/// An accept that failed: out of file descriptors (or memory) is waited out briefly rather than
/// retried at once in a busy loop; a connection reset before it was accepted is nothing.
async fn accept_failed(e: std::io::Error) {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
            tracing::warn!("cannot accept a connection: {e}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        _ => tracing::debug!("a connection failed before it was accepted: {e}"),
    }
}

/// Raise the soft limit on open files to the hard one (the usual soft limit, 1,024, is a few
/// hundred idle clients away); the limit in force.
fn raise_open_files_limit() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed, which lives here.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return usize::MAX;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return usize::MAX;
    }
    usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
}
