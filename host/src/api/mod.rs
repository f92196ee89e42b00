//! The HTTP API: JSON under `/api/v1`, for applications in any language. `taskhost serve` serves
//! it; a Rust application mounts [`router`] in its own axum app.
//!
//! | method and path | does | role |
//! |---|---|---|
//! | `GET /` | the dashboard (see `dashboard.rs`): a page that works through this API | none |
//! | `GET /api/openapi.json` | the OpenAPI 3.1 document of all this ([`openapi`]) | none |
//! | `GET /metrics` | Prometheus metrics (see [`crate::metrics`]) | read |
//! | `GET /api/v1/health` | the database answers: `{"status": "ok"}`, else 503 | none |
//! | `GET /api/v1/ready` | as health, and the tables exist and handlers are deployed or the plugins directory is readable | none |
//! | `POST /api/v1/tasks` | queue one task (a [`crate::model::TaskInput`]) or `{"tasks": [...]}` | write |
//! | `GET /api/v1/tasks` | list: `status`, `queue`, `handler`, `dead`, `text`, `order`, `limit`, `after` | read |
//! | `GET /api/v1/tasks/{id}` | a task with its runs (progress, results, logs, error, digest, fuel); `wait=30s`: once it is final (see `wait.rs`) | read |
//! | `GET /api/v1/events` | task events as Server-Sent Events: `queue`, `handler`, `task` (see `events.rs`) | read |
//! | `POST /api/v1/tasks/{id}/cancel`, `/retry` | cancel an unfinished task; schedule a finished one again | write |
//! | `DELETE /api/v1/tasks/{id}` | delete a finished task and its runs | write |
//! | `POST /api/v1/tasks/cancel`, `/retry`, `/delete` | the same on many: `ids`, `queue`, `handler` or `all` | write |
//! | `GET /api/v1/queues` | each queue's due, later and running tasks, lag, limits, held back, pause | read |
//! | `GET /api/v1/keys` | each key's due, later and running tasks, wait, weight: `queue`, `limit` | read |
//! | `POST /api/v1/queues/{queue}/pause`, `/resume` | pause or resume a queue | write |
//! | `GET /api/v1/limits` | the flow-control limits, who set each, runs in flight, due, held back | read |
//! | `PUT /api/v1/limits/{name}`, `DELETE` | change a limit live, or take it out | write |
//! | `GET /api/v1/schedules` | the periodic tasks, with their next slots and pauses | read |
//! | `POST /api/v1/schedules/{name}/pause`, `/resume`, `/trigger` | pause, resume, queue one now | write |
//! | `GET /api/v1/stats` | statistics per handler and queue (`handler`, `queue`), as `taskhost stats` | read |
//! | `GET /api/v1/stats/throughput` | runs ended a minute, by how, over the last `minutes` (≤ 60) | read |
//! | `GET /api/v1/runners` | the live runners: host, PID, heartbeat, handlers served | read |
//! | `GET /api/v1/plugins` | each handler, deployed or in the directory: digest, whether it loads, limits, grants (names only) | read |
//! | `GET /api/v1/plugins/{name}/versions` | a deployed handler's versions and releases | read |
//! | `POST /api/v1/plugins/{name}/versions` | deploy a component (`multipart/form-data`: `component`, `manifest`) | deploy |
//! | `POST /api/v1/plugins/{name}/rollback` | make an earlier version active (`to`: a digest or its start) | deploy |
//!
//! Every error is JSON, `{"error": {"code": "...", "message": "..."}}`, with a 4xx status for
//! what the caller can fix and 503 when the database cannot be reached; a 5xx never carries the
//! database's own words. Callers present `Authorization: Bearer TOKEN` (see
//! [`crate::config::api`]); bodies are at most [`MAX_BODY_BYTES`], and at most
//! [`BODIES_IN_FLIGHT_BYTES`] of them are read at once. What a browser could be made to send by
//! another site is refused (see `guard.rs`). [`serve`] serves a router, bounded against slow,
//! idle and many clients ([`ServerLimits`]).

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::client::Client;
use crate::config::api::{ApiSection, Role};
use doc::{Errors, Status};
pub use error::{read_fields, ApiError};

