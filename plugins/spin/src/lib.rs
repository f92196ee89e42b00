//! Hostile: loops forever (fuel and deadline tests). It logs one line first, which a run stopped
//! from outside (cancelled) keeps.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

use taskhost::plugin::host::log;
use taskhost::plugin::types::LogLevel;

struct Spin;

impl Guest for Spin {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        log(LogLevel::Info, &format!("spinning, attempt {}", task.attempt));
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

export!(Spin);
