//! Tasks: queue, list, read, cancel, retry.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::{ApiError, ApiState};
use crate::model::{task_json, NewTask, RunStatus, TaskFilter, TaskId, TaskInput};

/// Most tasks one request may queue.
pub const MAX_TASKS_PER_REQUEST: usize = 10_000;
/// Most tasks one page lists, and how many when `limit` is not given.
const MAX_PAGE: u32 = 1_000;
const DEFAULT_PAGE: u32 = 100;

/// `POST /api/v1/tasks`: one task, or `{"tasks": [...]}`. All are checked before any is queued.
pub(super) async fn add(
    State(state): State<Arc<ApiState>>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad("invalid-json", format!("the body is not JSON: {e}")))?;
    let (many, inputs) = match value {
        Value::Object(mut o) if o.contains_key("tasks") => {
            if o.len() > 1 {
                return Err(ApiError::bad("invalid", "a batch is {\"tasks\": [...]} and nothing else"));
            }
            match o.remove("tasks") {
                Some(Value::Array(items)) => (true, items),
                _ => return Err(ApiError::bad("invalid", "\"tasks\" is a list of tasks")),
            }
        }
        one => (false, vec![one]),
    };
    if inputs.len() > MAX_TASKS_PER_REQUEST {
        let message = format!("{} tasks in one request: at most {MAX_TASKS_PER_REQUEST}", inputs.len());
        return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too-many-tasks", message));
    }
    let at = |i: usize| if many { format!("tasks[{i}]: ") } else { String::new() };
    let mut tasks: Vec<NewTask> = Vec::with_capacity(inputs.len());
    for (i, v) in inputs.into_iter().enumerate() {
        let input: TaskInput =
            serde_json::from_value(v).map_err(|e| ApiError::bad("invalid", format!("{}not a task: {e}", at(i))))?;
        tasks.push(input.task().map_err(|e| ApiError::bad("invalid", format!("{}{e}", at(i))))?);
    }
    // Name the first task at fault; nothing is queued.
    match state.client.validate_each(&tasks).await {
        Ok(()) => {}
        Err((Some(i), e)) => {
            let mut err = ApiError::from(e);
            err.message = format!("{}{}", at(i), err.message);
            return Err(err);
        }
        Err((None, e)) => return Err(e.into()),
    }
    let added = state.client.add_many(tasks).await?;
    let rows: Vec<Value> = added.iter().map(|a| json!({"id": a.id, "created": a.created})).collect();
    let body = if many { json!({ "tasks": rows }) } else { rows.into_iter().next().unwrap_or(Value::Null) };
    Ok((StatusCode::CREATED, Json(body)))
}

/// `GET /api/v1/tasks?status=&queue=&handler=&dead=&order=newest|oldest&limit=&after=`: a page of
/// tasks (without their runs) and the cursor of the next page (`next`, null at the end).
pub(super) async fn list(
    State(state): State<Arc<ApiState>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let mut f = TaskFilter { newest_first: true, limit: Some(DEFAULT_PAGE), ..Default::default() };
    for (key, value) in &q {
        let bad = |why: &str| ApiError::bad("invalid", format!("{key}={value:?}: {why}"));
        match key.as_str() {
            "status" => f.status = Some(value.parse::<RunStatus>().map_err(|e| bad(&e.to_string()))?),
            "queue" => f.queue = Some(value.clone()),
            "handler" => f.handler = Some(value.clone()),
            "dead" => f.dead = value.parse().map_err(|_| bad("true or false"))?,
            "order" => {
                f.newest_first = match value.as_str() {
                    "newest" => true,
                    "oldest" => false,
                    _ => return Err(bad("newest or oldest")),
                }
            }
            "limit" => match value.parse::<u32>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => f.limit = Some(n),
                _ => return Err(bad(&format!("a number from 1 to {MAX_PAGE}"))),
            },
            "after" => f.after = Some(value.parse::<TaskId>().map_err(|_| bad("a task id (the `next` of a page)"))?),
            _ => return Err(bad("no such parameter (status, queue, handler, dead, order, limit, after)")),
        }
    }
    let found = state.client.list(&f).await?;
    let next = match (found.last(), f.limit) {
        (Some(last), Some(limit)) if found.len() == limit as usize => Some(last.id),
        _ => None,
    };
    let tasks = found
        .iter()
        .map(|t| task_json(t, &[]).map(|mut v| v["task"].take()))
        .collect::<serde_json::Result<Vec<_>>>()
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    Ok(Json(json!({ "tasks": tasks, "next": next })))
}

/// `GET /api/v1/tasks/{id}`: the task and its runs, as `taskhost show --json` prints them.
pub(super) async fn get(State(state): State<Arc<ApiState>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let (task, runs) = state.client.show(task_id(&id)?).await?;
    task_json(&task, &runs)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))
}

/// `POST /api/v1/tasks/{id}/cancel`: 409 when it has finished already.
pub(super) async fn cancel(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = task_id(&id)?;
    if state.client.cancel(&[id]).await?.contains(&id) {
        return Ok(Json(json!({"id": id, "cancelled": true})));
    }
    let (task, _) = state.client.show(id).await?;
    let message = format!("task {id} is {}: only unfinished tasks can be cancelled", task.last_status);
    Err(ApiError::new(StatusCode::CONFLICT, "conflict", message))
}

/// `POST /api/v1/tasks/{id}/retry`: a finished task scheduled again; its new run's id.
pub(super) async fn retry(State(state): State<Arc<ApiState>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let id = task_id(&id)?;
    let run = state.client.retry(id).await?;
    Ok(Json(json!({"id": id, "run": run})))
}

pub(super) fn task_id(text: &str) -> Result<TaskId, ApiError> {
    text.parse().map_err(|_| ApiError::bad("invalid", format!("{text:?} is not a task id")))
}
