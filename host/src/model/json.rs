//! A task and its runs as JSON, the same for `show --json`, `list --json` and the HTTP API.

use super::{Run, Task};

/// A task and its runs as JSON: its data and each run's results as JSON values (not strings),
/// logs as an array of lines, and who produced each run's error (`error_source`).
pub fn task_json(t: &Task, runs: &[Run]) -> serde_json::Result<serde_json::Value> {
    let runs = runs
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r)?;
            if let Some(obj) = v.as_object_mut() {
                obj.insert("error_source".into(), serde_json::to_value(r.error_source())?);
                obj.insert("results".into(), json_or_null(r.results.as_deref()));
                let logs: Vec<&str> = r.logs.as_deref().map(|l| l.lines().collect()).unwrap_or_default();
                obj.insert("logs".into(), serde_json::to_value(logs)?);
            }
            Ok(v)
        })
        .collect::<serde_json::Result<Vec<_>>>()?;
    let mut task = serde_json::to_value(t)?;
    if let Some(obj) = task.as_object_mut() {
        obj.insert("data".into(), json_or_null(Some(&t.data)));
    }
    Ok(serde_json::json!({"task": task, "runs": runs}))
}

/// A stored JSON document as a value; one that does not parse (it always should) stays a string.
fn json_or_null(text: Option<&str>) -> serde_json::Value {
    match text {
        Some(s) => serde_json::from_str(s).unwrap_or_else(|_| serde_json::Value::String(s.to_string())),
        None => serde_json::Value::Null,
    }
}
