//! The engine's settings: what the operator may set ([`SandboxConfig`]), what decides compiled
//! code ([`engine_config`]), and the thread that moves the epoch.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine, OptLevel};

use super::Limits;
use crate::error::{Error, Result};

/// Engine-wide settings. Changing any of them changes [`Sandbox::engine_fingerprint`](super::Sandbox::engine_fingerprint), so
/// compiled artifacts made under other settings are never loaded.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// How often the epoch advances; the granularity of deadlines and of yielding to tokio.
    pub epoch_tick: Duration,
    /// Component instances the pooling allocator reserves room for (concurrent runs).
    pub pool_instances: u32,
    /// Largest linear memory any handler may be granted.
    pub max_memory_bytes: u64,
    /// Native stack a guest may use before it traps with a stack overflow.
    pub max_wasm_stack: usize,
    /// Bytes of each pooled linear memory reset by memset (only resident pages, where the
    /// kernel can tell) rather than returned to the kernel.
    pub keep_resident_bytes: usize,
    /// What one run may hold of the shared pools: core instances, memories and tables of one
    /// component. The pools hold `pool_instances` times each, so one run can never take
    /// another's share; a component needing more is refused when it is loaded.
    pub max_core_instances_per_run: u32,
    /// Linear memories one run may hold.
    pub max_memories_per_run: u32,
    /// Tables one run may hold.
    pub max_tables_per_run: u32,
}

impl SandboxConfig {
    /// How often the engine's epoch moves (the deadline's resolution).
    pub const DEFAULT_EPOCH_TICK: Duration = Duration::from_millis(10);
    /// Runs the pool holds at once.
    pub const DEFAULT_POOL_INSTANCES: u32 = 100;
    /// The largest memory a pool slot reserves.
    pub const DEFAULT_MAX_MEMORY_BYTES: u64 = Limits::MAX_MEMORY_BYTES;
    /// A guest's stack.
    pub const DEFAULT_MAX_WASM_STACK: usize = 512 << 10;
    /// Memory of a freed slot kept resident.
    pub const DEFAULT_KEEP_RESIDENT_BYTES: usize = 2 << 20;
    // A Python component (componentize-py) has 14 core instances and one memory.
    /// Core instances one run may hold.
    pub const DEFAULT_MAX_CORE_INSTANCES_PER_RUN: u32 = 32;
    /// Linear memories one run may hold.
    pub const DEFAULT_MAX_MEMORIES_PER_RUN: u32 = 4;
    /// Tables one run may hold.
    pub const DEFAULT_MAX_TABLES_PER_RUN: u32 = 32;
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            epoch_tick: Self::DEFAULT_EPOCH_TICK,
            pool_instances: Self::DEFAULT_POOL_INSTANCES,
            max_memory_bytes: Self::DEFAULT_MAX_MEMORY_BYTES,
            max_wasm_stack: Self::DEFAULT_MAX_WASM_STACK,
            keep_resident_bytes: Self::DEFAULT_KEEP_RESIDENT_BYTES,
            max_core_instances_per_run: Self::DEFAULT_MAX_CORE_INSTANCES_PER_RUN,
            max_memories_per_run: Self::DEFAULT_MAX_MEMORIES_PER_RUN,
            max_tables_per_run: Self::DEFAULT_MAX_TABLES_PER_RUN,
        }
    }
}

/// Advances the engine's epoch from its own OS thread, so a busy tokio runtime cannot delay
/// deadlines: each tick while a run is in the sandbox; it sleeps while none is, so an idle worker,
/// or `serve` (which runs none), is not woken a hundred times a second for nothing.
pub(super) struct EpochTicker {
    shared: Arc<Ticking>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Ticking {
    stop: AtomicBool,
    runs: AtomicUsize,
}

/// A run in the sandbox, for as long as it is held: the epoch moves meanwhile.
pub(super) struct Running<'a>(&'a EpochTicker);

impl EpochTicker {
    /// Longest the thread sleeps with no run, in case a wake-up were ever missed.
    const IDLE_CHECK: Duration = Duration::from_secs(1);

    pub(super) fn start(engine: Engine, tick: Duration) -> Result<Self> {
        let shared = Arc::new(Ticking::default());
        let flag = shared.clone();
        let thread = std::thread::Builder::new()
            .name("taskhost-epoch".into())
            .spawn(move || {
                while !flag.stop.load(Ordering::SeqCst) {
                    // A run starting after this read unparks the thread, and an unpark given
                    // before the park makes it return at once: no start is missed.
                    if flag.runs.load(Ordering::SeqCst) == 0 {
                        std::thread::park_timeout(Self::IDLE_CHECK);
                        continue;
                    }
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                }
            })
            .map_err(|e| Error::io("starting the epoch thread", e))?;
        Ok(EpochTicker { shared, thread: Some(thread) })
    }

    /// A run starts: the epoch moves until every such guard is dropped.
    pub(super) fn running(&self) -> Running<'_> {
        if self.shared.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            self.wake();
        }
        Running(self)
    }

    fn wake(&self) {
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.shared.runs.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The settings that decide compiled code, shared by the sandbox and the compiler process (whose
/// artifacts the sandbox loads).
pub(crate) fn engine_config(max_wasm_stack: usize) -> Config {
    let mut cfg = Config::new();
    cfg.consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .max_wasm_stack(max_wasm_stack)
        // Fibers need room for the wasm stack plus host frames.
        .async_stack_size(max_wasm_stack + (1 << 20));
    cfg
}
