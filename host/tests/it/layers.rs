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
            // A name lib.rs re-exports is for the library's users: inside, the module's own path.
            if let Some((_, module)) = roots.iter().find(|(name, _)| *name == used) {
                wrong.push(format!(
                    "{}: uses crate::{used}, lib.rs's re-export: name crate::{module}::{used}",
                    rel.display()
                ));
                continue;
            }
            let module = used.clone();
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

/// The store's modules, lowest first: each may use only those of lower layers, by the path of
/// the module that defines what it uses (never through `store/mod.rs`, the entry, which is above
/// them all). So the dialects' trait is below the code written once over it, statistics below
/// the transitions that record them, and no two modules need each other.
const STORE: &[&[&str]] = &[
    &["types", "components", "sql", "schema", "refusal", "migrations", "bell"],
    &["plumbing", "connect"],
    &["rows"],
    &["dialect"],
    &["interface", "stats"],
    &["transitions"],
    &["shared"],
    &["sqlite", "postgres", "mysql"],
];

/// The module a file is, as path segments under `store` (`store/shared/mod.rs`: `["shared"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().filter_map(|p| p.to_str()).map(str::to_string).collect();
    if let Some(last) = parts.pop() {
        let name = last.trim_end_matches(".rs");
        if name != "mod" {
            parts.push(name.to_string());
        }
    }
    parts
}

/// Every path a file names under the store: `super::` chains resolved from `module`, and
/// `crate::store::` paths; `use super::{a, b}` gives each item. Each as segments from `store`.
fn store_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    for (at, _) in code.match_indices("super::").chain(code.match_indices("crate::store::")) {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // the middle of a longer path: read from its start
        }
        let mut rest = &code[at..];
        let mut base: Vec<String> = if rest.starts_with("crate::store::") {
            rest = &rest["crate::store::".len()..];
            Vec::new()
        } else {
            let mut b = module.to_vec();
            while let Some(r) = rest.strip_prefix("super::") {
                b.pop();
                rest = r;
            }
            b
        };
        if let Some(group) = rest.strip_prefix('{') {
            for item in group.split('}').next().unwrap_or_default().split(',') {
                let first = ident(item.trim());
                if !first.is_empty() {
                    found.push([base.clone(), vec![first]].concat());
                }
            }
            continue;
        }
        for segment in rest.split("::") {
            let name = ident(segment);
            if name.is_empty() {
                break;
            }
            base.push(name.clone());
            if name.len() != segment.len() {
                break;
            }
        }
        found.push(base);
    }
    found
}

#[test]
fn the_stores_modules_point_only_down_by_full_paths() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join("store");
    let mut all = Vec::new();
    files(&src, &mut all);
    let modules: BTreeSet<Vec<String>> =
        all.iter().map(|p| module_of(p.strip_prefix(&src).expect("under store"))).collect();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for path in &all {
        let rel = path.strip_prefix(&src).expect("under store");
        // A module's tests in a file of their own, as tests inside a file, are excepted.
        if rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let module = module_of(rel);
        let Some(top) = module.first() else { continue }; // store/mod.rs, the entry
        let Some(own) = layer_of(STORE, top) else {
            wrong.push(format!("store/{}: module {top} has no layer in tests/it/layers.rs", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(path).expect("read");
        // Without tests and comments (their paths are not uses).
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let text = text.split("#[cfg(all(test").next().unwrap_or_default();
        for used in store_paths(&code(text), &module) {
            // The longest module prefix the path names.
            let target = (0..=used.len()).rev().map(|n| used[..n].to_vec()).find(|m| modules.contains(m));
            let Some(target) = target else { continue };
            let Some(to) = target.first() else {
                wrong.push(format!("store/{}: uses store::{} through the entry", rel.display(), used.join("::")));
                continue;
            };
            if to == top {
                continue;
            }
            seen += 1;
            match layer_of(STORE, to) {
                Some(l) if l < own => {}
                _ => wrong.push(format!("store/{}: {top} uses {to}, which is not below it", rel.display())),
            }
        }
    }
    assert!(seen > 50, "the check read only {seen} uses: is it reading host/src/store?");
    assert!(wrong.is_empty(), "the store's layers broken:\n{}", wrong.join("\n"));
}

#[test]
fn store_paths_resolve_super_from_the_files_module() {
    let module = vec!["transitions".to_string(), "runs".to_string()];
    let paths = store_paths("use super::super::sql::{args, RUNNING};\nuse super::{from, Set};\nlet x = crate::store::types::Backend::Sqlite;", &module);
    let shown: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(shown, ["sql", "transitions::from", "transitions::Set", "types::Backend::Sqlite"]);
}
