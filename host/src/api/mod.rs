//! The HTTP API: JSON under `/api/v1`, for applications in any language. `taskhost serve` serves
//! it; a Rust application mounts [`router`] in its own axum app.
//!
//! | method and path | does | role |
//! |---|---|---|
//! | `GET /api/v1/health` | the database answers: `{"status": "ok"}`, else 503 | none |
//! | `GET /api/v1/ready` | as health, and the tables exist and the plugins directory is readable | none |
//! | `POST /api/v1/tasks` | queue one task (a [`crate::model::TaskInput`]) or `{"tasks": [...]}` | write |
//! | `GET /api/v1/tasks` | list: `status`, `queue`, `handler`, `dead`, `order`, `limit`, `after` (cursor) | read |
//! | `GET /api/v1/tasks/{id}` | a task with its runs (progress, results, logs, error, digest, fuel) | read |
//! | `POST /api/v1/tasks/{id}/cancel`, `/retry` | cancel an unfinished task; schedule a finished one again | write |
//! | `DELETE /api/v1/tasks/{id}` | delete a finished task and its runs | write |
//! | `POST /api/v1/tasks/cancel`, `/retry`, `/delete` | the same on many: `ids`, `queue`, `handler` or `all` | write |
//! | `GET /api/v1/queues` | each queue's due, later and running tasks, lag, limit, pause | read |
//! | `POST /api/v1/queues/{queue}/pause`, `/resume` | pause or resume a queue | write |
//! | `GET /api/v1/schedules` | the periodic tasks, with their next slots and pauses | read |
//! | `POST /api/v1/schedules/{name}/pause`, `/resume`, `/trigger` | pause, resume, queue one now | write |
//! | `GET /api/v1/stats` | statistics per handler and queue (`handler`, `queue`), as `taskhost stats` | read |
//! | `GET /api/v1/runners` | the live runners: host, PID, heartbeat, handlers served | read |
//! | `GET /api/v1/plugins` | each handler: digest, whether it loads, limits, grants (names only) | read |
//!
//! Every error is JSON, `{"error": {"code": "...", "message": "..."}}`, with a 4xx status for
//! what the caller can fix and 503 when the database cannot be reached; a 5xx never carries the
//! database's own words. Callers present `Authorization: Bearer TOKEN` (see
//! [`crate::config::api`]); bodies are at most [`MAX_BODY_BYTES`].

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::client::Client;
use crate::config::api::{ApiSection, Role};
use crate::error::Error;

mod bulk;
mod control;
mod plugins;
mod queues;
mod tasks;

/// Largest request body: room for a batch of tasks with their data.
pub const MAX_BODY_BYTES: usize = 16 << 20;

pub(crate) struct ApiState {
    client: Client,
    access: ApiSection,
    /// One scan of the plugins directory at a time.
    plugin_scan: tokio::sync::Mutex<()>,
}

/// Paths anyone may ask, token or not: a load balancer's probes.
const OPEN_PATHS: [&str; 2] = ["/api/v1/health", "/api/v1/ready"];

/// The API's routes over `client`, answering the callers `access` names.
pub fn router(client: Client, access: ApiSection) -> Router {
    let state = Arc::new(ApiState { client, access, plugin_scan: Default::default() });
    Router::new()
        .route("/api/v1/health", get(health))
        .route("/api/v1/ready", get(ready))
        .route("/api/v1/tasks", post(tasks::add).get(tasks::list))
        .route("/api/v1/tasks/cancel", post(bulk::cancel))
        .route("/api/v1/tasks/retry", post(bulk::retry))
        .route("/api/v1/tasks/delete", post(bulk::delete))
        .route("/api/v1/tasks/{id}", get(tasks::get).delete(bulk::delete_one))
        .route("/api/v1/tasks/{id}/cancel", post(tasks::cancel))
        .route("/api/v1/tasks/{id}/retry", post(tasks::retry))
        .route("/api/v1/queues", get(queues::list))
        .route("/api/v1/queues/{queue}/pause", post(queues::pause))
        .route("/api/v1/queues/{queue}/resume", post(queues::resume))
        .route("/api/v1/schedules", get(control::schedules))
        .route("/api/v1/schedules/{name}/pause", post(control::pause_schedule))
        .route("/api/v1/schedules/{name}/resume", post(control::resume_schedule))
        .route("/api/v1/schedules/{name}/trigger", post(control::trigger_schedule))
        .route("/api/v1/stats", get(control::stats))
        .route("/api/v1/runners", get(control::runners))
        .route("/api/v1/plugins", get(plugins::list))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such endpoint under /api/v1") })
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(json_errors))
        .with_state(state)
}

