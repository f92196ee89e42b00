//! Cranelift's incremental cache: a component built again compiles only the functions that changed.
//! The compiling child keeps each function it compiles beside the artifacts
//! (`CACHE/incremental/`); a component with a new digest but the same code (a Python or JavaScript
//! handler after an edit to its source: data in an unchanged interpreter) reads most of them back.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::process::{stderr, stdout};
use common::{built_plugins, taskhost_command_caching_in, Env};

/// Each entry of the incremental cache, by name, with its inode (a rewritten entry has a new one).
fn entries(cache: &Path) -> BTreeMap<String, u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(cache.join("incremental"))
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "code"))
                .filter_map(|e| Some((e.file_name().to_string_lossy().into_owned(), e.metadata().ok()?.ino())))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_built_again_with_the_same_code_reads_most_of_its_functions_back_instead_of_compiling_them() {
    let env = Env::new(&[]).await;
    let cache = env.dir.path().join("cache");
    let component = env.plugins.join("wc.wasm");
    std::fs::copy(built_plugins().join("word-count.wasm"), &component).expect("copy");
    let run = || {
        let o = taskhost_command_caching_in(&env, &cache)
            .args(["run-once", "wc", "--data", r#"{"text": "a b a"}"#])
            .output()
            .expect("run taskhost");
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains(r#"success: {"words":3,"lines":1,"chars":5}"#), "{}", stdout(&o));
    };
    run();
    let first = entries(&cache);
    assert!(first.len() > 100, "the compile kept its functions: {} entries", first.len());

    // Another build of the same code: a custom section appended makes a new digest, so the
    // artifact is not found and the component is compiled again.
    let mut bytes = std::fs::read(&component).expect("read");
    let name = b"rebuilt";
    bytes.extend([0, 1 + name.len() as u8 + 3, name.len() as u8]);
    bytes.extend(name);
    bytes.extend(b"two");
    std::fs::write(&component, &bytes).expect("write");
    let artifacts = || {
        std::fs::read_dir(&cache)
            .expect("cache")
            .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "cwasm")))
            .count()
    };
    assert_eq!(artifacts(), 1);
    run();
    assert_eq!(artifacts(), 2, "the rebuilt component was compiled, not loaded");
    let second = entries(&cache);
    let rewritten = first.iter().filter(|(name, inode)| second.get(*name) != Some(inode)).count();
    let compiled_again = second.keys().filter(|name| !first.contains_key(*name)).count();
    assert_eq!(rewritten, 0, "no function kept was compiled and written again");
    // Cranelift's key of a few functions differs from one compile of the same code to the next
    // (24 of 267 here, about a tenth of a Python component's): those are compiled again.
    assert!(
        compiled_again * 3 < first.len(),
        "most of the {} functions were read back: {compiled_again} were compiled again",
        first.len()
    );
}
