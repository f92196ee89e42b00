//! Does nothing and returns `{}`: the baseline for benchmarks.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct Noop;

impl Guest for Noop {
    fn handle(_task: Task) -> Result<Option<String>, HandlerError> {
        Ok(Some("{}".to_string()))
    }
}

export!(Noop);
