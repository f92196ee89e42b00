//! Actions on many tasks: cancel, retry (replay) and delete, by ids a person picked, by queue
//! and handler, or every task (`"all": true`). Each applies only where it can: cancelling to
//! unfinished tasks, replaying to dead letters or cancelled tasks (never to succeeded ones, which
//! run again only one by one), deleting to finished tasks.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::doc::Errors;
use super::tasks::{task_id, MAX_TASKS_PER_REQUEST};
use super::{ApiError, ApiState};
use crate::model::TaskId;
use crate::store::{BulkFilter, Finished, Replay, Unfinished};

/// Which tasks: some of `ids`, `queue` and `handler` (all given must match), or `all` alone.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub(super) struct Selection {
    /// Up to 10,000.
    #[schema(min_items = 1, max_items = 10000)]
    ids: Option<Vec<TaskId>>,
    queue: Option<String>,
    handler: Option<String>,
    /// Every task (alone).
    #[serde(default)]
    all: bool,
}

const SELECTION: [&str; 4] = ["ids", "queue", "handler", "all"];

impl Selection {
    fn filter(self) -> Result<BulkFilter, ApiError> {
        let named = self.ids.is_some() || self.queue.is_some() || self.handler.is_some();
        if named == self.all {
            let why =
                if self.all { "\"all\" goes alone" } else { "name the tasks: ids, queue, handler, or \"all\": true" };
            return Err(ApiError::bad("invalid", why));
        }
        match &self.ids {
            Some(ids) if ids.is_empty() => return Err(ApiError::bad("invalid", "\"ids\" is empty")),
            Some(ids) if ids.len() > MAX_TASKS_PER_REQUEST => {
                let message = format!("{} ids in one request: at most {MAX_TASKS_PER_REQUEST}", ids.len());
                return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too-many-tasks", message));
            }
            _ => {}
        }
        Ok(BulkFilter { queue: self.queue, handler: self.handler, ids: self.ids })
    }
}

/// A selection, and which of its unfinished tasks.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct CancelBody {
    #[serde(flatten)]
    #[allow(dead_code)] // read apart, by `parse`: here for the document
    selection: Selection,
    /// Only tasks waiting (`scheduled`) or `running`; both when absent.
    #[schema(pattern = "^(scheduled|running)$")]
    status: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct CancelledMany {
    cancelled: u64,
    /// Of those, how many were running: their workers stop them.
    running: u64,
}

/// Cancel the unfinished tasks of a selection.
#[utoipa::path(post, path = "/api/v1/tasks/cancel", operation_id = "cancel_tasks", tag = "tasks", request_body = CancelBody,
    responses((status = 200, description = "Done", body = CancelledMany), Errors))]
pub(super) async fn cancel(State(state): State<Arc<ApiState>>, body: Bytes) -> Result<Json<CancelledMany>, ApiError> {
    let (picked, body): (_, CancelBody) = parse(&body, &["status"])?;
    let which = match body.status.as_deref() {
        None => Unfinished::Any,
        Some("scheduled") => Unfinished::Waiting,
        Some("running") => Unfinished::Running,
        Some(other) => return Err(ApiError::bad("invalid", format!("status {other:?}: scheduled or running"))),
    };
    let done = state.client.cancel_matching(&picked, which).await?;
    Ok(Json(CancelledMany { cancelled: done.tasks, running: done.running }))
}

/// A selection, and which of its finished tasks.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct RetryBody {
    #[serde(flatten)]
    #[allow(dead_code)]
    selection: Selection,
    /// `dead` (the default) or `cancelled`.
    #[schema(pattern = "^(dead|cancelled)$")]
    of: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct RetriedMany {
    retried: u64,
}

/// Schedule again the dead letters (or cancelled tasks) of a selection. One whose unique key
/// another task holds stays as it is.
#[utoipa::path(post, path = "/api/v1/tasks/retry", operation_id = "retry_tasks", tag = "tasks", request_body = RetryBody,
    responses((status = 200, description = "Done", body = RetriedMany), Errors))]
