//! Schedules (list, pause, resume, trigger), statistics and live runners.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::doc::Errors;
use super::{ApiError, ApiState};
use crate::error::Error;
use crate::model::{Runner, TaskId};
use crate::schedule::Schedule;
use crate::stats::{HandlerStats, Minute};

#[derive(Serialize, ToSchema)]
pub(super) struct Schedules {
    schedules: Vec<Schedule>,
}

/// The periodic tasks, as `taskhost schedule list --json` shows them.
#[utoipa::path(get, path = "/api/v1/schedules", operation_id = "list_schedules", tag = "schedules",
    responses((status = 200, description = "Done", body = Schedules), Errors))]
pub(super) async fn schedules(State(state): State<Arc<ApiState>>) -> Result<Json<Schedules>, ApiError> {
    Ok(Json(Schedules { schedules: state.client.schedules().await? }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct SchedulePaused {
    name: String,
    paused: bool,
}

/// Pause a schedule: it queues nothing until resumed.
#[utoipa::path(post, path = "/api/v1/schedules/{name}/pause", operation_id = "pause_schedule", tag = "schedules", params(("name" = String, Path)),
    responses((status = 200, description = "Done", body = SchedulePaused), Errors))]
pub(super) async fn pause_schedule(
    state: State<Arc<ApiState>>,
    name: Path<String>,
) -> Result<Json<SchedulePaused>, ApiError> {
    set_schedule_paused(state, name, true).await
}

/// Resume a paused schedule.
#[utoipa::path(post, path = "/api/v1/schedules/{name}/resume", operation_id = "resume_schedule", tag = "schedules", params(("name" = String, Path)),
    responses((status = 200, description = "Done", body = SchedulePaused), Errors))]
pub(super) async fn resume_schedule(
    state: State<Arc<ApiState>>,
    name: Path<String>,
) -> Result<Json<SchedulePaused>, ApiError> {
    set_schedule_paused(state, name, false).await
}

async fn set_schedule_paused(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
    paused: bool,
) -> Result<Json<SchedulePaused>, ApiError> {
    if !state.client.pause_schedule(&name, paused).await? {
        return Err(Error::ScheduleNotFound(name).into());
    }
    Ok(Json(SchedulePaused { name, paused }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct Triggered {
    name: String,
    /// The task queued.
    task: TaskId,
}

/// Queue one of the schedule's tasks now, besides its slots.
#[utoipa::path(post, path = "/api/v1/schedules/{name}/trigger", operation_id = "trigger_schedule", tag = "schedules", params(("name" = String, Path)),
    responses((status = 201, description = "Created", body = Triggered), Errors))]
pub(super) async fn trigger_schedule(
    State(state): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Triggered>), ApiError> {
    let task = state.client.trigger_schedule(&name).await?;
    Ok((StatusCode::CREATED, Json(Triggered { name, task })))
}

#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by hand, to name an unknown one
pub(super) struct StatsParams {
    handler: Option<String>,
    queue: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct Statistics {
    stats: Vec<HandlerStats>,
}

/// Statistics per handler and queue, as `taskhost stats --json` prints them.
#[utoipa::path(get, path = "/api/v1/stats", operation_id = "stats", tag = "operations", params(StatsParams),
    responses((status = 200, description = "Done", body = Statistics), Errors))]
pub(super) async fn stats(
    State(state): State<Arc<ApiState>>,
    super::params::Params(q): super::params::Params,
) -> Result<Json<Statistics>, ApiError> {
    if let Some(key) = q.keys().find(|k| !matches!(k.as_str(), "handler" | "queue")) {
        return Err(ApiError::bad("invalid", format!("{key}: no such parameter (handler, queue)")));
    }
    let stats = state.client.stats(q.get("handler").map(String::as_str), q.get("queue").map(String::as_str)).await?;
    Ok(Json(Statistics { stats }))
}

/// The most minutes a throughput series covers: older minutes are merged into hours.
const MAX_MINUTES: u32 = 60;

#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by hand, to name an unknown one
pub(super) struct ThroughputParams {
    handler: Option<String>,
    queue: Option<String>,
    /// 1 to 60; 60 when absent.
    #[param(minimum = 1, maximum = 60)]
    minutes: Option<u32>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct Throughput {
    /// One point a minute, oldest first, the current minute last.
    minutes: Vec<Minute>,
}

/// The runs ended in each of the last minutes, by how: the dashboard's chart.
#[utoipa::path(get, path = "/api/v1/stats/throughput", operation_id = "throughput", tag = "operations", params(ThroughputParams),
    responses((status = 200, description = "Done", body = Throughput), Errors))]
pub(super) async fn throughput(
    State(state): State<Arc<ApiState>>,
    super::params::Params(q): super::params::Params,
) -> Result<Json<Throughput>, ApiError> {
    let mut minutes = MAX_MINUTES;
    for (key, value) in &q {
        match key.as_str() {
            "handler" | "queue" => {}
            "minutes" => match value.parse::<u32>() {
                Ok(n) if (1..=MAX_MINUTES).contains(&n) => minutes = n,
                _ => {
                    return Err(ApiError::bad(
                        "invalid",
                        format!("minutes={value:?}: a number from 1 to {MAX_MINUTES}"),
                    ))
                }
            },
            _ => return Err(ApiError::bad("invalid", format!("{key}: no such parameter (handler, queue, minutes)"))),
        }
    }
    let (handler, queue) = (q.get("handler").map(String::as_str), q.get("queue").map(String::as_str));
    Ok(Json(Throughput { minutes: state.client.throughput(handler, queue, minutes).await? }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct Runners {
    runners: Vec<Runner>,
}

/// The runners alive now: where they run, their heartbeats and the handlers they serve.
#[utoipa::path(get, path = "/api/v1/runners", operation_id = "list_runners", tag = "operations", responses((status = 200, description = "Done", body = Runners), Errors))]
pub(super) async fn runners(State(state): State<Arc<ApiState>>) -> Result<Json<Runners>, ApiError> {
    Ok(Json(Runners { runners: state.client.store().live_runners().await? }))
}
