//! Checking a component against the `task-handler` world from its types alone, without compiling
//! it. This is what queueing a task does: a machine that only queues (a web server) neither pays
//! wasmtime's compile (seconds for an 18 MB Python component) nor needs a compiled cache. The
//! worker still checks fully (`{World}Pre::new`) when it loads the component.
//!
//! Checked here: the bytes are a valid component (`wasmparser` validates every type and function
//! body, far cheaper than compiling them); it exports `handle` as a function of one parameter
//! with a result; and it imports only what the sandbox links: the host interface, its types, and
//! WASI 0.2's `cli`, `io`, `clocks`, `random`, `filesystem`, `sockets` and `http` (linked for every
//! handler; what a request may reach is the operator's grant, checked when it is made).

use wasmparser::component_types::ComponentEntityType;
use wasmparser::{Encoding, Parser, Payload, Validator, WasmFeatures};

/// The interfaces of this host's package a handler may import: 0.2.0's, and 0.1.0's for
/// handlers built before it.
const HOST_INTERFACES: &[&str] = &[
    "taskhost:plugin/host@0.2.0",
    "taskhost:plugin/types@0.2.0",
    "taskhost:plugin/host@0.1.0",
    "taskhost:plugin/types@0.1.0",
];

/// The WASI 0.2 packages the sandbox links (every interface of each, any 0.2 patch version).
const WASI_PACKAGES: &[&str] =
    &["wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/", "wasi:filesystem/", "wasi:sockets/", "wasi:http/"];

/// Why a component does not implement the world, in one line, or Ok.
pub fn check_types(bytes: &[u8]) -> Result<(), String> {
    let types = Validator::new_with_features(WasmFeatures::all())
        .validate_all(bytes)
        .map_err(|e| format!("invalid component: {}", e.message()))?;
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    // Only the outer component's own imports and exports: nested modules and components open with
    // a header of their own and close with an end.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("invalid component: {}", e.message()))? {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    return Err("a core WebAssembly module, not a component: build it as a component (wasm32-wasip2, \
                                componentize-py, componentize-js, or `wasm-tools component new`)"
                        .into());
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 1 => {
                for import in section {
                    imports.push(import.map_err(|e| e.message().to_string())?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(section) if depth == 1 => {
                for export in section {
                    exports.push(export.map_err(|e| e.message().to_string())?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    let types = types.as_ref();
    // A type imported by name (a world's `use types.{task}`) needs nothing from the host.
    let needs_host = |name: &&String| {
        !matches!(types.component_item_for_import(name).map(|i| &i.ty), Some(ComponentEntityType::Type { .. }))
    };
    if let Some(name) = imports.iter().filter(needs_host).find(|name| !importable(name)) {
        return Err(format!(
            "it imports {name}, which this host does not provide (it provides {} and WASI 0.2's cli, io, clocks, \
             random, filesystem, sockets and http)",
            HOST_INTERFACES.join(", ")
        ));
    }
    let handle = exports.iter().any(|e| e == "handle").then(|| types.component_item_for_export("handle")).flatten();
    match handle.map(|item| &item.ty) {
        Some(ComponentEntityType::Func(id)) => {
            let func = &types[*id];
            if func.params.len() != 1 || func.result.is_none() {
                return Err(format!(
                    "its `handle` takes {} parameters{}: the task-handler world's is handle(task) -> result",
                    func.params.len(),
                    if func.result.is_none() { " and returns nothing" } else { "" }
                ));
            }
            Ok(())
        }
        Some(_) => Err("its `handle` export is not a function".into()),
        None => Err(format!(
            "it does not export `handle` (it exports {}): is it built for the task-handler world?",
            if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") }
        )),
    }
}

fn importable(name: &str) -> bool {
    HOST_INTERFACES.contains(&name)
        || WASI_PACKAGES.iter().any(|p| name.strip_prefix(p).is_some_and(|rest| rest.contains("@0.2.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_module_is_told_to_be_a_component() {
        let module = b"\0asm\x01\0\0\0";
        let err = check_types(module).expect_err("refused");
        assert!(err.contains("not a component"), "{err}");
    }

    #[test]
    fn garbage_is_an_invalid_component() {
        let err = check_types(b"\0asm\x0d\0\x01\0\x01\x02").expect_err("refused");
        assert!(err.starts_with("invalid component"), "{err}");
    }

    #[test]
    fn wasi_0_2_interfaces_are_importable_and_others_not() {
        assert!(importable("wasi:cli/stdout@0.2.6"));
        assert!(importable("taskhost:plugin/host@0.1.0"));
        assert!(importable("taskhost:plugin/host@0.2.0"));
        assert!(importable("wasi:http/outgoing-handler@0.2.3"));
        assert!(!importable("wasi:http/handler@0.3.0"));
        assert!(!importable("wasi:cli/stdout@0.3.0"));
        assert!(!importable("test:greedy/backdoor"));
    }
}
