//! `taskhost new LANGUAGE NAME`: a ready-to-build handler in a new directory, with the WIT, a
//! `build.sh` that installs what it needs and builds `plugins/NAME.wasm`, and (for C) the
//! bindings and the WASI preview 1 adapter. The files are `host/templates/`; the README shows
//! them as `taskhost new LANGUAGE hello` writes them, and a test fails when the two differ.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The languages `taskhost new` writes a handler in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Rust,
    Python,
    #[value(alias = "javascript")]
    Js,
    C,
}

enum Contents {
    /// Text with `{{name}}` (the handler's name) and `{{crate}}` (the name as a Rust crate's
    /// file name: `-` becomes `_`) filled in.
    Template(&'static str),
    Bytes(&'static [u8]),
}

macro_rules! template {
    ($path:literal) => {
        ($path, Contents::Template(include_str!(concat!("../../templates/", $path))))
    };
}

const WIT: (&str, Contents) =
    ("wit/task-handler.wit", Contents::Bytes(include_bytes!("../../../wit/task-handler.wit")));

fn files(language: Language) -> Vec<(&'static str, Contents)> {
    match language {
        Language::Rust => {
            vec![template!("rust/Cargo.toml"), template!("rust/src/lib.rs"), template!("rust/build.sh"), WIT]
        }
        Language::Python => vec![template!("python/app.py"), template!("python/build.sh"), WIT],
        Language::Js => vec![template!("js/app.js"), template!("js/build.sh"), WIT],
        // The bindings are the ones the C example is built with (made by `wit-bindgen c`).
        Language::C => vec![
            template!("c/handler.c"),
            template!("c/build.sh"),
            WIT,
            ("gen/task_handler.h", Contents::Bytes(include_bytes!("../../../plugins/c-checksum/gen/task_handler.h"))),
            ("gen/task_handler.c", Contents::Bytes(include_bytes!("../../../plugins/c-checksum/gen/task_handler.c"))),
            (
                "gen/task_handler_component_type.o",
                Contents::Bytes(include_bytes!("../../../plugins/c-checksum/gen/task_handler_component_type.o")),
            ),
            (
                "wasi_snapshot_preview1.reactor.wasm",
                Contents::Bytes(wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER),
            ),
        ],
    }
}

/// Write the handler `name` in `language` into `dir` (default `./NAME`), which must not exist or
/// be empty, and say how to build and run it.
pub fn run(language: Language, name: &str, dir: Option<&Path>) -> Result<()> {
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) || !taskhost::plugins::valid_name(name) {
        bail!("{name:?} cannot name a handler: start with a letter, then letters, digits, '-' and '_'");
    }
    let dir: PathBuf = dir.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(name));
    let occupied = std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(false);
    if occupied {
        bail!("{} exists and is not empty: choose another name or --dir", dir.display());
    }
    let crate_name = name.replace('-', "_");
    let mut written = Vec::new();
    for (path, contents) in files(language) {
        // Templates live under their language's folder; the project has them at its root.
        let relative =
            path.split_once('/').filter(|_| matches!(contents, Contents::Template(_))).map_or(path, |(_, p)| p);
        let target = dir.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let bytes = match contents {
            Contents::Template(text) => text.replace("{{name}}", name).replace("{{crate}}", &crate_name).into_bytes(),
            Contents::Bytes(b) => b.to_vec(),
        };
        std::fs::write(&target, bytes).with_context(|| format!("cannot write {}", target.display()))?;
        #[cfg(unix)]
        if relative.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", target.display()))?;
        }
        written.push(relative);
    }
    let shown = dir.display();
    println!("wrote a {language:?} handler in {shown}/: {}", written.join(", "));
    println!("build it, run it once, then queue it:");
    println!("  sh {shown}/build.sh");
    println!("  taskhost --plugins {shown}/plugins run-once {name} --data '{{\"name\": \"you\"}}'");
    println!("  taskhost --plugins {shown}/plugins add {name} --data '{{\"name\": \"you\"}}'");
    Ok(())
}
