//! For the chaos tests: a run that says, in a file of its own, when it started and that it is
//! still running. The task data is `{"dir": "/out", "ms": N}`: the run writes
//! `DIR/TASK-RUN` with a line `start T`, a line `alive T` every 20 ms for about N ms, then
//! `end T` (T: this process's wall clock, in nanoseconds since the epoch), and succeeds. A run
//! stopped from outside (killed, fenced, cancelled) leaves no `end`: its last `alive` bounds when
//! it stopped. Needs a granted, writable directory.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Witness;

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

fn failed(what: &str, e: impl std::fmt::Display) -> HandlerError {
    HandlerError { code: "witness".into(), message: format!("{what}: {e}"), retryable: true }
}

impl Guest for Witness {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).unwrap_or_default();
        let dir = data.get("dir").and_then(|v| v.as_str()).unwrap_or("/out");
        let ms = data.get("ms").and_then(|v| v.as_u64()).unwrap_or(100);
        let path = format!("{dir}/{}-{}", task.task_id, task.run_id);
        let mut file = std::fs::File::create(&path).map_err(|e| failed(&format!("creating {path}"), e))?;
        let mut say = |word: &str| {
            // One write per line: a run stopped between two writes leaves whole lines.
            file.write_all(format!("{word} {}\n", now_ns()).as_bytes()).map_err(|e| failed("writing", e))
        };
        say("start")?;
        let began = Instant::now();
        while began.elapsed() < Duration::from_millis(ms) {
            std::thread::sleep(Duration::from_millis(20));
            say("alive")?;
        }
        say("end")?;
        Ok(Some(format!("{{\"attempt\": {}}}", task.attempt)))
    }
}

export!(Witness);