pub(super) async fn retry(State(state): State<Arc<ApiState>>, body: Bytes) -> Result<Json<RetriedMany>, ApiError> {
    let (picked, body): (_, RetryBody) = parse(&body, &["of"])?;
    let which = match body.of.as_deref() {
        None | Some("dead") => Replay::Dead,
        Some("cancelled") => Replay::Cancelled,
        Some(other) => return Err(ApiError::bad("invalid", format!("of {other:?}: dead or cancelled"))),
    };
    let n = state.client.replay(which, &picked).await?;
    Ok(Json(RetriedMany { retried: n }))
}

/// A selection, and which of its finished tasks.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct DeleteBody {
    #[serde(flatten)]
    #[allow(dead_code)]
    selection: Selection,
    /// `succeeded`, `cancelled`, `dead` or `finished` (the default: any of them).
    #[schema(pattern = "^(succeeded|cancelled|dead|finished)$")]
    of: Option<String>,
    /// Only tasks finished longer ago than this (`7d`, `12h`).
    older_than: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct DeletedMany {
    deleted: u64,
}

/// Delete the finished tasks of a selection, with their runs.
#[utoipa::path(post, path = "/api/v1/tasks/delete", operation_id = "delete_tasks", tag = "tasks", request_body = DeleteBody,
    responses((status = 200, description = "Done", body = DeletedMany), Errors))]
pub(super) async fn delete(State(state): State<Arc<ApiState>>, body: Bytes) -> Result<Json<DeletedMany>, ApiError> {
    let (picked, body): (_, DeleteBody) = parse(&body, &["of", "older_than"])?;
    let which = finished(body.of.as_deref())?;
    let older_than = match body.older_than.as_deref() {
        None => std::time::Duration::ZERO,
        Some(text) => crate::text::parse_duration(text)
            .map_err(|e| ApiError::bad("invalid", format!("older_than {text:?}: {e}")))?,
    };
    let n = state.client.delete_finished(which, &picked, older_than).await?;
    Ok(Json(DeletedMany { deleted: n }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct DeletedOne {
    id: TaskId,
    deleted: bool,
}

/// Delete a finished task and its runs; 409 while it is unfinished.
#[utoipa::path(delete, path = "/api/v1/tasks/{id}", operation_id = "delete_task", tag = "tasks", params(("id" = TaskId, Path)),
    responses((status = 200, description = "Done", body = DeletedOne), Errors))]
pub(super) async fn delete_one(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<DeletedOne>, ApiError> {
    let id = task_id(&id)?;
    let one = BulkFilter { ids: Some(vec![id]), ..Default::default() };
    if state.client.delete_finished(Finished::Any, &one, std::time::Duration::ZERO).await? == 1 {
        return Ok(Json(DeletedOne { id, deleted: true }));
    }
    let (task, _) = state.client.show(id).await?;
    let message = format!("task {id} is {}: only finished tasks can be deleted", task.last_status);
    Err(ApiError::new(StatusCode::CONFLICT, "conflict", message))
}

fn finished(of: Option<&str>) -> Result<Finished, ApiError> {
    Ok(match of {
        None | Some("finished") => Finished::Any,
        Some("succeeded") => Finished::Succeeded,
        Some("cancelled") => Finished::Cancelled,
        Some("dead") => Finished::Dead,
        Some(other) => {
            return Err(ApiError::bad("invalid", format!("of {other:?}: succeeded, cancelled, dead or finished")))
        }
    })
}

/// A JSON object of the [`Selection`]'s keys and the action's `own` keys, or one line saying
/// what is wrong with it.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8], own: &[&str]) -> Result<(BulkFilter, T), ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad("invalid-json", format!("the body is not JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::bad("invalid", "the body is a JSON object"));
    };
    let (mut selection, mut action) = (serde_json::Map::new(), serde_json::Map::new());
    for (key, v) in fields {
        if SELECTION.contains(&key.as_str()) {
            selection.insert(key, v);
        } else if own.contains(&key.as_str()) {
            action.insert(key, v);
        } else {
            let known = SELECTION.iter().chain(own).copied().collect::<Vec<_>>().join(", ");
            return Err(ApiError::bad("invalid", format!("unknown field {key:?}: expected {known}")));
        }
    }
    let selection: Selection = super::error::from_json(Value::Object(selection))?;
    let action = super::error::from_json(Value::Object(action))?;
    Ok((selection.filter()?, action))
}
