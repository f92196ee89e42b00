//! Deploys through the API: a handler's versions and releases, a deploy (the component and its
//! manifest as `multipart/form-data`, as `curl -F` and a browser's form send them) and a
//! rollback. Deploys and rollbacks need a token with the `deploy` role: they make any code run
//! on every worker, with the grants of its handler's name (see docs/trust.md).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Multipart, Path, Query, Request, State};
use axum::http::{Method, StatusCode};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::doc::Errors;
use super::{ApiError, ApiState};
use crate::plugins::publish::BAD_NAME;
use crate::plugins::MAX_MANIFEST_BYTES;
use crate::store::components::{HandlerVersion, Release};

/// Releases listed with a handler's versions.
const RELEASES_LISTED: u32 = 100;

/// Whether a request deploys or rolls back (the `deploy` role's; its body may be a component).
pub(super) fn is_deploy(method: &Method, path: &str) -> bool {
    method == Method::POST
        && path.strip_prefix("/api/v1/plugins/").is_some_and(|p| p.ends_with("/versions") || p.ends_with("/rollback"))
}

#[derive(Serialize, ToSchema)]
pub(super) struct Versions {
    handler: String,
    /// The newest deployed first; the active one is marked.
    versions: Vec<HandlerVersion>,
    /// Its deploys and rollbacks, the newest first (at most 100).
    releases: Vec<Release>,
}

/// A handler's deployed versions (the active one marked, with the unfinished tasks pinned to
/// each) and its releases.
#[utoipa::path(get, path = "/api/v1/plugins/{name}/versions", operation_id = "list_versions", tag = "operations",
    params(("name" = String, Path)), responses((status = 200, description = "Done", body = Versions), Errors))]
pub(super) async fn versions(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> Result<Json<Versions>, ApiError> {
    let versions = state.client.versions(&name).await?;
    let releases = state.client.releases(&name, RELEASES_LISTED).await?;
    Ok(Json(Versions { handler: name, versions, releases }))
}

/// What a deploy sends.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct DeployForm {
    /// The component (`NAME.wasm`), at most `[plugins] max_component_mb`.
    #[schema(value_type = String, format = Binary)]
    component: Vec<u8>,
    /// Its manifest (`NAME.toml`), if any: it may only lower the operator's limits.
    #[schema(value_type = Option<String>, format = Binary)]
    manifest: Option<Vec<u8>>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct DeployedInfo {
    handler: String,
    /// sha256 of the component, hex.
    digest: String,
    size: u64,
    /// The release that made it active; null when it was active already (nothing changed).
    release: Option<i64>,
    /// Its bytes were stored now (not found stored already).
    stored: bool,
}

/// Deploy a component as the handler `name`'s active version, for every worker within a
/// second: checked as a worker checks a plugin at load (a handler's name, size, manifest, the
/// `task-handler` world; not compiled here), stored once by its sha256. Refused in one line
/// (`refused`) when it cannot be used. Needs the `deploy` role.
#[utoipa::path(post, path = "/api/v1/plugins/{name}/versions", operation_id = "deploy", tag = "operations",
    params(("name" = String, Path)), request_body(content = DeployForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "Done", body = DeployedInfo), Errors))]
pub(super) async fn deploy(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    form: Multipart,
) -> Result<Json<DeployedInfo>, ApiError> {
    if !crate::plugins::valid_name(&name) {
        return Err(ApiError::bad("refused", format!("refused {name}: {BAD_NAME}")));
    }
    // One at a time (they take turns in the database anyway): one component in memory. Another
    // is refused rather than kept waiting, its body's time running out meanwhile.
    let Ok(_turn) = state.deploy_turn.try_lock() else {
        let message = "a deploy is under way on this server: try again when it ends";
        return Err(ApiError::new(StatusCode::CONFLICT, "conflict", message));
    };
    let catalog = state.client.catalog().clone();
    let (bytes, manifest) = read_form(form, catalog.policy().max_component_bytes).await?;
    let checked = tokio::task::spawn_blocking({
        let name = name.clone();
        move || catalog.check_deployable(&name, bytes, manifest, false)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("the check failed: {e}")))?;
    let component = checked.map_err(|why| ApiError::bad("refused", format!("refused {name}: {why}")))?;
    let deployed = state.client.deploy(&component, &caller(&state, &headers)).await?;
    Ok(Json(DeployedInfo {
        handler: name,
        digest: component.digest,
        size: component.bytes.len() as u64,
        release: deployed.release,
        stored: deployed.stored,
    }))
}

