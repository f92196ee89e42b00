//! Hostile: allocates and touches memory until something stops it.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct MemoryHog;

impl Guest for MemoryHog {
    fn handle(_task: Task) -> Result<Option<String>, HandlerError> {
        let mut kept: Vec<Vec<u8>> = Vec::new();
        loop {
            kept.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&kept);
        }
    }
}

export!(MemoryHog);
