//! Queues: depth, lag and limits; pause and resume.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::doc::Errors;
use super::{ApiError, ApiState};
use crate::store::QueueInfo;

#[derive(Serialize, ToSchema)]
pub(super) struct Queues {
    queues: Vec<QueueInfo>,
}

/// Every queue that holds unfinished tasks, is paused or has a concurrency limit: its due, later
/// and running tasks, lag (`oldest_due`), `max_running` and pause.
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
