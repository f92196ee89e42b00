//! Hostile: imports an interface the host does not provide (its WIT: `wit/greedy.wit`).
wit_bindgen::generate!({ path: "wit", world: "greedy", generate_all });

struct Greedy;

impl Guest for Greedy {
    fn handle(_task: Task) -> Result<Option<String>, HandlerError> {
        Ok(Some(test::greedy::backdoor::open().to_string()))
    }
}

export!(Greedy);
