//! Tasks: queue, list, read, cancel, retry.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Extension;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::doc::Errors;
use super::{ApiError, ApiState};
use crate::error::Error;
use crate::model::{Added, NewTask, RunStatus, Task, TaskDetail, TaskFilter, TaskId, TaskInput, TaskState};

/// Most tasks one request may queue.
pub const MAX_TASKS_PER_REQUEST: usize = 10_000;
/// Most tasks one page lists, and how many when `limit` is not given.
const MAX_PAGE: u32 = 1_000;
const DEFAULT_PAGE: u32 = 100;
/// Most bytes of task data one page holds (it holds at least one task).
pub const PAGE_BYTES: usize = 4 << 20;
/// Tasks read from the database at a time while a page is made.
const PAGE_CHUNK: usize = 25;
/// Pages made at once; more wait.
pub(super) const PAGES_AT_ONCE: usize = 4;

/// A task, or a batch of them.
#[derive(serde::Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // the body is read by hand, to name the task at fault
pub(super) enum AddBody {
    One(Box<TaskInput>),
    Many(Batch),
}

#[derive(serde::Deserialize, ToSchema)]
#[allow(dead_code)]
pub(super) struct Batch {
    /// Up to 10,000 tasks.
    tasks: Vec<TaskInput>,
}

/// What was queued: the task (`created` false: a task holding its unique key exists, and
/// `id` is that one's), or each of a batch in order.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub(super) enum AddAnswer {
    One(Added),
    Many { tasks: Vec<Added> },
}

/// Queue one task, or `{"tasks": [...]}`: all are checked before any is queued, and an error
/// names the first at fault (`tasks[i]: ...`).
#[utoipa::path(post, path = "/api/v1/tasks", operation_id = "add_tasks", tag = "tasks",
    request_body(content = inline(AddBody), description = "A task or `{\"tasks\": [...]}`"),
    responses((status = 201, description = "Created", body = AddAnswer), Errors))]
pub(super) async fn add(
    State(state): State<Arc<ApiState>>,
    body: Bytes,
) -> Result<(StatusCode, Json<AddAnswer>), ApiError> {
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
        let input: TaskInput = super::error::from_json(v).map_err(|mut e| {
            e.message = format!("{}{}", at(i), e.message);
            e
        })?;
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
    let one = tasks.len() == 1;
    let added = match state.client.add_many(tasks).await {
        // A batch of one goes the single path in the store, which names no place.
        Err(e @ Error::Invalid { .. }) if many && one => {
            return Err(Error::InBatch { index: 0, error: Box::new(e) }.into())
        }
        other => other?,
    };
    let answer = match (many, added.first()) {
        (false, Some(one)) => AddAnswer::One(*one),
        _ => AddAnswer::Many { tasks: added },
    };
    Ok((StatusCode::CREATED, Json(answer)))
}

/// The filters of a page of tasks.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by hand, to say which is wrong and why
pub(super) struct ListParams {
    /// The status of the task's latest run.
    #[param(inline)]
    status: Option<RunStatus>,
    /// Where the task is in its life (`awaiting-retry` leaves dead letters out, whose latest run
    /// also failed).
    #[param(inline)]
    state: Option<TaskState>,
    queue: Option<String>,
    handler: Option<String>,
    /// Only dead letters.
    dead: Option<bool>,
    /// Only tasks whose data contains this text (case-sensitive).
    text: Option<String>,
    /// `newest` (the default) or `oldest` first.
    #[param(pattern = "^(newest|oldest)$")]
    order: Option<String>,
    /// 1 to 1000; 100 when absent.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The `next` of the page before.
    after: Option<TaskId>,
    /// Only the tasks this task's runs queued (its children).
    parent: Option<TaskId>,
}

/// A page of tasks, and the cursor of the next one.
#[derive(Serialize, ToSchema)]
pub(super) struct TaskPage {
    tasks: Vec<Task>,
    /// Pass it as `after` for the next page; null at the end.
    next: Option<TaskId>,
}

/// A page of tasks (without their runs), newest first unless `order=oldest`.
#[utoipa::path(get, path = "/api/v1/tasks", operation_id = "list_tasks", tag = "tasks", params(ListParams),
    responses((status = 200, description = "Done", body = TaskPage), Errors))]
