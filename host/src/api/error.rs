//! Errors as the API answers them: JSON with a stable code, also for what axum answers itself.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::doc::{ErrorBody, ErrorDetail};
use super::MAX_BODY_BYTES;
use crate::error::Error;

/// Errors axum answers itself (a body too large, a wrong method, a path it cannot decode) as
/// JSON like every other error.
/// A body announced over the limit is refused before it is read.
pub(super) async fn json_errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let announced = req.headers().get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
    // A deploy's body is a component, bounded as it is read.
    let bounded = !super::deploys::is_deploy(&method, req.uri().path());
    let response = if bounded && announced.is_some_and(|n: u64| n > MAX_BODY_BYTES as u64) {
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
        StatusCode::NOT_FOUND => ("not-found", "no such page".to_string()),
        s if s.is_client_error() => {
            let text = axum::body::to_bytes(response.into_body(), 4096).await.unwrap_or_default();
            ("invalid", String::from_utf8_lossy(&text).trim().to_string())
        }
        _ => ("internal", "the server failed: its log says why".to_string()),
    };
    ApiError::new(status, code, message).into_response()
}

/// A JSON value read as `T`, or an `invalid` error naming the field at fault
/// (`"tasks[0].at": invalid type: integer 123, expected a string`).
pub(super) fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    read_fields(value).map_err(|message| ApiError::bad("invalid", message))
}

/// `T` read from JSON, or one line naming the field at fault (`"at": invalid type: ...`), as
/// the API and `add --many` say it.
pub fn read_fields<'de, D, T>(json: D) -> Result<T, String>
where
    D: serde::Deserializer<'de>,
    D::Error: std::fmt::Display,
    T: serde::Deserialize<'de>,
{
    serde_path_to_error::deserialize(json).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            inner.to_string()
        } else {
            format!("\"{path}\": {inner}")
        }
    })
}

/// An error as the API answers it.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    pub(super) message: String,
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
        let body = ErrorBody { error: ErrorDetail { code: self.code.to_string(), message: self.message } };
        (self.status, Json(body)).into_response()
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            Error::InvalidJson(_) => Self::bad("invalid-json", message),
            Error::Invalid { .. } | Error::HandlerName(_) => Self::bad("invalid", message),
            Error::InBatch { index, error } => {
                let mut inner = Self::from(*error);
                inner.message = format!("tasks[{index}]: {}", inner.message);
                inner
            }
            // Without the server's plugins directory: callers need not know its paths.
            Error::UnknownHandler { name, .. } | Error::NotDeployed { name, .. } => Self::bad(
                "unknown-handler",
                format!(
                    "unknown handler {name:?}: none is deployed by that name, and there is no {name}.wasm in the \
                     plugins directory"
                ),
            ),
            // No plugins directory (a server of deployed handlers alone): the handler is none of them.
            Error::PluginsDir { .. } => Self::bad(
                "unknown-handler",
                "unknown handler: none is deployed by that name, and this server has no plugins directory to look in",
            ),
            Error::BrokenHandler { .. } => Self::bad("handler-broken", message),
            Error::NoVersion { .. } => Self::bad("no-version", message),
            Error::TaskNotFound(_) | Error::ScheduleNotFound(_) => {
                Self::new(StatusCode::NOT_FOUND, "not-found", message)
            }
            // Not "not found": the task was there and succeeded; only its end is kept.
            Error::TaskDeleted { .. } => Self::new(StatusCode::GONE, "deleted", message),
            Error::CannotRetry { .. } | Error::CannotSignal { .. } => {
                Self::new(StatusCode::CONFLICT, "conflict", message)
            }
            e => {
                // The database's own words stay in the server's log.
                tracing::warn!("the API could not answer: {e}");
                let (status, code) = if e.is_unavailable() {
                    (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, "internal")
                };
                Self::new(status, code, "the queue could not answer: try again; the server's log says why")
            }
        }
    }
}
