//! `taskhost dev DIR`: the edit loop for a handler's directory as `taskhost new` writes it. Build
//! it (`sh DIR/build.sh`), run it once on sample data in the sandbox as a worker would (the
//! operator's configuration and grants apply, no database), print the outcome and how long each
//! step took, then wait for a source file to change and do it again, until Ctrl-C.
//!
//! A rebuilt component compiles only the functions that changed (the compiled cache's
//! `incremental/`), so after a one-line edit the load takes seconds, not the first compile's tens.
//! Files under `plugins/`, `build/`, `target/`, `node_modules/`, `__pycache__/` and hidden directories
//! (`.venv/`) are not watched: the build writes them.
//!
//! A Python handler on taskhost's SDK is not built again when only its own `.py` files changed:
//! its runs are lent the handler's directory, read only, at [`LENT`], and the SDK imports the
//! handler from there, as it is now, in the component built last (componentize-py's 7–10 s
//! skipped). Any other change (the SDK, the WIT, `build.sh`, a dependency's file) builds again;
//! `--always-build` builds at every change. A worker lends nothing: it runs what was built.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use clap::Args;
use taskhost::AppConfig;

/// `taskhost dev`'s options.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// The handler's directory: its `build.sh` builds `plugins/NAME.wasm`.
    pub dir: PathBuf,
    /// The handler's name (default: the directory's name).
    #[arg(long)]
    pub handler: Option<String>,
    /// The sample task's data, a JSON document; @FILE reads it from a file (again at each run).
    #[arg(long, default_value = "{}")]
    pub data: String,
    /// Build and run once, then exit with the run's outcome (0 for success).
    #[arg(long)]
    pub once: bool,
    /// Build again at every change, even of a Python handler's own source only.
    #[arg(long)]
    pub always_build: bool,
}

/// Where `taskhost dev` lends a run the handler's directory, read only.
pub const LENT: &str = "/taskhost-dev";

/// How often the sources are looked at.
const POLL: Duration = Duration::from_millis(250);

/// Directories the build writes, or tools keep, and that are not the handler's source.
const NOT_SOURCE: [&str; 5] = ["plugins", "build", "target", "node_modules", "__pycache__"];

pub async fn run(args: &DevArgs, config: &AppConfig) -> Result<()> {
    let dir = &args.dir;
    if !dir.join("build.sh").is_file() {
        bail!("{} has no build.sh: `taskhost new LANGUAGE NAME` writes a handler's directory", dir.display());
    }
    let name = match &args.handler {
        Some(n) => n.clone(),
        None => dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .context("cannot name the handler from its directory: give --handler")?,
    };
    let mut config = config.clone();
    config.plugins_dir = dir.join("plugins");
    let stop = crate::shutdown::shutdown_signal();
    tokio::pin!(stop);
    // A Python handler on the SDK reads its own source at run time (see the module's docs).
    let live =
        !args.once && !args.always_build && dir.join("app.py").is_file() && dir.join("sdk/taskhost.py").is_file();
    let mut seen = sources(dir);
    let mut build = true;
    loop {
        let lend = live.then_some(dir.as_path());
        let outcome = tokio::select! {
            outcome = once(dir, &name, &args.data, &config, build, lend) => outcome,
            _ = &mut stop => return Ok(()),
        };
        if args.once {
            return outcome;
        }
        let build_failed = matches!(&outcome, Err(e) if e.is::<BuildFailed>());
        match &outcome {
            Err(e) if !e.is::<super::Reported>() => println!("error: {e:#}"),
            _ => {}
        }
        println!("watching {} for changes (Ctrl-C to stop)", dir.display());
        loop {
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = &mut stop => return Ok(()),
            }
            let now = sources(dir);
            if now != seen {
                // A failed build is built again whatever changed: its output is not there.
                build = build_failed || !live || !only_python_changed(dir, &seen, &now);
                seen = now;
                break;
            }
        }
    }
}

/// The build failed (said in its message).
#[derive(Debug)]
struct BuildFailed(std::process::ExitStatus);

impl std::fmt::Display for BuildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the build failed ({}): fix it, and the next change builds again", self.0)
    }
}

impl std::error::Error for BuildFailed {}

/// Build (unless `build` is false), then run once, lent `lend`: the run's outcome (`Reported`
/// when it failed).
async fn once(dir: &Path, name: &str, data: &str, config: &AppConfig, build: bool, lend: Option<&Path>) -> Result<()> {
    if build {
        build_it(dir, name).await?;
    } else {
        println!("not building {name}: only its Python source changed, which the run reads as it is now");
    }
    let data = super::read_data(data)?;
    let started = Instant::now();
    let outcome = super::run_once(config, name, &data, lend).await;
    println!("loaded and ran in {}", taskhost::text::duration(started.elapsed()));
    outcome
}

/// `sh build.sh` in the handler's directory.
async fn build_it(dir: &Path, name: &str) -> Result<()> {
    let started = Instant::now();
    println!("building {name}: sh {}", dir.join("build.sh").display());
    let status = tokio::process::Command::new("sh")
        .arg("build.sh")
        .current_dir(dir)
        .kill_on_drop(true)
        .status()
        .await
        .with_context(|| format!("cannot run {}/build.sh", dir.display()))?;
    if !status.success() {
        return Err(BuildFailed(status).into());
    }
    println!("built in {}", taskhost::text::duration(started.elapsed()));
    Ok(())
}

/// Whether every file added, removed or changed between `before` and `now` is a `.py` file of
/// the handler's own (not the SDK's).
fn only_python_changed(dir: &Path, before: &Files, now: &Files) -> bool {
    let changed = before.iter().filter(|(path, meta)| now.get(*path) != Some(meta)).map(|(path, _)| path);
    let added = now.keys().filter(|path| !before.contains_key(*path));
    changed.chain(added).all(|path| {
        path.extension().is_some_and(|e| e == "py") && !path.strip_prefix(dir).is_ok_and(|p| p.starts_with("sdk"))
    })
}

/// Source files and their modification time and size.
type Files = BTreeMap<PathBuf, (SystemTime, u64)>;

/// Each source file under `dir` with its modification time and size.
fn sources(dir: &Path) -> Files {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                let top = d == dir && NOT_SOURCE.contains(&name.as_ref());
                if !top && !name.starts_with('.') && name != "__pycache__" && name != "node_modules" {
                    todo.push(entry.path());
                }
            } else if meta.is_file() && !name.starts_with('.') {
                files.insert(entry.path(), (meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()));
            }
        }
    }
    files
}
