//! `taskhost new LANGUAGE NAME`: a ready-to-build handler in a new directory, with the WIT, a
//! `build.sh` that installs what it needs and builds `plugins/NAME.wasm`, and (for C) the
//! bindings and the WASI preview 1 adapter. The files are `host/templates/`; docs/handlers.md shows
//! them as `taskhost new LANGUAGE hello` writes them, and a test fails when the two differ.
//!
//! `--http` writes a handler that makes a request instead: the webhook example of its language
//! (`plugins/webhook`, `py-webhook`, `js-webhook`, `c-webhook`, the one copy of that code, built and tested
//! with the examples), named for the new handler.

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

impl Language {
    fn name(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::Python => "Python",
            Language::Js => "JavaScript",
            Language::C => "C",
        }
    }
}

enum Contents {
    /// Text with `{{name}}` (the handler's name) and `{{crate}}` (the name as a Rust crate's file
    /// name: `-` becomes `_`) filled in.
    Template(&'static str),
    /// An example handler's source, its own name (`.1`) and WIT path made the new handler's.
    Example(&'static str, &'static str),
    Bytes(&'static [u8]),
}

macro_rules! template {
    ($path:literal) => {
        ($path, Contents::Template(include_str!(concat!("../../templates/", $path))))
    };
}

const WIT: (&str, Contents) =
    ("wit/task-handler.wit", Contents::Bytes(include_bytes!("../../../wit/task-handler.wit")));

/// taskhost's Python SDK, the entry of every Python handler `taskhost new` writes, and its HTTP part.
const PYTHON_SDK: [(&str, Contents); 2] = [
    ("sdk/taskhost.py", Contents::Bytes(include_bytes!("../../../sdk/python/taskhost.py"))),
    ("sdk/taskhost_http.py", Contents::Bytes(include_bytes!("../../../sdk/python/taskhost_http.py"))),
];

/// taskhost's Rust SDK, a crate the handler depends on by path, with the WIT it is built against.
fn rust_sdk() -> Vec<(&'static str, Contents)> {
    vec![
        ("sdk/Cargo.toml", Contents::Bytes(include_bytes!("../../../sdk/rust/Cargo.toml"))),
        ("sdk/src/lib.rs", Contents::Bytes(include_bytes!("../../../sdk/rust/src/lib.rs"))),
        ("sdk/src/http.rs", Contents::Bytes(include_bytes!("../../../sdk/rust/src/http.rs"))),
        ("sdk/src/workflow.rs", Contents::Bytes(include_bytes!("../../../sdk/rust/src/workflow.rs"))),
        ("sdk/wit/task-handler.wit", Contents::Bytes(include_bytes!("../../../wit/task-handler.wit"))),
    ]
}

/// taskhost's JavaScript SDK, which every JavaScript handler `taskhost new` writes imports, and what
/// `taskhost dev` builds in to read the handler's source (dev.js, its world with the part of WASI's
/// filesystem the reader calls).
const JS_SDK: [(&str, Contents); 5] = [
    ("sdk/taskhost.js", Contents::Bytes(include_bytes!("../../../sdk/js/taskhost.js"))),
    ("sdk/taskhost_live.js", Contents::Bytes(include_bytes!("../../../sdk/js/taskhost_live.js"))),
    ("sdk/dev.js", Contents::Bytes(include_bytes!("../../../sdk/js/dev.js"))),
    ("wit/js.wit", Contents::Bytes(include_bytes!("../../../sdk/js/js.wit"))),
    ("wit/deps/filesystem.wit", Contents::Bytes(include_bytes!("../../../sdk/js/filesystem.wit"))),
];

/// py-webhook's wit/: the world with wasi:http, and WASI 0.2.12's WIT it needs.
macro_rules! http_wit {
    ($($file:literal),*) => {
        vec![
            ("wit/http.wit", Contents::Bytes(include_bytes!("../../../plugins/py-webhook/wit/http.wit"))),
            $((concat!("wit/deps/", $file), Contents::Bytes(include_bytes!(concat!("../../../plugins/py-webhook/wit/deps/", $file)))),)*
        ]
    };
}

fn files(language: Language, http: bool) -> Vec<(&'static str, Contents)> {
    match (language, http) {
        (Language::Rust, http) => {
            let lib = if http {
                ("rust/src/lib.rs", Contents::Example(include_str!("../../../plugins/webhook/src/lib.rs"), "webhook"))
            } else {
                template!("rust/src/lib.rs")
            };
            let mut files = vec![template!("rust/Cargo.toml"), lib, template!("rust/build.sh"), WIT];
            files.extend(rust_sdk());
            files
        }
        (Language::Python, http) => {
            let app = if http {
                ("python/app.py", Contents::Example(include_str!("../../../plugins/py-webhook/app.py"), "py-webhook"))
            } else {
                template!("python/app.py")
            };
            let mut files = vec![app, template!("python/build.sh"), WIT];
            files.extend(PYTHON_SDK);
            files.extend(http_wit());
            files
        }
        (Language::Js, http) => {
            let app = if http {
                ("js/app.js", Contents::Example(include_str!("../../../plugins/js-webhook/app.js"), "js-webhook"))
            } else {
                template!("js/app.js")
            };
            let mut files = vec![app, template!("js/build.sh"), WIT];
            files.extend(JS_SDK);
            files
        }
        // The bindings are the ones the C examples are built with (sdk/c/gen, made by `wit-bindgen
        // c`), which the SDK's headers wrap.
        (Language::C, http) => {
            let handler = if http {
                ("c/handler.c", Contents::Example(include_str!("../../../plugins/c-webhook/webhook.c"), "c-webhook"))
            } else {
                template!("c/handler.c")
            };
            let mut files = vec![
                handler,
                template!("c/build.sh"),
                WIT,
                ("sdk/taskhost.h", Contents::Bytes(include_bytes!("../../../sdk/c/taskhost.h"))),
                ("sdk/taskhost_http.h", Contents::Bytes(include_bytes!("../../../sdk/c/taskhost_http.h"))),
                ("sdk/taskhost_workflow.h", Contents::Bytes(include_bytes!("../../../sdk/c/taskhost_workflow.h"))),
                ("gen/task_handler_http.h", Contents::Bytes(include_bytes!("../../../sdk/c/gen/task_handler_http.h"))),
                ("gen/task_handler_http.c", Contents::Bytes(include_bytes!("../../../sdk/c/gen/task_handler_http.c"))),
                (
                    "gen/task_handler_http_component_type.o",
                    Contents::Bytes(include_bytes!("../../../sdk/c/gen/task_handler_http_component_type.o")),
                ),
                ADAPTER,
            ];
            files.extend(http_wit());
            files
        }
    }
}

/// The world with wasi:http and WASI 0.2.12's WIT it needs: for every Python and C handler (their
/// SDKs import wasi:http).
fn http_wit() -> Vec<(&'static str, Contents)> {
    http_wit!("cli.wit", "clocks.wit", "filesystem.wit", "http.wit", "io.wit", "random.wit", "sockets.wit")
}

/// WASI preview 1 to 0.2, for C handlers that use wasi-libc's stdio.
const ADAPTER: (&str, Contents) = (
    "wasi_snapshot_preview1.reactor.wasm",
    Contents::Bytes(wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER),
);

fn fill(text: &str, name: &str, crate_name: &str) -> String {
    text.replace("{{name}}", name).replace("{{crate}}", crate_name)
}

/// Write the handler `name` in `language` into `dir` (default `./NAME`), which must not exist or
/// be empty, and say how to build and run it.
pub fn run(language: Language, name: &str, dir: Option<&Path>, http: bool) -> Result<()> {
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
    for (path, contents) in files(language, http) {
        // Templates live under their language's folder; the project has them at its root.
        let relative = path
            .split_once('/')
            .filter(|_| matches!(contents, Contents::Template(_) | Contents::Example(..)))
            .map_or(path, |(_, p)| p);
        let target = dir.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let bytes = match contents {
            Contents::Template(text) => fill(text, name, &crate_name).into_bytes(),
            // The example's WIT is two folders up; its name is in its grant's table and its docs.
            Contents::Example(text, example) => text
                .replace("\"../../wit\"", "\"wit\"")
                .replace(&format!("handlers.{example}."), &format!("handlers.{name}."))
                .into_bytes(),
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
    println!("wrote a {} handler in {shown}/: {}", language.name(), written.join(", "));
    if http {
        println!("it POSTs its data's payload to its url, where the operator's configuration allows; grant it, e.g.:");
        println!("  [handlers.{name}.grants.http]");
        println!("  allow = [\"https://hooks.example.com/\"]");
        println!("then build it, and run it once with that file:");
        println!("  sh {shown}/build.sh");
        let data = r#"{"url": "https://hooks.example.com/x", "payload": {"hello": "you"}}"#;
        println!("  taskhost --config operator.toml --plugins {shown}/plugins run-once {name} --data '{data}'");
        return Ok(());
    }
    println!("build it, run it once, then queue it:");
    println!("  sh {shown}/build.sh");
    println!("  taskhost --plugins {shown}/plugins run-once {name} --data '{{\"name\": \"you\"}}'");
    println!("  taskhost --plugins {shown}/plugins add {name} --data '{{\"name\": \"you\"}}'");
    Ok(())
}