mod bounds;
mod bulk;
mod control;
mod dashboard;
mod deploys;
pub mod doc;
mod error;
mod events;
mod feed;
mod guard;
mod kept;
mod limits;
mod marker;
mod metrics;
mod params;
mod plugins;
mod queues;
pub mod server;
mod slow;
mod tasks;
mod wait;

pub use bounds::BODIES_IN_FLIGHT_BYTES;
pub use events::MAX_TASKS as MAX_EVENT_TASKS;
pub use feed::MAX_STREAMS as MAX_EVENT_STREAMS;
pub use server::{serve, ServerLimits};
pub use tasks::PAGE_BYTES;
pub use wait::{Stopping, MAX_WAIT, MAX_WAITERS};

/// Largest request body: room for a batch of tasks with their data.
pub const MAX_BODY_BYTES: usize = 16 << 20;

pub(crate) struct ApiState {
    client: Client,
    access: ApiSection,
    /// One scan of the plugins directory at a time.
    plugin_scan: tokio::sync::Mutex<()>,
    /// The bytes of request bodies read at once (see `bounds.rs`).
    bodies: tokio::sync::Semaphore,
    /// Pages of tasks made at once (see `tasks::page`).
    pages: tokio::sync::Semaphore,
    /// One deploy at a time (see `deploys.rs`).
    deploy_turn: tokio::sync::Mutex<()>,
    /// Requests waiting for tasks' ends, and their watcher (see `wait.rs`).
    waits: Arc<wait::Waits>,
    /// Open event streams, and their reader (see `feed.rs`).
    feed: Arc<feed::Feed>,
}

impl ApiState {
    fn new(client: Client, access: ApiSection) -> Arc<Self> {
        let pages = tokio::sync::Semaphore::new(tasks::PAGES_AT_ONCE);
        let (plugin_scan, deploy_turn) = Default::default();
        let (waits, feed) = Default::default();
        let bodies = bounds::body_budget();
        Arc::new(ApiState { client, access, plugin_scan, bodies, pages, deploy_turn, waits, feed })
    }
}

/// Paths anyone may ask, token or not: a load balancer's probes and the API's description.
const OPEN_PATHS: [&str; 3] = ["/api/v1/health", "/api/v1/ready", "/api/openapi.json"];

/// The API's routes over `client`, answering the callers `access` names, with its OpenAPI
/// document at `/api/openapi.json`.
pub fn router(client: Client, access: ApiSection) -> Router {
    let state = ApiState::new(client, access);
    let (routes, doc) = described().split_for_parts();
    let doc = Arc::new(doc);
    routes
        .route("/api/openapi.json", get(move || std::future::ready(Json(doc.clone()))))
        .route("/metrics", get(metrics::scrape))
        .route("/", get(dashboard::index))
        .route("/ui/{name}", get(dashboard::asset))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such endpoint under /api/v1") })
        .layer(middleware::from_fn_with_state(state.clone(), bounds::bodies))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), guard::same_origin))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(error::json_errors))
        .layer(middleware::from_fn(bounds::nosniff))
        .with_state(state)
}

/// `/metrics` alone (Prometheus text), for a worker's `--metrics ADDR`: the same tokens rule it.
pub fn metrics_router(client: Client, access: ApiSection) -> Router {
    let state = ApiState::new(client, access);
    Router::new()
        .route("/metrics", get(metrics::scrape))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not-found", "only /metrics here") })
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), guard::same_origin))
        .layer(middleware::from_fn(error::json_errors))
        .layer(middleware::from_fn(bounds::nosniff))
        .with_state(state)
}

/// The OpenAPI 3.1 document [`router`] serves.
pub fn openapi() -> utoipa::openapi::OpenApi {
    described().into_openapi()
}

