//! Compiling a component, bounded. A legal component can take minutes and gigabytes to compile,
//! so a worker compiles in a child process (`taskhost compile-component`, the same binary) with
//! a wall-clock timeout and an address-space limit; one that passes either is refused as
//! `handler-broken` naming the bound. Compiles run one digest at a time (a second loader of the
//! same component waits for the first) and at most [`CompileBounds::concurrency`] at once.
//!
//! Without a compiler program (library use that sets none), components compile in the calling
//! process with no bound but the size limit on component files.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::Engine;

/// How compiles are bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileBounds {
    /// The `taskhost` binary to compile in; None = in this process, unbounded.
    pub program: Option<PathBuf>,
    /// Wall-clock time one compile may take.
    pub timeout: Duration,
    /// Address space of the compiling process.
    pub memory_bytes: u64,
    /// Compiles running at once.
    pub concurrency: usize,
}

impl CompileBounds {
    /// Longest a compile may take.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
    /// Memory a compiling child may use.
    pub const DEFAULT_MEMORY_BYTES: u64 = 3 << 30;
    /// Compiles at once.
    pub const DEFAULT_CONCURRENCY: usize = 1;
}

impl Default for CompileBounds {
    fn default() -> Self {
        CompileBounds {
            program: None,
            timeout: Self::DEFAULT_TIMEOUT,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            concurrency: Self::DEFAULT_CONCURRENCY,
        }
    }
}

/// Where a compiling child keeps the functions it compiled (`super::incremental`), and how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incremental {
    /// An owner-only directory of this user's.
    pub dir: PathBuf,
    /// The most its entries may hold; the least recently used go first.
    pub max_bytes: u64,
}

impl Incremental {
    /// The store beside the cached `artifact`, holding at most `max_bytes`: a component built
    /// again compiles only the functions that changed.
    pub fn beside(artifact: &std::path::Path, max_bytes: u64) -> Self {
        let dir = artifact.parent().unwrap_or(std::path::Path::new("."));
        Incremental { dir: dir.join("incremental"), max_bytes }
    }
}

/// Runs compiles within their bounds, one per digest.
#[derive(Debug, Default)]
pub(crate) struct Compiler {
    bounds: CompileBounds,
    running: Mutex<usize>,
    room: Condvar,
    per_digest: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl Compiler {
    pub fn new(bounds: CompileBounds) -> Self {
        Compiler { bounds, ..Default::default() }
    }

    /// Hold the single-flight lock of `digest` while `f` runs: a second caller for the same
    /// component waits, then finds what the first one left in the cache.
    pub fn one_at_a_time<T>(&self, digest: &str, f: impl FnOnce() -> T) -> T {
        let lock =
            self.per_digest.lock().unwrap_or_else(|p| p.into_inner()).entry(digest.to_string()).or_default().clone();
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let out = f();
        drop(guard);
        let mut map = self.per_digest.lock().unwrap_or_else(|p| p.into_inner());
        if Arc::strong_count(&lock) <= 2 {
            map.remove(digest);
        }
        out
    }

    /// Compile `bytes` for `engine`, within the bounds; in a child, from the functions in
    /// `incremental` that did not change (the calling process's engine is built: it compiles all).
    pub fn compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        max_wasm_stack: usize,
        incremental: Option<&Incremental>,
    ) -> Result<Component, String> {
        let _slot = self.slot();
        match &self.bounds.program {
            None => Component::new(engine, bytes).map_err(|e| format!("invalid component: {e:#}")),
            Some(program) => self.in_child(program, engine, bytes, max_wasm_stack, incremental),
        }
    }

    fn slot(&self) -> impl Drop + '_ {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        while *running >= self.bounds.concurrency.max(1) {
            running = self.room.wait(running).unwrap_or_else(|p| p.into_inner());
        }
        *running += 1;
        SlotGuard(self)
    }

    fn in_child(
        &self,
        program: &std::path::Path,
        engine: &Engine,
        bytes: &[u8],
        max_wasm_stack: usize,
        incremental: Option<&Incremental>,
    ) -> Result<Component, String> {
        let bounds = &self.bounds;
        let mut command = child_command(program, max_wasm_stack, bounds);
        if let Some(i) = incremental {
            command.arg("--incremental-cache").arg(&i.dir).arg("--incremental-max-bytes").arg(i.max_bytes.to_string());
        }
        let mut child = command.spawn().map_err(|e| format!("cannot start the compiler {}: {e}", program.display()))?;
        let (mut stdin, mut stdout, mut stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => return Err("cannot talk to the compiler process".into()),
        };
        let input = bytes.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        // An artifact is a few times its component; more means something is wrong.
        let most = (bytes.len() as u64).saturating_mul(32).saturating_add(64 << 20);
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            (&mut stdout).take(most + 1).read_to_end(&mut out).map(|_| out)
        });
        let errors = std::thread::spawn(move || {
            let mut out = String::new();
            let _ = (&mut stderr).take(4096).read_to_string(&mut out);
            out
        });
        let status = wait_bounded(&mut child, bounds.timeout)?;
        let _ = writer.join();
        let artifact = reader.join().map_err(|_| "the compiler's output was lost".to_string())?;
        let artifact = artifact.map_err(|e| format!("reading the compiler's output: {e}"))?;
        if artifact.len() as u64 > most {
            return Err(format!("the compiled artifact is over {most} bytes: refused"));
        }
        if !status.success() {
            return Err(failed(status, &errors.join().unwrap_or_default(), bounds));
        }
        // SAFETY: the bytes are an artifact this host's own binary produced just now, for an
        // engine with this engine's compilation settings (deserialize checks the settings).
        unsafe { Component::deserialize(engine, &artifact) }
            .map_err(|e| format!("the compiled artifact is unusable: {e:#}"))
    }
}