pub(super) async fn list(
    State(state): State<Arc<ApiState>>,
    super::params::Params(q): super::params::Params,
) -> Result<Json<TaskPage>, ApiError> {
    let mut f = TaskFilter { newest_first: true, limit: Some(DEFAULT_PAGE), ..Default::default() };
    for (key, value) in &q {
        let bad = |why: &str| ApiError::bad("invalid", format!("{key}={value:?}: {why}"));
        match key.as_str() {
            "status" => match value.parse::<RunStatus>().map_err(|e| bad(&e.to_string()))? {
                s if s.is_of_tasks() => f.status = Some(s),
                _ => return Err(bad("a task's status is never snoozed: a snoozed task is scheduled")),
            },
            "state" => f.state = Some(value.parse::<TaskState>().map_err(|_| bad(&states()))?),
            "queue" => f.queue = Some(value.clone()),
            "handler" => f.handler = Some(value.clone()),
            "dead" => f.dead = value.parse().map_err(|_| bad("true or false"))?,
            "text" => f.text = Some(value.clone()),
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
            "parent" => f.parent = Some(value.parse::<TaskId>().map_err(|_| bad("a task id"))?),
            _ => {
                let known = "status, state, queue, handler, dead, text, order, limit, after, parent";
                return Err(bad(&format!("no such parameter ({known})")));
            }
        }
    }
    let (tasks, next) = page(&state, f).await?;
    Ok(Json(TaskPage { tasks, next }))
}

/// What a `state` may be, for the error that names a wrong one.
fn states() -> String {
    let all: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
    format!("one of {}", all.join(", "))
}

/// The tasks of a page, read a few at a time, until `limit` or until their data fills
/// [`PAGE_BYTES`] (at least one task): a page of large tasks is shorter, its `next` where it
/// ended. At most [`PAGES_AT_ONCE`] pages are read at once.
async fn page(state: &ApiState, mut f: TaskFilter) -> Result<(Vec<Task>, Option<TaskId>), ApiError> {
    let _turn = state.pages.acquire().await.ok();
    let limit = f.limit.unwrap_or(DEFAULT_PAGE) as usize;
    let (mut tasks, mut bytes) = (Vec::new(), 0usize);
    loop {
        let asked = (limit - tasks.len()).min(PAGE_CHUNK);
        f.limit = Some(asked as u32);
        let found = state.client.list(&f).await?;
        let ended = found.len() < asked;
        for t in found {
            bytes += t.data.len();
            if bytes > PAGE_BYTES && !tasks.is_empty() {
                let next = tasks.last().map(|t: &Task| t.id);
                return Ok((tasks, next));
            }
            tasks.push(t);
        }
        let last = tasks.last().map(|t| t.id);
        if ended {
            return Ok((tasks, None));
        }
        if tasks.len() == limit {
            return Ok((tasks, last));
        }
        f.after = last;
    }
}

/// A task and its runs (progress, partial and final results, logs, error, digest, fuel), and
/// the tasks it runs after, as `taskhost show --json` prints them. With `wait` (a duration up to
/// 60 s), answers once the task is final or the wait has passed, whichever comes first.
#[utoipa::path(get, path = "/api/v1/tasks/{id}", operation_id = "get_task", tag = "tasks",
    params(("id" = TaskId, Path),
        ("wait" = Option<String>, Query, description = "Answer when the task is final (succeeded, dead, cancelled) or after this long (`30s`, at most `60s`), whichever comes first")),
    responses((status = 200, description = "Done", body = TaskDetail), Errors))]
pub(super) async fn get(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    super::params::Params(q): super::params::Params,
    stopping: Option<Extension<super::wait::Stopping>>,
    held: Option<Extension<super::server::LongHeld>>,
) -> Result<axum::response::Response, ApiError> {
    let id = task_id(&id)?;
    let mut within = None;
    for (key, value) in &q {
        match key.as_str() {
            "wait" => within = Some(super::wait::parse(value)?),
            _ => return Err(ApiError::bad("invalid", format!("{key}={value:?}: no such parameter (wait)"))),
        }
    }
    if let Some(within) = within {
        let store = state.client.store();
        let final_now = || async { Ok::<_, ApiError>(store.get_task(id).await?.is_none_or(|t| t.state.is_final())) };
        match held.map(|Extension(h)| h.take(true)).transpose() {
            Ok(_turn) => {
                let stopping = stopping.map(|Extension(s)| s);
                // Its row is kept when it succeeds, in a queue that deletes its successes: this
                // wait answers with it then (marked before the first look, which then finds it).
                let first_look = async {
                    store.keep_tasks(&[id]).await?;
                    final_now().await
                };
                if let Some(detail) = state.waits.until_final(store, id, within, stopping, first_look).await? {
                    // When the server answered, beside when the client heard it (`bench/wait.sh`).
                    tracing::debug!(task = id, "a wait answered at its task's end");
                    return Ok(Json(&*detail).into_response());
                }
            }
            // No connection left to hold: a task final already is answered all the same.
            Err(busy) if !final_now().await? => return Err(busy),
            Err(_) => {}
        }
    }
    let (task, runs) = state.client.show(id).await?;
    let after = state.client.dependencies(id).await?;
    let signals = state.client.signals(id).await?;
    Ok(Json(TaskDetail::new(task, runs).with_after(after).with_signals(signals)).into_response())
}

