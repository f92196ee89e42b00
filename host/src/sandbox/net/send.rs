//! Sending one request that passed the checks: to the addresses checked (never resolved again),
//! with TLS verified against the destination's name, under the grant's timeouts, each ending at
//! the run's deadline, and with both bodies counted against the grant's caps.
//!
//! This replaces wasmtime-wasi-http's default sender, which resolves the name itself, has no
//! bound on bodies and none on the TLS handshake.

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Empty};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, WasiBody};

use super::record::RequestRecord;
use crate::sandbox::codes;

/// How to send one request.
pub(super) struct Plan {
    /// Checked addresses, tried in order.
    pub addrs: Vec<SocketAddr>,
    /// For https: the TLS settings and the name the certificate must be valid for.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// Name lookup (done before), TCP, TLS and the HTTP handshake end by then.
    pub connect_by: Instant,
    pub first_byte_timeout: Duration,
    pub between_bytes_timeout: Duration,
    /// The run's deadline: nothing of this request outlives it.
    pub deadline: Instant,
    pub max_request_bytes: u64,
    pub max_response_bytes: u64,
}

pub(super) type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// The earlier of `after` from now and the run's deadline.
fn until(plan: &Plan, after: Duration) -> Instant {
    Instant::now().checked_add(after).map_or(plan.deadline, |t| t.min(plan.deadline))
}

type Connection = hyper::client::conn::http1::Connection<TokioIo<Box<dyn Stream>>, WasiBody>;

/// A connection to the first checked address that answers, TLS on it for https, and the HTTP/1
/// handshake: all by the plan's connect deadline.
async fn connect(plan: &Plan) -> Result<(hyper::client::conn::http1::SendRequest<WasiBody>, Connection), Error> {
    let connect_by = plan.connect_by;
    let connect = async {
        let mut last = Error::ConnectionRefused;
        for addr in &plan.addrs {
            match TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Error::Connect(e),
            }
        }
        Err(last)
    };
    let tcp = tokio::time::timeout_at(connect_by, connect).await.map_err(|_| Error::ConnectionTimeout)??;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = match &plan.tls {
        None => Box::new(tcp),
        Some((config, name)) => {
            let connector = tokio_rustls::TlsConnector::from(config.clone());
            let tls = tokio::time::timeout_at(connect_by, connector.connect(name.clone(), tcp))
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(tls_error)?;
            Box::new(tls)
        }
    };
    let handshake = hyper::client::conn::http1::handshake(TokioIo::new(stream));
    Ok(tokio::time::timeout_at(connect_by, handshake).await.map_err(|_| Error::ConnectionTimeout)??)
}

pub(super) async fn send(
    req: Request<WasiBody>,
    plan: Plan,
    record: RequestRecord,
    permits: Vec<OwnedSemaphorePermit>,
) -> Result<(Response<WasiBody>, IoFuture), Error> {
    let (mut sender, conn) = connect(&plan).await?;
    let (mut parts, body) = req.into_parts();
    // The request line carries the path only; the Host header keeps the checked authority.
    parts.uri = http::Uri::builder()
        .path_and_query(parts.uri.path_and_query().map_or("/", |p| p.as_str()))
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let bodiless = matches!(parts.method, http::Method::GET | http::Method::HEAD)
        && !parts.headers.contains_key(http::header::CONTENT_LENGTH);
    let body = if bodiless {
        // hyper sends no body for these and drops it while the guest may still be writing its
        // empty one (seen as a reset); take what the guest writes, within the cap, and send none.
        let guest_body = Capped::new(body, plan.max_request_bytes, record.clone(), Direction::Out);
        tokio::spawn(tokio::time::timeout_at(until(&plan, plan.first_byte_timeout), drain(guest_body)));
        Empty::<Bytes>::new().map_err(|never| match never {}).boxed_unsync()
    } else {
        Capped::new(body, plan.max_request_bytes, record.clone(), Direction::Out).boxed_unsync()
    };
    let request = Request::from_parts(parts, body);

    let first_byte_by = until(&plan, plan.first_byte_timeout);
    let mut send = pin!(tokio::time::timeout_at(first_byte_by, sender.send_request(request)));
    let mut conn = Some(conn);
    // Drive the connection while waiting for the response's head.
    let response = poll_fn(|cx| match send.as_mut().poll(cx) {
        Poll::Ready(r) => Poll::Ready(r),
        Poll::Pending => {
            let Some(c) = conn.as_mut() else { return Poll::Pending };
            let done = ready!(Pin::new(c).poll(cx));
            conn = None;
            match done {
                Ok(()) => send.as_mut().poll(cx),
                Err(e) => Poll::Ready(Ok(Err(e))),
            }
        }
    })
    .await
    .map_err(|_| Error::ConnectionReadTimeout)?
    .map_err(|e| failed(e, &record))?;

    record.status(response.status().as_u16());
    if let Some(n) = content_length(response.headers()).filter(|n| *n > plan.max_response_bytes) {
        let message = format!(
            "the response body is {n} bytes, over the grant's max_response_bytes of {}",
            plan.max_response_bytes
        );
        record.refuse(codes::HTTP_LIMIT, message);
        return Err(Error::HttpResponseBodySize(Some(plan.max_response_bytes)));
    }
    let response = response.map(|incoming| {
        let capped = Capped::new(incoming.map_err(Error::from), plan.max_response_bytes, record.clone(), Direction::In);
        Timed {
            inner: capped.boxed_unsync(),
            between: plan.between_bytes_timeout,
            idle: Box::pin(tokio::time::sleep_until(until(&plan, plan.between_bytes_timeout))),
            deadline: Box::pin(tokio::time::sleep_until(plan.deadline)),
            record: record.clone(),
            done: false,
            _permits: permits,
        }
        .boxed_unsync()
    });
    let io: IoFuture = Box::new(async move {
        match conn {
            Some(c) => c.await.map_err(Error::from),
            None => Ok(()),
        }
    });
    Ok((response, io))
}

