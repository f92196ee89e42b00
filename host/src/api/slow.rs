//! Deadlines for slow clients beyond hyper's header timeout: a request body sent too slowly is cut
//! off with a 408 once the request timeout has passed since its head ([`within`]), and a
//! connection whose client takes no byte of its answer for that long is dropped ([`WriteStall`]):
//! otherwise a client that stops reading (pipelining requests it never reads the answers of)
//! would hold its connection, and one of the capped slots, forever. The work a request does once
//! its body is read is never cut off: a bulk action's batches all land, and so does its answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::ApiError;

/// A request whose body is not all read within `limit` of its start: a 408.
pub(super) async fn within(limit: Duration, req: Request, next: Next) -> Response {
    let expired = Arc::new(AtomicBool::new(false));
    let sleep = Box::pin(tokio::time::sleep(limit));
    let timed = { expired.clone() };
    let req = req.map(move |inner| Body::new(TimedBody { inner, sleep, expired: timed }));
    let response = next.run(req).await;
    if !expired.load(Ordering::SeqCst) {
        return response;
    }
    let message = format!("the request's body took over {}: send it whole and at once", crate::text::duration(limit));
    let mut response = ApiError::new(StatusCode::REQUEST_TIMEOUT, "request-timeout", message).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// A request body that fails once its deadline passes while it is still being read.
struct TimedBody {
    inner: Body,
    sleep: Pin<Box<Sleep>>,
    expired: Arc<AtomicBool>,
}

impl http_body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.expired.store(true, Ordering::SeqCst);
                let late = std::io::Error::new(std::io::ErrorKind::TimedOut, "the request body came too slowly");
                Poll::Ready(Some(Err(axum::Error::new(late))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A connection's stream whose writes fail once the client has taken no byte for `limit`.
pub(super) struct WriteStall<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteStall<S> {
    pub(super) fn new(inner: S, limit: Duration) -> Self {
        WriteStall { inner, limit, stalled: None }
    }

    /// A write could not go on: Ready with an error once it has waited `limit`.
    fn stall(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let message = "the client took no byte of its answer for the request timeout";
                Poll::Ready(std::io::Error::new(std::io::ErrorKind::TimedOut, message))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteStall<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteStall<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Pending => this.stall(cx).map(Err),
            done => {
                this.stalled = None;
                done
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending => this.stall(cx).map(Err),
            done => {
                this.stalled = None;
                done
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
