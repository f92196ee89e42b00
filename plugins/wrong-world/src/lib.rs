//! A component of another world: the host must refuse it as a handler.
wit_bindgen::generate!({ path: "wit", world: "other" });

struct Other;

impl Guest for Other {
    fn greet() -> String {
        "hello".into()
    }
}

export!(Other);
