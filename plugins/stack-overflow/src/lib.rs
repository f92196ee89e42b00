//! Hostile: recurses without end (on the wasm stack: scalar frames, no shadow-stack memory).
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct StackOverflow;

#[inline(never)]
fn deeper(n: u64, stop: u64) -> u64 {
    if n == stop {
        return 1;
    }
    // Not a tail call: the result is combined after the call, so each frame stays.
    deeper(n + 1, stop).wrapping_mul(3).wrapping_add(n)
}

impl Guest for StackOverflow {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        // A bound the optimizer cannot see, and that is never reached.
        let stop = u64::MAX - task.data.len() as u64;
        Ok(Some(deeper(0, stop).to_string()))
    }
}

export!(StackOverflow);
