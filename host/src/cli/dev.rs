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
//! A Python or JavaScript handler on taskhost's SDK is not built again when only its own `.py`
//! (`.js`, `.mjs`) files changed: its runs are lent a copy of those files (`DIR/.taskhost-dev`,
//! nothing else of the directory), read only, at [`DEV_SOURCE`], and the SDK runs the handler from
//! there, as it is now, in the component built last (componentize-py's 7–10 s, componentize-js's
//! 7–8 s and the compile of what they made skipped). Any other change (the SDK, the WIT,
//! `build.sh`, a dependency's file) builds again, and so does a run that imports a module the
//! component lacks (the JavaScript SDK: anything a build must read, `dev-needs-build`);
//! `--always-build` builds at every change. A worker lends nothing (no grant may reach that path):
//! it runs what was built. The build runs with `TASKHOST_DEV=1` (but under `--once` and
//! `--always-build`, which lend nothing), with which a JavaScript handler's `build.sh` builds the
//! SDK's reader of the lent source in; a worker's build leaves it out (each WASI function a
//! JavaScript component imports costs its every run).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use clap::Args;
use taskhost::sandbox::grants::DEV_SOURCE;
use taskhost::sandbox::GuestOutcome;
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
    /// Build again at every change, even of a Python or JavaScript handler's own source only.
    #[arg(long)]
    pub always_build: bool,
}

/// How often the sources are looked at.
const POLL: Duration = Duration::from_millis(250);

/// Directories the build writes, or tools keep, and that are not the handler's source.
const NOT_SOURCE: [&str; 5] = ["plugins", "build", "target", "node_modules", "__pycache__"];

pub async fn run(args: &DevArgs, config: &AppConfig) -> Result<()> {
    let dir = &args.dir;
    if !dir.is_dir() {
        bail!(
            "{} is not a directory: give a handler's directory (`taskhost new LANGUAGE NAME` writes one)",
            dir.display()
        );
    }
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
    // Checked before a build (a minute for Python), though read again at each run (stdin once).
    if args.data != "-" {
        let data = super::read_data(&args.data)?;
        serde_json::from_str::<serde::de::IgnoredAny>(&data).context("task data is not valid JSON")?;
    }
    let data_file = args.data.strip_prefix('@').and_then(|f| std::fs::canonicalize(f).ok());
    let sources = |dir: &Path| sources(dir, data_file.as_deref());
    let mut config = config.clone();
    config.plugins_dir = dir.join("plugins");
    let stop = crate::shutdown::shutdown_signal();
    tokio::pin!(stop);
    // A handler on an SDK that reads its source at run time (see the module's docs), as it is now,
    // and as it was when last built (what the component does with a lent source).
    let lends = !args.once && !args.always_build;
    let live = || if lends { reads_live_source(dir) } else { None };
    let mut now_live = live();
    let mut built_live = now_live;
    let mut seen = sources(dir);
    let mut build = true;
    loop {
        let outcome = tokio::select! {
            outcome = once(dir, &name, &args.data, &config, build, now_live, lends) => outcome,
            _ = &mut stop => return Ok(()),
        };
        if args.once {
            return outcome;
        }
        let build_failed = matches!(&outcome, Err(e) if e.is::<BuildFailed>());
        // What this loop built last; another build of it since (`sh build.sh` for a deploy: no
        // reader of the lent source) is built over at the next change.
        let component = config.plugins_dir.join(format!("{name}.wasm"));
        let ours = stamp(&component);
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
                now_live = live();
                let own = |l: Live| only_own_source_changed(l, dir, &seen, &now);
                build = build_failed || built_live.is_none() || !now_live.is_some_and(own) || stamp(&component) != ours;
                if build {
                    built_live = now_live;
                }
                seen = now;
                break;
            }
        }
    }
}

/// The build failed, or could not start (said in its message).
#[derive(Debug)]
struct BuildFailed(String);

impl std::fmt::Display for BuildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: fix it, and the next change builds again", self.0)
    }
}

impl std::error::Error for BuildFailed {}

