//! Schedules (list, pause, resume, trigger), statistics and live runners.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::{ApiError, ApiState};
use crate::error::Error;

pub(super) async fn schedules(State(state): State<Arc<ApiState>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "schedules": state.client.schedules().await? })))
}

pub(super) async fn pause_schedule(state: State<Arc<ApiState>>, name: Path<String>) -> Result<Json<Value>, ApiError> {
    set_schedule_paused(state, name, true).await
}

pub(super) async fn resume_schedule(state: State<Arc<ApiState>>, name: Path<String>) -> Result<Json<Value>, ApiError> {
    set_schedule_paused(state, name, false).await
}

async fn set_schedule_paused(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
    paused: bool,
) -> Result<Json<Value>, ApiError> {
    if !state.client.pause_schedule(&name, paused).await? {
        return Err(Error::ScheduleNotFound(name).into());
    }
    Ok(Json(json!({ "name": name, "paused": paused })))
}

/// Queue one of the schedule's tasks now, besides its slots; the task's id.
pub(super) async fn trigger_schedule(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let task = state.client.trigger_schedule(&name).await?;
    Ok((StatusCode::CREATED, Json(json!({ "name": name, "task": task }))))
}

/// `GET /api/v1/stats?handler=&queue=`: as `taskhost stats --json`.
pub(super) async fn stats(
    State(state): State<Arc<ApiState>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    if let Some(key) = q.keys().find(|k| !matches!(k.as_str(), "handler" | "queue")) {
        return Err(ApiError::bad("invalid", format!("{key}: no such parameter (handler, queue)")));
    }
    let stats = state.client.stats(q.get("handler").map(String::as_str), q.get("queue").map(String::as_str)).await?;
    Ok(Json(json!({ "stats": stats })))
}

/// The runners alive now: where they run, their heartbeats and the handlers they serve.
pub(super) async fn runners(State(state): State<Arc<ApiState>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "runners": state.client.store().live_runners().await? })))
}
