//! Always fails with `demo-failure`; `{"retryable": false}` makes the failure final.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct Fail;

impl Guest for Fail {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).unwrap_or_default();
        let retryable = data.get("retryable").and_then(|v| v.as_bool()).unwrap_or(true);
        Err(HandlerError {
            code: "demo-failure".into(),
            message: format!("this handler always fails (attempt {})", task.attempt),
            retryable,
        })
    }
}

export!(Fail);