/// The body length a message announces, if it announces one.
pub(super) fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

/// A TLS failure as the guest's error code: a certificate refused, an alert, or another error.
fn tls_error(e: std::io::Error) -> Error {
    use tokio_rustls::rustls::Error as Tls;
    match e.get_ref().and_then(|inner| inner.downcast_ref::<Tls>()) {
        Some(Tls::InvalidCertificate(_)) => Error::TlsCertificateError,
        Some(Tls::AlertReceived(alert)) => {
            Error::TlsAlertReceived { alert_id: None, alert_message: Some(format!("{alert:?}")) }
        }
        _ => Error::Tls(e),
    }
}

/// Read a body to its end, keeping nothing.
async fn drain<B: Body + Unpin>(mut body: B) {
    while let Some(Ok(_)) = body.frame().await {}
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Out,
    In,
}

/// A request that failed on its connection. A server that closed it early (it answered without
/// reading the body, or refused it) is told as that, to the guest (`connection-terminated`) and in
/// the run's log, not as a protocol error.
fn failed(e: hyper::Error, record: &RequestRecord) -> Error {
    let sending = std::iter::successors(std::error::Error::source(&e), |s| s.source())
        .filter_map(|s| s.downcast_ref::<std::io::Error>())
        .any(|io| {
            use std::io::ErrorKind::*;
            matches!(io.kind(), BrokenPipe | ConnectionReset | ConnectionAborted)
        });
    let why = if sending {
        "the server closed the connection while the request body was being sent (it did not read all of it)"
    } else if e.is_incomplete_message() {
        "the server closed the connection before its answer was complete"
    } else {
        return Error::from(e);
    };
    record.end(Some(why.to_string()));
    Error::ConnectionTerminated
}

/// A body that counts its bytes into the request's record and fails past `cap`.
struct Capped<B> {
    inner: B,
    cap: u64,
    seen: u64,
    record: RequestRecord,
    direction: Direction,
}

impl<B> Capped<B> {
    fn new(inner: B, cap: u64, record: RequestRecord, direction: Direction) -> Self {
        Capped { inner, cap, seen: 0, record, direction }
    }
}

impl<B: Body<Data = Bytes, Error = Error> + Unpin> Body for Capped<B> {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref)) {
            let n = data.map_or(0, |d| d.len() as u64);
            self.seen = self.seen.saturating_add(n);
            match self.direction {
                Direction::Out => self.record.sent(n),
                Direction::In => self.record.received(n),
            }
            if self.seen > self.cap {
                let (what, key) = match self.direction {
                    Direction::Out => ("request", "max_request_bytes"),
                    Direction::In => ("response", "max_response_bytes"),
                };
                let message = format!("the {what} body passed the grant's {key} of {} bytes", self.cap);
                self.record.refuse(codes::HTTP_LIMIT, message);
                let e = match self.direction {
                    Direction::Out => Error::HttpRequestBodySize(Some(self.cap)),
                    Direction::In => Error::HttpResponseBodySize(Some(self.cap)),
                };
                return Poll::Ready(Some(Err(e)));
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body under the grant's between-bytes timeout and the run's deadline. It holds the
/// request's place among those in flight until it is read or dropped.
struct Timed {
    inner: WasiBody,
    between: Duration,
    idle: Pin<Box<Sleep>>,
    deadline: Pin<Box<Sleep>>,
    record: RequestRecord,
    done: bool,
    _permits: Vec<OwnedSemaphorePermit>,
}

impl Body for Timed {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                self.done = true;
                self.record.end(None);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                self.record.end(Some(e.to_string()));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(frame))) => {
                let next = Instant::now().checked_add(self.between).unwrap_or(self.deadline.deadline());
                self.idle.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                if self.deadline.as_mut().poll(cx).is_ready() {
                    self.done = true;
                    self.record.end(Some("cut at the run's deadline".into()));
                    return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
                }
                if self.idle.as_mut().poll(cx).is_ready() {
                    self.done = true;
                    let why = format!("no byte for {:?} (between_bytes_timeout)", self.between);
                    self.record.end(Some(why));
                    return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        if !self.done && !self.inner.is_end_stream() {
            // The run's own deadline may drop the body before this body's timer is polled: say why.
            let why = if Instant::now() >= self.deadline.deadline() {
                "cut at the run's deadline"
            } else {
                "the handler did not read the body to its end"
            };
            self.record.end(Some(why.into()));
        }
    }
}
