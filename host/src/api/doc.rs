//! The API's OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` attributes and
//! the types they take and give: served at `/api/openapi.json`, and what the tests check the
//! live server against.

use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// Every error: a stable code and a message for a person.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// An error's code and words.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// `invalid-json`, `invalid`, `unknown-handler`, `handler-broken`, `unauthorized`,
    /// `forbidden`, `not-found`, `method-not-allowed`, `conflict`, `deleted` (a task its success
    /// deleted), `too-many-tasks`,
    /// `too-large`, `unavailable`, `no-version` (deploys), `refused` (a component not deployed).
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
}

/// The errors any endpoint may answer.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // only its description is used
pub enum Errors {
    /// Bad input: the message names what is wrong; nothing was changed.
    #[response(status = 400)]
    Invalid(ErrorBody),
    /// No valid bearer token.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// A `read` token asked for a change, or a `write` token for a deploy.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// No such task, schedule or endpoint.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The task is not in a state that allows this.
    #[response(status = 409)]
    Conflict(ErrorBody),
    /// `deleted`: the task succeeded and its success deleted it (its queue deletes its successes,
    /// `on_success = delete`); the message says when. Only its end is kept.
    #[response(status = 410)]
    Gone(ErrorBody),
    /// Too many tasks or ids, or a body over 16 MiB.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// The database cannot answer now: try again.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// `{"status": "ok"}` or `{"status": "ready"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// `ok`.
    pub status: String,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "taskhost",
        description = "A durable SQL task queue whose handlers are sandboxed WebAssembly components.",
        license(name = "Apache-2.0")
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerTokens),
    security(("bearer" = [])),
    tags(
        (name = "tasks", description = "Queue, read, cancel, retry and delete tasks"),
        (name = "queues", description = "Depth, lag and pauses"),
        (name = "limits", description = "Flow-control limits, changed live"),
        (name = "schedules", description = "Periodic tasks"),
        (name = "operations", description = "Health, statistics, runners and plugins"),
    )
)]
/// The OpenAPI document of the API, made from the handlers and types.
pub struct ApiDoc;

struct BearerTokens;

impl Modify for BearerTokens {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "A token of the operator's `[api] tokens`: `read`, `write` for changes, `deploy` for deploys and rollbacks",
            ))
            .build();
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}
