//! Joins: runs after other tasks (queued by `fan-out` with `"join"`, or added `--after`) and
//! returns what they came to: how many, how many succeeded, how many results were left out, and
//! their results in order. With `"sum": FIELD`, the sum of that number in each result instead of
//! the results.
use taskhost::{json, Task, Value};

fn handle(task: Task) -> taskhost::Result<Value> {
    let found = taskhost::dependencies()?;
    let succeeded = found.iter().filter(|d| d.succeeded).count();
    let left_out = found.iter().filter(|d| d.results_left_out).count();
    let mut out = json!({ "tasks": found.len(), "succeeded": succeeded, "left_out": left_out });
    match task.data["sum"].as_str() {
        Some(field) => out["sum"] = json!(found.iter().filter_map(|d| d.results[field].as_f64()).sum::<f64>()),
        None => out["results"] = found.into_iter().map(|d| d.results).collect(),
    }
    Ok(out)
}

taskhost::handler!(handle);
