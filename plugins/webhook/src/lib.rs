//! Calls a webhook with taskhost's Rust SDK: POSTs the task's `payload` as JSON to its `url` (a GET
//! when it has none) and returns the status and the answer. A 429 or 503 answer snoozes the task
//! until its Retry-After, another 5xx is retried, a 4xx is not. The URL must be granted to this handler in the operator's configuration
//! ([handlers.webhook.grants.http]).
use taskhost::{http, json, log, progress, Error, Task, Value};

fn handle(task: Task) -> taskhost::Result<Value> {
    let url = task.data["url"].as_str().ok_or_else(|| Error::fail("invalid-input", "data has no \"url\""))?;
    let timeout = task.data["timeout"].as_f64().unwrap_or(30.0);
    log::info(&format!("calling {url}"));
    let request = match &task.data["payload"] {
        Value::Null => http::get(url),
        payload => http::post(url).json(payload),
    };
    // 429 or 503: snoozed after its Retry-After; other 5xx: retried; 4xx: not.
    let response = request.timeout_secs(timeout).send()?.snooze_if_busy()?.error_for_status()?;
    progress(100);
    if response.header("content-type") == Some("application/json") {
        return Ok(json!({ "status": response.status, "json": response.json()? }));
    }
    Ok(json!({ "status": response.status, "response": response.text().chars().take(1000).collect::<String>() }))
}

taskhost::handler!(handle);
