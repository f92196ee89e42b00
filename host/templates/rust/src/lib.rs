//! {{name}}: a taskhost task handler. `sh build.sh` builds plugins/{{name}}.wasm.
use taskhost::{json, log, progress, Error, Task, Value};

fn handle(task: Task) -> taskhost::Result<Value> {
    let name = task.data["name"].as_str().ok_or_else(|| Error::fail("invalid-input", "no \"name\" in the data"))?;
    progress(50);
    log::info(&format!("attempt {} of task {}", task.attempt, task.id));
    println!("printed lines land in the run's logs too");
    Ok(json!({ "hello": name }))
}

taskhost::handler!(handle);