/// Reads need a token's `read` role, anything else `write`; without tokens, everyone may.
async fn authorize(State(state): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    if state.access.tokens.is_empty() || OPEN_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let needed = if matches!(*req.method(), Method::GET | Method::HEAD) { Role::Read } else { Role::Write };
    let presented = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented.and_then(|t| state.access.role_of(t.trim())) {
        None => {
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "a valid `Authorization: Bearer TOKEN` is needed")
                .into_response()
        }
        Some(role) if role < needed => {
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", "this token may only read").into_response()
        }
        Some(_) => next.run(req).await,
    }
}

async fn health(State(state): State<Arc<ApiState>>) -> Result<Json<serde_json::Value>, ApiError> {
    state.client.store().counts().await?;
    Ok(Json(serde_json::json!({"status": "ok"})))
}

/// The tables exist and the plugins directory can be read: this server can take tasks.
async fn ready(State(state): State<Arc<ApiState>>) -> Result<Json<serde_json::Value>, ApiError> {
    state.client.store().check_migrated().await?;
    state.client.catalog().check_dir().map_err(|e| {
        tracing::warn!("not ready: {e}");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the plugins directory cannot be read")
    })?;
    Ok(Json(serde_json::json!({"status": "ready"})))
}

/// Errors axum answers itself (a body too large, a wrong method, a path it cannot decode) as
/// JSON like every other error.
/// A body announced over the limit is refused before it is read.
async fn json_errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let announced = req.headers().get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
    let response = if announced.is_some_and(|n: u64| n > MAX_BODY_BYTES as u64) {
        StatusCode::PAYLOAD_TOO_LARGE.into_response()
    } else {
        next.run(req).await
    };
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (code, message) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ("too-large", format!("the body is over {} MiB", MAX_BODY_BYTES >> 20)),
        StatusCode::METHOD_NOT_ALLOWED => ("method-not-allowed", format!("this endpoint does not take {method}")),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ("unsupported-media-type", "the body is JSON".to_string()),
        s if s.is_client_error() => {
            let text = axum::body::to_bytes(response.into_body(), 4096).await.unwrap_or_default();
            ("invalid", String::from_utf8_lossy(&text).trim().to_string())
        }
        _ => ("internal", "the server failed: its log says why".to_string()),
    };
    ApiError::new(status, code, message).into_response()
}

/// An error as the API answers it.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }

    pub(crate) fn bad(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::InvalidJson(_) => Self::bad("invalid-json", message),
            Error::Invalid { .. } => Self::bad("invalid", message),
            Error::UnknownHandler { .. } => Self::bad("unknown-handler", message),
            Error::BrokenHandler { .. } => Self::bad("handler-broken", message),
            Error::TaskNotFound(_) | Error::ScheduleNotFound(_) => {
                Self::new(StatusCode::NOT_FOUND, "not-found", message)
            }
            Error::CannotRetry { .. } => Self::new(StatusCode::CONFLICT, "conflict", message),
            e => {
                // The database's own words stay in the server's log.
                tracing::warn!("the API could not answer: {e}");
                let (status, code) = if e.is_retryable() || matches!(e, Error::Connect { .. } | Error::NotMigrated) {
                    (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, "internal")
                };
                Self::new(status, code, "the queue could not answer: try again; the server's log says why")
            }
        }
    }
}
