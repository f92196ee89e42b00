//! Fails (retryably, code `not-yet`) until attempt `succeed_on_attempt`, then succeeds.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct FailUntil;

impl Guest for FailUntil {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).unwrap_or_default();
        let goal = data.get("succeed_on_attempt").and_then(|v| v.as_u64()).unwrap_or(2);
        if u64::from(task.attempt) < goal {
            return Err(HandlerError {
                code: "not-yet".into(),
                message: format!("attempt {} of {goal}", task.attempt),
                retryable: true,
            });
        }
        Ok(Some(format!(r#"{{"attempt":{}}}"#, task.attempt)))
    }
}

export!(FailUntil);