/// The compiling child: this binary's `compile-component`, with no environment, its memory
/// and CPU bounded, dying with its parent.
fn child_command(program: &std::path::Path, max_wasm_stack: usize, bounds: &CompileBounds) -> Command {
    let mut command = Command::new(program);
    command
        .arg("compile-component")
        .arg("--max-wasm-stack")
        .arg(max_wasm_stack.to_string())
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let limit = bounds.memory_bytes;
        // CPU seconds as a backstop of the wall-clock bound (parallel compiles use several).
        let cpu = bounds.timeout.as_secs().saturating_mul(4).saturating_add(1);
        // SAFETY: setrlimit and prctl are async-signal-safe and touch no memory of the parent.
        unsafe {
            command.pre_exec(move || {
                let rl = libc::rlimit { rlim_cur: limit as libc::rlim_t, rlim_max: limit as libc::rlim_t };
                let cpu = libc::rlimit { rlim_cur: cpu as libc::rlim_t, rlim_max: cpu as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_AS, &rl) != 0 || libc::setrlimit(libc::RLIMIT_CPU, &cpu) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Dies with the thread that waits for it, should the worker exit first.
                #[cfg(target_os = "linux")]
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    command
}

/// Wait for the child at most `timeout`; killed past it.
fn wait_bounded(child: &mut std::process::Child, timeout: Duration) -> Result<std::process::ExitStatus, String> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "compiling it took longer than the bound of {} (the compile was stopped)",
                    crate::text::duration(timeout)
                ));
            }
            // A blocking thread of its own: polling the child is the portable way to bound it.
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("waiting for the compiler: {e}"));
            }
        }
    }
}

/// Why a compile failed, from the child's status and the last line it printed.
fn failed(status: std::process::ExitStatus, errors: &str, bounds: &CompileBounds) -> String {
    let why = errors.trim().lines().last().unwrap_or("").to_string();
    if let Some(at) = why.find("invalid component") {
        return crate::text::bounded(&why[at..], 2048, "…");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        // A stop signal (Ctrl-C reaches the compiler too, as one of the worker's process group),
        // not the memory bound: nothing is wrong with the component.
        let stopped_by = match status.signal() {
            Some(libc::SIGTERM) => Some("SIGTERM"),
            Some(libc::SIGINT) => Some("SIGINT"),
            Some(libc::SIGHUP) => Some("SIGHUP"),
            Some(libc::SIGQUIT) => Some("SIGQUIT"),
            _ => None,
        };
        if let Some(signal) = stopped_by {
            return format!("the compile was stopped by {signal}: this process is stopping");
        }
    }
    format!(
        "compiling it failed within the memory bound of {} MiB ({}){}",
        bounds.memory_bytes >> 20,
        status,
        if why.is_empty() { String::new() } else { format!(": {}", crate::text::bounded(&why, 512, "…")) }
    )
}

struct SlotGuard<'a>(&'a Compiler);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut running = self.0.running.lock().unwrap_or_else(|p| p.into_inner());
        *running = running.saturating_sub(1);
        self.0.room.notify_one();
    }
}

/// The largest component any configuration may allow: the compiling child reads no more.
pub const MAX_COMPONENT_BYTES: u64 = 1 << 30;

/// The child's side (`taskhost compile-component`): read a component on stdin, write its
/// compiled artifact on stdout.
/// With `incremental`, functions compiled before (by any component) are taken from there and new
/// ones added; the store does not change what the artifact is compiled for.
pub fn compile_stdin_to_stdout(max_wasm_stack: usize, incremental: Option<Incremental>) -> crate::error::Result<()> {
    let engine_error = |e: wasmtime::Error| crate::error::Error::Engine(format!("{e:#}"));
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_COMPONENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| crate::error::Error::io("reading the component", e))?;
    let mut config = super::engine_config(max_wasm_stack);
    let store = incremental.as_ref().and_then(|i| super::incremental::DiskStore::open(&i.dir)).map(Arc::new);
    if let Some(store) = &store {
        config.enable_incremental_compilation(store.clone()).map_err(engine_error)?;
    }
    let engine = Engine::new(&config).map_err(engine_error)?;
    let component = Component::new(&engine, &bytes)
        .map_err(|e| crate::error::Error::Engine(format!("invalid component: {e:#}")))?;
    if let (Some(store), Some(i)) = (&store, &incremental) {
        store.evict(i.max_bytes);
    }
    let artifact = component.serialize().map_err(|e| crate::error::Error::Engine(format!("{e:#}")))?;
    std::io::stdout().write_all(&artifact).map_err(|e| crate::error::Error::io("writing the artifact", e))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn a_compile_stopped_by_a_signal_is_not_blamed_on_the_memory_bound() {
        let bounds = CompileBounds::default();
        // A wait status of a signal number alone: killed by that signal.
        let stopped = failed(std::process::ExitStatus::from_raw(libc::SIGTERM), "", &bounds);
        assert_eq!(stopped, "the compile was stopped by SIGTERM: this process is stopping");
        let aborted = failed(std::process::ExitStatus::from_raw(libc::SIGABRT), "memory allocation failed", &bounds);
        assert!(aborted.contains("within the memory bound"), "{aborted}");
    }
}
