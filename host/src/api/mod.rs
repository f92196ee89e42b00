//! The HTTP API: JSON under `/api/v1`, for applications in any language. `taskhost serve` serves
//! it; a Rust application mounts [`router`] in its own axum app.
//!
//! | method and path | does | role |
//! |---|---|---|
//! | `GET /api/v1/health` | the database answers: `{"status": "ok"}`, else 503 | none |
//! | `POST /api/v1/tasks` | queue one task (a [`crate::model::TaskInput`]) or `{"tasks": [...]}` | write |
//! | `GET /api/v1/tasks` | list: `status`, `queue`, `handler`, `dead`, `order`, `limit`, `after` (cursor) | read |
//! | `GET /api/v1/tasks/{id}` | a task with its runs (progress, results, logs, error, digest, fuel) | read |
//! | `POST /api/v1/tasks/{id}/cancel`, `/retry` | cancel an unfinished task; schedule a finished one again | write |
//! | `GET /api/v1/queues` | each queue's due, later and running tasks, lag, limit, pause | read |
//! | `POST /api/v1/queues/{queue}/pause`, `/resume` | pause or resume a queue | write |
//! | `GET /api/v1/schedules` | the periodic tasks, with their next slots and pauses | read |
//! | `POST /api/v1/schedules/{name}/pause`, `/resume`, `/trigger` | pause, resume, queue one now | write |
//! | `GET /api/v1/stats` | statistics per handler and queue (`handler`, `queue`), as `taskhost stats` | read |
//! | `GET /api/v1/runners` | the live runners: host, PID, heartbeat, handlers served | read |
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

mod control;
mod queues;
mod tasks;

/// Largest request body: room for a batch of tasks with their data.
pub const MAX_BODY_BYTES: usize = 16 << 20;

pub(crate) struct ApiState {
    client: Client,
    access: ApiSection,
}

/// The API's routes over `client`, answering the callers `access` names.
pub fn router(client: Client, access: ApiSection) -> Router {
    let state = Arc::new(ApiState { client, access });
    Router::new()
        .route("/api/v1/health", get(health))
        .route("/api/v1/tasks", post(tasks::add).get(tasks::list))
        .route("/api/v1/tasks/{id}", get(tasks::get))
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
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such endpoint under /api/v1") })
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Reads need a token's `read` role, anything else `write`; without tokens, everyone may.
async fn authorize(State(state): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    if state.access.tokens.is_empty() || req.uri().path() == "/api/v1/health" {
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
