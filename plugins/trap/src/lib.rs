//! Hostile: reports 50% progress, then traps; with `"panic"` in its data it panics instead (a
//! Rust handler's uncaught exception).
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct Trap;

impl Guest for Trap {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        taskhost::plugin::host::set_progress(50);
        if task.data.contains("panic") {
            let items: Vec<u32> = Vec::new();
            panic!("no item {} among {}", task.attempt + 6, items.len());
        }
        core::arch::wasm32::unreachable()
    }
}

export!(Trap);