/// Every endpoint with its description: the routes and the document come from the same list.
fn described() -> OpenApiRouter<Arc<ApiState>> {
    OpenApiRouter::with_openapi(doc::ApiDoc::openapi())
        .routes(routes!(health))
        .routes(routes!(ready))
        .routes(routes!(tasks::add, tasks::list))
        .routes(routes!(bulk::cancel))
        .routes(routes!(bulk::retry))
        .routes(routes!(bulk::delete))
        .routes(routes!(tasks::get, bulk::delete_one))
        .routes(routes!(tasks::cancel))
        .routes(routes!(tasks::retry))
        .routes(routes!(tasks::signal))
        .routes(routes!(events::stream))
        .routes(routes!(queues::list))
        .routes(routes!(queues::pause))
        .routes(routes!(queues::resume))
        .routes(routes!(queues::keys))
        .routes(routes!(limits::list))
        .routes(routes!(limits::set, limits::clear))
        .routes(routes!(control::schedules))
        .routes(routes!(control::pause_schedule))
        .routes(routes!(control::resume_schedule))
        .routes(routes!(control::trigger_schedule))
        .routes(routes!(control::stats))
        .routes(routes!(control::throughput))
        .routes(routes!(control::runners))
        .routes(routes!(plugins::list))
        .routes(no_body_limit(routes!(deploys::versions, deploys::deploy)))
        .routes(routes!(deploys::rollback))
}

/// A deploy's body is a component, bounded by `[plugins] max_component_mb` as it is read
/// (`deploys.rs`), not by [`MAX_BODY_BYTES`].
fn no_body_limit(
    (schemas, paths, router): utoipa_axum::router::UtoipaMethodRouter<Arc<ApiState>>,
) -> utoipa_axum::router::UtoipaMethodRouter<Arc<ApiState>> {
    (schemas, paths, router.layer(DefaultBodyLimit::disable()))
}

/// Reads need a token's `read` role, anything else `write`; without tokens, everyone may.
async fn authorize(State(state): State<Arc<ApiState>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if state.access.tokens.is_empty() || OPEN_PATHS.contains(&path) || dashboard::is_asset(path) {
        return next.run(req).await;
    }
    let needed = match *req.method() {
        Method::GET | Method::HEAD => Role::Read,
        ref m if deploys::is_deploy(m, path) => Role::Deploy,
        _ => Role::Write,
    };
    match bearer(req.headers()).and_then(|t| state.access.role_of(t)) {
        None => {
            let mut refused = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid `Authorization: Bearer TOKEN` is needed",
            )
            .into_response();
            refused.headers_mut().insert(axum::http::header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            refused
        }
        Some(role) if role < needed => {
            let message = match needed {
                Role::Deploy => "this token may not deploy: that needs the deploy role",
                _ => "this token may only read",
            };
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).into_response()
        }
        Some(_) => next.run(req).await,
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme's case aside, as HTTP has it).
pub(super) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// How long a health probe waits for the database: a probe gets its answer in time, not after
/// the pool's wait for a connection (10 s) or a query on one that a cut network holds forever.
const HEALTH_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// The database answers (within 2 s).
#[utoipa::path(get, path = "/api/v1/health", operation_id = "health", tag = "operations", security(()),
    responses((status = 200, description = "Done", body = Status), Errors))]
async fn health(State(state): State<Arc<ApiState>>) -> Result<Json<Status>, ApiError> {
    // Not a count of the tasks: a probe every few seconds would scan the table, and wait behind a
    // lock on it (a migration's).
    match tokio::time::timeout(HEALTH_WITHIN, state.client.store().ping()).await {
        Ok(answered) => answered?,
        Err(_) => {
            tracing::warn!("health: the database did not answer within {HEALTH_WITHIN:?}");
            let message = "the database did not answer within 2 s";
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message));
        }
    }
    Ok(Json(Status { status: "ok".into() }))
}

/// The database answers, its tables exist and handlers are deployed or the plugins directory can
/// be read: this server can take tasks.
#[utoipa::path(get, path = "/api/v1/ready", operation_id = "ready", tag = "operations", security(()),
    responses((status = 200, description = "Done", body = Status), Errors))]
async fn ready(State(state): State<Arc<ApiState>>) -> Result<Json<Status>, ApiError> {
    state.client.store().check_migrated().await?;
    // Handlers deployed into the database need no directory.
    if state.client.store().release_mark().await? > 0 {
        return Ok(Json(Status { status: "ready".into() }));
    }
    state.client.catalog().check_dir().map_err(|e| {
        tracing::warn!("not ready: {e}");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the plugins directory cannot be read")
    })?;
    Ok(Json(Status { status: "ready".into() }))
}
