//! The modules' layers, checked: a module may use only modules of lower layers, so the ground
//! floor (`model`: a task's records, states and failures) knows nothing of the sandbox or the
//! database, and no two modules need each other. Read from every `crate::` path in `host/src`
//! (tests inside a file excepted); a new top-level module must be given a layer here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The library's modules, lowest first.
const LIBRARY: &[&[&str]] = &[
    &["text"],
    &["clock", "located", "model"],
    &["error"],
    &["retry", "schedule", "stats", "metrics", "cache"],
    &["store", "sandbox"],
    &["overseer"],
    &["config"],
    &["plugins"],
    &["runner", "client"],
    &["app", "api"],
    &["bench"],
];

/// The binary's modules (`main.rs` and what it declares), lowest first.
const BINARY: &[&[&str]] = &[&["output", "shutdown"], &["demo"], &["cli"]];
const BINARY_FILES: &[&str] = &["main", "cli", "demo", "output", "shutdown"];

fn layer_of(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&module))
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a file without its test module and line comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The first segment of every `crate::` path: `crate::a::b` and `crate::{a, b::c}` give a and b.
fn used_modules(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // Not a path of this crate: an identifier that merely ends in "crate".
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Items split at the commas outside nested braces, up to the group's own `}`.
            let mut depth = 0;
            let mut items = vec![String::new()];
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(String::new());
                        continue;
                    }
                    _ => {}
                }
                if let Some(last) = items.last_mut() {
                    last.push(c);
                }
            }
            for item in items {
                let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != "self" {
                    found.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.insert(name);
        }
    }
    found
}

/// The names the library's root re-exports, as the modules they come from.
fn root_names(lib: &str) -> Vec<(String, String)> {
    let mut names = Vec::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("pub use ")) {
        let Some((module, rest)) = line.split_once("::") else { continue };
        let items = rest.trim_end_matches(';').trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.trim().rsplit("::").next().unwrap_or_default().to_string();
            names.push((name, module.to_string()));
        }
    }
    names
}

#[test]
fn every_module_uses_only_modules_of_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let roots = root_names(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut wrong = Vec::new();
    let mut seen = 0;
    for path in all {
        let rel = path.strip_prefix(&src).expect("under src");
        let top = rel.iter().next().and_then(|s| s.to_str()).unwrap_or_default().trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue;
        }
        let layers = if BINARY_FILES.contains(&top.as_str()) { BINARY } else { LIBRARY };
        if top == "main" {
            continue;
        }
        let Some(own) = layer_of(layers, &top) else {
            wrong.push(format!("{}: module {top} has no layer in tests/it/layers.rs", rel.display()));
            continue;
        };
        for used in used_modules(&code(&std::fs::read_to_string(&path).expect("read"))) {
            let module = roots.iter().find(|(name, _)| *name == used).map_or(used.clone(), |(_, m)| m.clone());
            if module == top {
                continue;
            }
            seen += 1;
            match layer_of(layers, &module) {
                Some(l) if l < own => {}
                Some(_) => wrong.push(format!("{}: {top} uses {module}, which is not below it", rel.display())),
                None => wrong.push(format!("{}: uses crate::{used}, which has no layer", rel.display())),
            }
        }
    }
    assert!(seen > 100, "the check read only {seen} uses: is it reading host/src?");
    assert!(wrong.is_empty(), "layers broken:\n{}", wrong.join("\n"));
}

#[test]
fn paths_in_braces_are_read_item_by_item() {
    let used = used_modules("use crate::{error::Result, model::{Task, Run}};\nlet x = crate::text::count(1);");
    assert_eq!(used.into_iter().collect::<Vec<_>>(), ["error", "model", "text"]);
}