/// Build (unless `build` is false), then run once, lent the handler's own source when `live` (a
/// JavaScript handler's only when it was not built: after a build, what was built runs): the run's
/// outcome (`Reported` when it failed). A live run that imports a module the component lacks (it
/// was not imported when the component was made), or that only a build can read, builds, and runs
/// what was built. `lends`: whether any run may be lent the source (built for it, `DEV_ENV`).
async fn once(
    dir: &Path,
    name: &str,
    data: &str,
    config: &AppConfig,
    mut build: bool,
    mut live: Option<Live>,
    lends: bool,
) -> Result<()> {
    let data = super::read_data(data)?;
    loop {
        if build {
            build_it(dir, name, lends).await.map_err(|e| BuildFailed(format!("{e:#}")))?;
        } else {
            let language = live.map_or("", Live::language);
            println!("not building {name}: only its {language} source changed, which the run reads as it is now");
        }
        let started = Instant::now();
        let lent = match live {
            Some(Live::Js) if build => None,
            Some(live) => Some(Lent::copy(live, dir)?),
            None => None,
        };
        let outcome = super::run_once_outcome(config, name, &data, lent.as_ref().map(|l| l.0.as_path())).await?;
        drop(lent);
        println!("loaded and ran in {}", taskhost::text::duration(started.elapsed()));
        match outcome {
            GuestOutcome::Success(_) | GuestOutcome::Snoozed(_) | GuestOutcome::Awaiting(_) => return Ok(()),
            GuestOutcome::Failed(f) if !build && f.message.contains("ModuleNotFoundError") => {
                println!("the source imports a module the component built last lacks: building it again");
                build = true;
            }
            GuestOutcome::Failed(f) if !build && f.code == NEEDS_BUILD => {
                println!("the source is read only by a build ({}): building it again", f.message);
                (build, live) = (true, None);
            }
            _ => return Err(super::Reported.into()),
        }
    }
}

/// The code the JavaScript SDK fails a run with when the lent source needs a build.
const NEEDS_BUILD: &str = "dev-needs-build";

/// A handler whose SDK runs the source `taskhost dev` lends it, in its language.
#[derive(Debug, Clone, Copy)]
enum Live {
    Python,
    Js,
}

impl Live {
    fn language(self) -> &'static str {
        match self {
            Live::Python => "Python",
            Live::Js => "JavaScript",
        }
    }

    /// The extensions of its source files.
    fn extensions(self) -> &'static [&'static str] {
        match self {
            Live::Python => &["py"],
            Live::Js => &["js", "mjs"],
        }
    }
}

/// Which handler `dir` is, if it is one on an SDK that reads its source where `taskhost dev` lends it.
fn reads_live_source(dir: &Path) -> Option<Live> {
    let on_sdk = |app: &str, sdk: &str| {
        dir.join(app).is_file() && std::fs::read_to_string(dir.join(sdk)).is_ok_and(|sdk| sdk.contains(DEV_SOURCE))
    };
    if on_sdk("app.py", "sdk/taskhost.py") {
        Some(Live::Python)
    } else if on_sdk("app.js", "sdk/taskhost_live.js") && builds_live(dir) && wraps_handle(&dir.join("app.js")) {
        Some(Live::Js)
    } else {
        None
    }
}

/// Whether the JavaScript handler's `build.sh` builds the SDK's reader of the lent source in: its
/// `sdk/dev.js` when `TASKHOST_DEV` is set, as `taskhost new js` writes it, or, with the SDK from
/// before dev.js (whose taskhost.js imports the reader itself), always (the world
/// `task-handler-js`). A build without it would run what was built, whatever the edit.
fn builds_live(dir: &Path) -> bool {
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_default();
    let (build, sdk) = (read("build.sh"), read("sdk/taskhost.js"));
    if sdk.contains("readLentSource") {
        build.contains(DEV_ENV) && read("sdk/dev.js").contains("readLentSource")
    } else {
        build.contains("task-handler-js") && sdk.contains("./taskhost_live.js")
    }
}

/// Set for a build by `taskhost dev`: a JavaScript handler's build then builds in what runs the
/// source dev lends (sdk/dev.js), which a worker's build leaves out.
const DEV_ENV: &str = "TASKHOST_DEV";

/// Whether the JavaScript module at `app` makes its `handle` with the SDK's `handler()`, which is
/// what runs the lent source (a `handle` of its own would run what was built, whatever the edit).
fn wraps_handle(app: &Path) -> bool {
    std::fs::read_to_string(app).is_ok_and(|text| {
        (text.contains("\"./sdk/taskhost.js\"") || text.contains("'./sdk/taskhost.js'")) && text.contains("handler(")
    })
}

/// The copy of a handler's own source files a run is lent: only what the SDK reads, never the
/// directory's other files (`.env`, `.git`). In the handler's directory (hidden, so neither
/// watched nor copied), removed when dropped.
struct Lent(PathBuf);

