//! Flow-control limits kept in the database: list them, change one live, take one out (what
//! `taskhost limits` does; see docs/queue.md, "Limits kept in the database").

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::doc::Errors;
use super::{ApiError, ApiState};
use crate::model::LimitChange;
use crate::store::LimitInfo;

#[derive(Serialize, ToSchema)]
pub(super) struct Limits {
    limits: Vec<LimitInfo>,
}

/// Every limit set, by name: runs in flight at most, starts per period, a queue's cap and rate per key, a
/// key's weight, who set it and when, and its runs in flight and due tasks now.
#[utoipa::path(get, path = "/api/v1/limits", operation_id = "list_limits", tag = "limits",
    responses((status = 200, description = "Done", body = Limits), Errors))]
pub(super) async fn list(State(state): State<Arc<ApiState>>) -> Result<Json<Limits>, ApiError> {
    Ok(Json(Limits { limits: state.client.limits().await? }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct LimitSet {
    /// `queue:NAME`, `handler:NAME` or `key:NAME`.
    name: String,
    /// Runs in flight at most now (None: not limited).
    max_running: Option<u32>,
    /// Starts per period now, as `N/PERIOD` (None: not limited).
    rate_limit: Option<String>,
    /// With a rate: starts allowed at once beyond its pace.
    rate_burst: Option<u32>,
    /// A queue's runs in flight of each key at most now (None: not limited).
    max_running_per_key: Option<u32>,
    /// A queue's starts per period of each key now, as `N/PERIOD` (None: not limited).
    rate_limit_per_key: Option<String>,
    /// With a rate per key: starts each key may take at once beyond its pace.
    rate_burst_per_key: Option<u32>,
    /// A queue's fuel a turn of a key buys now (None: turns counted by tasks).
    fuel_per_turn: Option<u64>,
    /// What a queue's successes do with their tasks now.
    on_success: crate::model::OnSuccess,
    /// A key's weight now (None: 1).
    weight: Option<u32>,
}

/// Change the limit `name` (`queue:NAME`, `handler:NAME` or `key:NAME`) live, for every worker
/// within a second: a field given sets its value (`null` takes it out), a field left out stays.
/// A worker's configuration file does not overwrite it.
#[utoipa::path(put, path = "/api/v1/limits/{name}", operation_id = "set_limit", tag = "limits",
    params(("name" = String, Path, description = "queue:NAME, handler:NAME or key:NAME")),
    request_body(content = LimitChange, description = "What to change"),
    responses((status = 200, description = "Done", body = LimitSet), Errors))]
pub(super) async fn set(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<LimitSet>, ApiError> {
    // As a task's add: a body not JSON is `invalid-json`, JSON that is no change `invalid`, naming the field.
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad("invalid-json", format!("the body is not JSON: {e}")))?;
    let change: LimitChange = super::error::from_json(value).map_err(|mut e| {
        e.message = format!("the body is not a limit's change: {}", e.message);
        e
    })?;
    let now = state.client.set_limit(&name, &change).await?;
    Ok(Json(LimitSet {
        name,
        max_running: now.max_running,
        rate_limit: now.rate.map(|r| r.per_period()),
        rate_burst: now.rate.map(|r| r.burst),
        max_running_per_key: now.max_running_per_key,
        rate_limit_per_key: now.rate_per_key.map(|r| r.per_period()),
        rate_burst_per_key: now.rate_per_key.map(|r| r.burst),
        fuel_per_turn: now.fuel_per_turn,
        on_success: now.on_success,
        weight: now.weight,
    }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct LimitCleared {
    name: String,
    /// False when no limit was set.
    changed: bool,
}

/// Take the limit `name` out (a worker started later with it in its file sets it again).
#[utoipa::path(delete, path = "/api/v1/limits/{name}", operation_id = "clear_limit", tag = "limits",
    params(("name" = String, Path, description = "queue:NAME, handler:NAME or key:NAME")),
    responses((status = 200, description = "Done", body = LimitCleared), Errors))]
pub(super) async fn clear(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> Result<Json<LimitCleared>, ApiError> {
    let changed = state.client.clear_limit(&name).await?;
    Ok(Json(LimitCleared { name, changed }))
}
