//! What any caller may make the server hold: request bodies are read a bounded number of bytes
//! at a time across all requests, and every answer says what it is (`nosniff`), so a browser
//! never runs an answer as a page or script of another kind.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::{ApiState, MAX_BODY_BYTES};

/// The bytes of request bodies read at once, across all requests: three of the largest.
pub const BODIES_IN_FLIGHT_BYTES: usize = 3 * MAX_BODY_BYTES;

/// Permits are KiB, so a semaphore's `u32` counts cover every budget.
const UNIT: usize = 1024;

/// The budget of body bytes: one per router.
pub(super) fn body_budget() -> Semaphore {
    Semaphore::new(BODIES_IN_FLIGHT_BYTES / UNIT)
}

/// A request with a body waits until its bytes fit the budget (a body of unknown length counts as
/// the largest allowed), and holds them until its answer is made; a GET or HEAD with one is
/// refused.
pub(super) async fn bodies(State(state): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    // A deploy's body is a component: bounded at its own limit (its route has no other).
    let req = match super::deploys::is_deploy(req.method(), req.uri().path()) {
        true => super::deploys::bounded(&state, req),
        false => req,
    };
    // The body's own account: exactly 0 without one, its Content-Length when it has one; a
    // chunked body counts as the largest allowed.
    let bytes = match http_body::Body::size_hint(req.body()).exact() {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(MAX_BODY_BYTES),
        None => MAX_BODY_BYTES,
    };
    if bytes == 0 {
        return next.run(req).await;
    }
    // No GET reads a body, and a GET may wait (`?wait=`, the event stream): holding its announced
    // bytes meanwhile let three such requests stop every request with a body.
    if matches!(*req.method(), Method::GET | Method::HEAD) {
        let message = format!("a {} request carries no body: send it without one", req.method());
        return super::error::ApiError::bad("body-not-allowed", message).into_response();
    }
    let units = u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
    // The semaphore is never closed; should it be, the request goes on unbounded rather than fail.
    let _held = state.bodies.acquire_many(units).await.ok();
    next.run(req).await
}

/// `X-Content-Type-Options: nosniff` on every answer.
pub(super) async fn nosniff(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