impl Lent {
    fn copy(live: Live, dir: &Path) -> Result<Lent> {
        let to = dir.join(".taskhost-dev");
        let _ = std::fs::remove_dir_all(&to);
        std::fs::create_dir(&to).with_context(|| format!("cannot make {}", to.display()))?;
        let lent = Lent(to);
        for path in sources(dir, None).into_keys().filter(|p| own_source(live, dir, p)) {
            let Ok(relative) = path.strip_prefix(dir) else { continue };
            let copy = lent.0.join(relative);
            if let Some(parent) = copy.parent() {
                std::fs::create_dir_all(parent).with_context(|| format!("cannot make {}", parent.display()))?;
            }
            std::fs::copy(&path, &copy).with_context(|| format!("cannot copy {}", path.display()))?;
        }
        Ok(lent)
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `sh build.sh` in the handler's directory, with `DEV_ENV` set when a run may be lent the source
/// (not under `--once` or `--always-build`, so that `dev --once` builds what a worker runs).
async fn build_it(dir: &Path, name: &str, lends: bool) -> Result<()> {
    let started = Instant::now();
    println!("building {name}: sh {}", dir.join("build.sh").display());
    let mut command = tokio::process::Command::new("sh");
    if lends {
        command.env(DEV_ENV, "1");
    } else {
        command.env_remove(DEV_ENV);
    }
    let status = command
        .arg("build.sh")
        .current_dir(dir)
        .kill_on_drop(true)
        .status()
        .await
        .with_context(|| format!("cannot run {}/build.sh", dir.display()))?;
    if !status.success() {
        bail!("the build failed ({status})");
    }
    println!("built in {}", taskhost::text::duration(started.elapsed()));
    Ok(())
}

/// Whether every file added, removed or changed between `before` and `now` is a source file of
/// the handler's own (not the SDK's).
fn only_own_source_changed(live: Live, dir: &Path, before: &Files, now: &Files) -> bool {
    let changed = before.iter().filter(|(path, meta)| now.get(*path) != Some(meta)).map(|(path, _)| path);
    let added = now.keys().filter(|path| !before.contains_key(*path));
    changed.chain(added).all(|path| own_source(live, dir, path))
}

/// A source file in `live`'s language of the handler's own (not the SDK's).
fn own_source(live: Live, dir: &Path, path: &Path) -> bool {
    path.extension().is_some_and(|e| live.extensions().iter().any(|x| e == *x))
        && !path.strip_prefix(dir).is_ok_and(|p| p.starts_with("sdk"))
}

/// A file's modification time and size, if it is there.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()))
}

/// Source files and their modification time and size.
type Files = BTreeMap<PathBuf, (SystemTime, u64)>;

/// Files an editor or a tool leaves beside the sources (a backup, a swap file, a patch's
/// leftovers) and notes: no build reads them.
fn scratch(name: &str) -> bool {
    const ENDINGS: [&str; 9] = ["~", ".swp", ".swo", ".swx", ".bak", ".orig", ".rej", ".tmp", ".md"];
    name.starts_with('#') || ENDINGS.iter().any(|e| name.ends_with(e))
}

/// Each source file under `dir` with its modification time and size: not the sample task's data
/// file (`data_file`, canonical), nor [`scratch`] files.
fn sources(dir: &Path, data_file: Option<&Path>) -> Files {
    let is_data = |path: &Path| {
        data_file.is_some_and(|f| f.file_name() == path.file_name() && path.canonicalize().is_ok_and(|p| p == f))
    };
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
            } else if meta.is_file() && !name.starts_with('.') && !scratch(&name) && !is_data(&entry.path()) {
                files.insert(entry.path(), (meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()));
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_a_swap_file_a_note_and_the_sample_data_are_not_sources_a_build_reads() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        for name in
            ["app.py", "build.sh", "app.py~", "#app.py#", "app.py.swp", "NOTES.md", "sample.json", "package.json"]
        {
            std::fs::write(dir.path().join(name), "x")?;
        }
        let data = std::fs::canonicalize(dir.path().join("sample.json"))?;
        let names = |found: Files| -> Vec<String> {
            found.into_keys().filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())).collect()
        };
        assert_eq!(names(sources(dir.path(), Some(&data))), ["app.py", "build.sh", "package.json"]);
        assert!(names(sources(dir.path(), None)).contains(&"sample.json".to_string()), "data given inline");
        Ok(())
    }
}
