//! Hostile: loops forever (fuel and deadline tests).
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

struct Spin;

impl Guest for Spin {
    fn handle(_task: Task) -> Result<Option<String>, HandlerError> {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

export!(Spin);
