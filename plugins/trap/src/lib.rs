//! Hostile: reports 50% progress, then traps.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct Trap;

impl Guest for Trap {
    fn handle(_task: Task) -> Result<Option<String>, HandlerError> {
        taskhost::plugin::host::set_progress(50);
        core::arch::wasm32::unreachable()
    }
}

export!(Trap);
