//! Fans out: queues one task of `handler` (default `echo`) for each item of the task's `items`, its
//! data the item when it is an object, else `{"item": ITEM}`, in `queue` when given, and returns
//! how many it queued. With `"join": HANDLER`, a task of that handler (say `join`) too, in the same
//! queue, which runs after all of them (its data `"join_data"`; `"run_anyway": true` even if some
//! die). `"max_attempts": N` gives each task it queues N runs (default 5). The children are written with this run's end, only if it ends well. Test hooks:
//! `"fail": true` fails the run after queueing (retryable: its children are not written),
//! `"fail_first": true` fails only the first attempt, `"snooze_ms": N` snoozes instead of ending
//! (its children are written). With `"approval": NAME`, it first waits for the signal NAME (a
//! person's go-ahead: `taskhost signal ID NAME --data '{"by": "ann"}'`) for `approval_timeout`
//! seconds (default a day), then fans out and returns the signal's data as `approval`; no signal
//! in time, it fails `not-approved`.
use std::time::Duration;

use taskhost::{await_signal, json, Enqueue, Error, Task, Value};

fn handle(task: Task) -> taskhost::Result<Value> {
    let items =
        task.data["items"].as_array().ok_or_else(|| Error::fail("invalid-input", "data has no \"items\" list"))?;
    let approval = match task.data["approval"].as_str() {
        None => None,
        Some(name) => {
            let timeout = Duration::from_secs(task.data["approval_timeout"].as_u64().unwrap_or(86_400));
            let no = || Error::fail("not-approved", format!("no {name:?} signal within {timeout:?}"));
            Some(await_signal(name, timeout)?.ok_or_else(no)?)
        }
    };
    let handler = task.data["handler"].as_str().unwrap_or("echo");
    let attempts = task.data["max_attempts"].as_u64().map(|n| n.min(u64::from(u32::MAX)) as u32);
    let mut parts = Vec::with_capacity(items.len());
    for item in items {
        let data = if item.is_object() { item.clone() } else { json!({ "item": item }) };
        let mut child = Enqueue::new(handler, &data);
        if let Some(queue) = task.data["queue"].as_str() {
            child = child.queue(queue);
        }
        if let Some(n) = attempts {
            child = child.max_attempts(n);
        }
        parts.push(child.send()?);
    }
    if let Some(join) = task.data["join"].as_str() {
        let data = if task.data["join_data"].is_null() { json!({}) } else { task.data["join_data"].clone() };
        let mut join = Enqueue::new(join, &data).after(&parts);
        if let Some(queue) = task.data["queue"].as_str() {
            join = join.queue(queue);
        }
        if let Some(n) = attempts {
            join = join.max_attempts(n);
        }
        if task.data["run_anyway"] == json!(true) {
            join = join.run_anyway();
        }
        join.send()?;
    }
    if task.data["fail"] == json!(true) || (task.data["fail_first"] == json!(true) && task.attempt == 1) {
        return Err(Error::retry("asked-to-fail", format!("failed after queueing {}", items.len())));
    }
    if let Some(ms) = task.data["snooze_ms"].as_u64() {
        return Err(Error::snooze(std::time::Duration::from_millis(ms)));
    }
    match approval {
        Some(approval) => Ok(json!({ "queued": items.len(), "approval": approval })),
        None => Ok(json!({ "queued": items.len() })),
    }
}

taskhost::handler!(handle);
