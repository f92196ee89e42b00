//! Queues: depth, lag and limits; pause and resume.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::doc::Errors;
use super::{ApiError, ApiState};
use crate::client::MAX_KEYS_LISTED;
use crate::store::{KeyInfo, QueueInfo};

#[derive(Serialize, ToSchema)]
pub(super) struct Queues {
    queues: Vec<QueueInfo>,
}

/// Every queue that holds unfinished tasks, is paused or has a flow-control limit: its due, later
/// and running tasks, lag (`oldest_due`), `max_running`, `rate_limit`, the due tasks its limit
/// holds back now (`held_back`) and pause.
#[utoipa::path(get, path = "/api/v1/queues", operation_id = "list_queues", tag = "queues", responses((status = 200, description = "Done", body = Queues), Errors))]
pub(super) async fn list(State(state): State<Arc<ApiState>>) -> Result<Json<Queues>, ApiError> {
    Ok(Json(Queues { queues: state.client.queues().await? }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct Paused {
    queue: String,
    paused: bool,
    /// False when the queue was so already.
    changed: bool,
}

/// Pause a queue: workers claim nothing more from it and finish what they run.
#[utoipa::path(post, path = "/api/v1/queues/{queue}/pause", operation_id = "pause_queue", tag = "queues", params(("queue" = String, Path)),
    responses((status = 200, description = "Done", body = Paused), Errors))]
pub(super) async fn pause(state: State<Arc<ApiState>>, queue: Path<String>) -> Result<Json<Paused>, ApiError> {
    set_paused(state, queue, true).await
}

/// Resume a paused queue.
#[utoipa::path(post, path = "/api/v1/queues/{queue}/resume", operation_id = "resume_queue", tag = "queues", params(("queue" = String, Path)),
    responses((status = 200, description = "Done", body = Paused), Errors))]
pub(super) async fn resume(state: State<Arc<ApiState>>, queue: Path<String>) -> Result<Json<Paused>, ApiError> {
    set_paused(state, queue, false).await
}

async fn set_paused(
    State(state): State<Arc<ApiState>>,
    Path(queue): Path<String>,
    paused: bool,
) -> Result<Json<Paused>, ApiError> {
    let changed =
        if paused { state.client.pause_queue(&queue).await? } else { state.client.resume_queue(&queue).await? };
    Ok(Json(Paused { queue, paused, changed }))
}

#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by hand, to name an unknown one
pub(super) struct KeysParams {
    /// Of this queue only.
    queue: Option<String>,
    /// 1 to 1,000; 100 when absent.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct Keys {
    /// The longest-waiting first.
    keys: Vec<KeyInfo>,
}

/// The keys with unfinished tasks (fair shares), of one queue or every one, the longest-waiting
/// first: each one's due, later and running tasks, since when it has waited, its weight.
#[utoipa::path(get, path = "/api/v1/keys", operation_id = "list_keys", tag = "queues", params(KeysParams),
    responses((status = 200, description = "Done", body = Keys), Errors))]
pub(super) async fn keys(
    State(state): State<Arc<ApiState>>,
    super::params::Params(q): super::params::Params,
) -> Result<Json<Keys>, ApiError> {
    let mut limit = DEFAULT_KEYS;
    for (key, value) in &q {
        match key.as_str() {
            "queue" => {}
            "limit" => match value.parse::<u32>() {
                Ok(n) if (1..=MAX_KEYS_LISTED).contains(&n) => limit = n,
                _ => {
                    let why = format!("limit={value:?}: a number from 1 to {MAX_KEYS_LISTED}");
                    return Err(ApiError::bad("invalid", why));
                }
            },
            _ => return Err(ApiError::bad("invalid", format!("{key}: no such parameter (queue, limit)"))),
        }
    }
    Ok(Json(Keys { keys: state.client.keys(q.get("queue").map(String::as_str), limit).await? }))
}

/// Keys listed when the caller does not say.
const DEFAULT_KEYS: u32 = 100;
