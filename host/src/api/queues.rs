//! Queues: depth, lag and limits; pause and resume.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;

use super::{ApiError, ApiState};

pub(super) async fn list(State(state): State<Arc<ApiState>>) -> Result<Json<serde_json::Value>, ApiError> {
    let queues = state.client.queues().await?;
    Ok(Json(serde_json::json!({ "queues": queues })))
}

pub(super) async fn pause(
    state: State<Arc<ApiState>>,
    queue: Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_paused(state, queue, true).await
}

pub(super) async fn resume(
    state: State<Arc<ApiState>>,
    queue: Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_paused(state, queue, false).await
}

/// `changed` is false when the queue was so already.
async fn set_paused(
    State(state): State<Arc<ApiState>>,
    Path(queue): Path<String>,
    paused: bool,
) -> Result<Json<serde_json::Value>, ApiError> {
    let changed =
        if paused { state.client.pause_queue(&queue).await? } else { state.client.resume_queue(&queue).await? };
    Ok(Json(serde_json::json!({ "queue": queue, "paused": paused, "changed": changed })))
}
