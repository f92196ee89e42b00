//! Returns its data. Test hooks: `"progress": [..]` reports each percent, `"partial": {..}`
//! stores partial results first, `"attempt_echo": true` returns what the host told it instead,
//! `"spin_after": true` never returns after reporting (until the deadline stops it).
wit_bindgen::generate!({ path: "../../wit/0.1", world: "task-handler" });

use taskhost::plugin::host::{set_progress, set_results};

struct Echo;

impl Guest for Echo {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).map_err(|e| HandlerError {
            code: "invalid-input".into(),
            message: format!("data is not JSON: {e}"),
            retryable: false,
        })?;
        if let Some(steps) = data.get("progress").and_then(|p| p.as_array()) {
            for p in steps.iter().filter_map(|p| p.as_u64()) {
                set_progress(p.min(100) as u8);
            }
        }
        if let Some(partial) = data.get("partial") {
            set_results(&partial.to_string()).map_err(|e| HandlerError {
                code: "partial-refused".into(),
                message: e,
                retryable: false,
            })?;
        }
        if data.get("spin_after").and_then(|v| v.as_bool()) == Some(true) {
            // Keep running after reporting, so the host's progress writer can be observed.
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        if data.get("attempt_echo").and_then(|v| v.as_bool()) == Some(true) {
            let out = serde_json::json!({
                "attempt": task.attempt, "task_id": task.task_id, "run_id": task.run_id,
                "handler": task.handler, "queued_by": task.queued_by,
            });
            return Ok(Some(out.to_string()));
        }
        set_progress(100);
        Ok(Some(data.to_string()))
    }
}

export!(Echo);