/// Send the signal `name` to an unfinished task, the body its data (a JSON document, `{}` for
/// none): kept until a run of the task reads it (`await-signal`); a task awaiting it is due at
/// once (`woke`). 409 when the task has finished, or holds 1,000 signals no run has read.
#[utoipa::path(post, path = "/api/v1/tasks/{id}/signals/{name}", operation_id = "signal_task", tag = "tasks",
    params(("id" = TaskId, Path), ("name" = String, Path)),
    request_body(content = serde_json::Value, description = "The signal's data, a JSON document"),
    responses((status = 201, description = "Sent", body = crate::model::SignalSent), Errors))]
pub(super) async fn signal(
    State(state): State<Arc<ApiState>>,
    Path((id, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<(StatusCode, Json<crate::model::SignalSent>), ApiError> {
    let id = task_id(&id)?;
    let data = match std::str::from_utf8(&body) {
        Ok(text) if text.trim().is_empty() => {
            return Err(ApiError::bad("invalid-json", "the body is the signal's data, a JSON document: {} for none"));
        }
        Ok(text) => text,
        Err(_) => return Err(ApiError::bad("invalid-json", "the body is not UTF-8 text")),
    };
    Ok((StatusCode::CREATED, Json(state.client.signal(id, &name, data).await?)))
}

#[derive(Serialize, ToSchema)]
pub(super) struct CancelledOne {
    id: TaskId,
    cancelled: bool,
    /// With `with_children=true`: the unfinished tasks under it cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    children_cancelled: Option<u64>,
}

/// The options of a task's cancel.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by hand, to say which is wrong and why
pub(super) struct CancelParams {
    /// Cancel every unfinished task under it too (its children, their children, ...), a finished
    /// task's included.
    with_children: Option<bool>,
}

/// Cancel an unfinished task: a waiting one never runs, a running one is stopped by its worker.
/// 409 when it has finished already (unless `with_children`, which cancels what is under it).
#[utoipa::path(post, path = "/api/v1/tasks/{id}/cancel", operation_id = "cancel_task", tag = "tasks",
    params(("id" = TaskId, Path), CancelParams),
    responses((status = 200, description = "Done", body = CancelledOne), Errors))]
pub(super) async fn cancel(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
    super::params::Params(q): super::params::Params,
) -> Result<Json<CancelledOne>, ApiError> {
    let id = task_id(&id)?;
    let mut with_children = false;
    for (key, value) in &q {
        match (key.as_str(), value.as_str()) {
            ("with_children", "true") => with_children = true,
            ("with_children", "false") => {}
            _ => return Err(ApiError::bad("invalid", format!("{key}={value:?}: only with_children=true|false"))),
        }
    }
    if with_children {
        state.client.show(id).await?;
        let done = state.client.cancel_with_children(&[id]).await?;
        let under = done.iter().filter(|t| **t != id).count() as u64;
        return Ok(Json(CancelledOne { id, cancelled: done.contains(&id), children_cancelled: Some(under) }));
    }
    if state.client.cancel(&[id]).await?.contains(&id) {
        return Ok(Json(CancelledOne { id, cancelled: true, children_cancelled: None }));
    }
    let (task, _) = state.client.show(id).await?;
    let message = format!("task {id} is {}: only unfinished tasks can be cancelled", task.state);
    Err(ApiError::new(StatusCode::CONFLICT, "conflict", message))
}

#[derive(Serialize, ToSchema)]
pub(super) struct RetriedOne {
    id: TaskId,
    /// The attempt its next run will be (the run is made when a worker starts it).
    attempt: u32,
}

/// Schedule a finished task again, now: a dead letter, a cancelled task, or a succeeded one to run it again; the
/// attempt its next run will be.
#[utoipa::path(post, path = "/api/v1/tasks/{id}/retry", operation_id = "retry_task", tag = "tasks", params(("id" = TaskId, Path)),
    responses((status = 200, description = "Done", body = RetriedOne), Errors))]
pub(super) async fn retry(
    State(state): State<Arc<ApiState>>,
    Path(id): Path<String>,
) -> Result<Json<RetriedOne>, ApiError> {
    let id = task_id(&id)?;
    let attempt = state.client.retry(id).await?;
    Ok(Json(RetriedOne { id, attempt }))
}

pub(super) fn task_id(text: &str) -> Result<TaskId, ApiError> {
    text.parse().map_err(|_| ApiError::bad("invalid", format!("{text:?} is not a task id")))
}