/// The form's `component` (at most `max` bytes) and `manifest` (at most 64 KiB, UTF-8), each
/// bounded as it is read; any other field, or one twice, is refused.
async fn read_form(mut form: Multipart, max: u64) -> Result<(Vec<u8>, Option<String>), ApiError> {
    let bad = |e: axum::extract::multipart::MultipartError| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(e.status(), "too-large", format!("the form is over {} bytes", limit(max)))
        }
        _ => ApiError::bad("invalid", format!("the form: {}", e.body_text())),
    };
    let (mut component, mut manifest) = (None, None);
    while let Some(mut field) = form.next_field().await.map_err(bad)? {
        let field_name = field.name().unwrap_or_default().to_string();
        let (slot, bound, what) = match field_name.as_str() {
            "component" => (&mut component, max, "[plugins] max_component_mb"),
            "manifest" => (&mut manifest, MAX_MANIFEST_BYTES, "a manifest's bound"),
            other => {
                let other = crate::text::bounded(other, 40, "…");
                return Err(ApiError::bad(
                    "invalid",
                    format!("the form: no field {other:?} (send component, manifest)"),
                ));
            }
        };
        if slot.is_some() {
            return Err(ApiError::bad("invalid", format!("the form: {field_name} twice")));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(bad)? {
            if (bytes.len() + chunk.len()) as u64 > bound {
                let message = format!("the form's {field_name} is over {what} ({bound} bytes)");
                return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", message));
            }
            bytes.extend_from_slice(&chunk);
        }
        *slot = Some(bytes);
    }
    let component = component.ok_or_else(|| ApiError::bad("invalid", "the form has no component"))?;
    let manifest = manifest
        .map(|m| String::from_utf8(m).map_err(|_| ApiError::bad("refused", "the manifest is not UTF-8 text")))
        .transpose()?;
    Ok((component, manifest))
}

#[derive(Deserialize, IntoParams)]
pub(super) struct RollbackTo {
    /// The version to make active: its digest, or the start of it naming one version. Without
    /// it, the version active before the active one.
    to: Option<String>,
}

/// Make an earlier version of the handler `name` active again, with a release of its own.
/// Needs the `deploy` role.
#[utoipa::path(post, path = "/api/v1/plugins/{name}/rollback", operation_id = "rollback", tag = "operations",
    params(("name" = String, Path), RollbackTo), responses((status = 200, description = "Done", body = Release), Errors))]
pub(super) async fn rollback(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
    Query(q): Query<RollbackTo>,
    headers: axum::http::HeaderMap,
) -> Result<Json<Release>, ApiError> {
    let release = state.client.rollback(&name, q.to.as_deref(), &caller(&state, &headers)).await?;
    Ok(Json(release))
}

/// The bytes a deploy's body may hold: its component and manifest at their bounds, and room for
/// the form's own lines.
fn limit(max_component: u64) -> u64 {
    max_component + MAX_MANIFEST_BYTES + (64 << 10)
}

/// A deploy's body, bounded as a whole (however its form is made: a preamble, a header that never
/// ends) at the component's bound and a little more; a body past it is refused as it is read.
pub(super) fn bounded(state: &ApiState, req: Request) -> Request {
    let max = limit(state.client.catalog().policy().max_component_bytes);
    req.map(|body| Body::new(http_body_util::Limited::new(body, usize::try_from(max).unwrap_or(usize::MAX))))
}

/// Who deploys, as recorded: the token's name, or `api` without tokens.
fn caller(state: &ApiState, headers: &axum::http::HeaderMap) -> String {
    let presented = super::bearer(headers).and_then(|t| state.access.token_of(t));
    match presented {
        Some(t) => format!("api:{}", t.name),
        None => "api".to_string(),
    }
}
