//! {{name}}: a taskhost task handler. `sh build.sh` builds plugins/{{name}}.wasm.
wit_bindgen::generate!({ path: "wit", world: "task-handler" });

use taskhost::plugin::host::{log, set_progress};
use taskhost::plugin::types::LogLevel;

struct Handler;

fn invalid(message: String) -> HandlerError {
    HandlerError { code: "invalid-input".into(), message, retryable: false }
}

impl Guest for Handler {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).map_err(|e| invalid(e.to_string()))?;
        let name = data["name"].as_str().ok_or_else(|| invalid("no \"name\" in the data".into()))?;
        set_progress(50);
        log(LogLevel::Info, &format!("attempt {} of task {}", task.attempt, task.task_id));
        println!("printed lines land in the run's logs too");
        Ok(Some(serde_json::json!({ "hello": name }).to_string()))
    }
}

export!(Handler);
