//! The sandbox: the one place that builds the wasmtime [`Engine`], and runs one task in one
//! fresh [`Store`].
//!
//! Every run gets fuel, a memory/table limiter, an epoch deadline checked every tick (the
//! epoch is advanced by a dedicated OS thread) and an outer tokio timeout for time spent in
//! host calls. The guest sees WASI with nothing granted: no files, no environment, no
//! network. The sandbox knows no SQL.

use std::sync::Arc;

use std::time::{Duration, Instant};

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline};

use crate::error::{Error, Result};
use crate::model::{RunId, TaskId};

pub mod children;
pub mod compile;
pub mod dependencies;
mod ending;
pub mod grants;
pub mod host;
mod incremental;
pub mod limits;
pub mod net;
mod output;
mod settings;
pub mod signals;
mod traps;
pub mod uncaught;

use ending::{outcome_of, what_it_left};
pub use grants::{Grants, GrantsConfig};
pub use host::{HostState, ProgressSender, RunReport};
pub use limits::{LimitOverrides, Limits};
pub(crate) use settings::engine_config;
use settings::EpochTicker;
pub use settings::SandboxConfig;
pub use traps::{codes, ErrorSource, Failure, FailureKind};

/// Bindings generated from `wit/task-handler.wit`, `taskhost:plugin@0.2.0` (the contract
/// documents them).
#[allow(missing_docs)]
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "task-handler",
        exports: { default: async },
        // The imports that wait: their first calls read the database.
        imports: { "taskhost:plugin/host.dependencies": async, "taskhost:plugin/host.await-signal": async },
    });
}

/// The host interface of `taskhost:plugin@0.1.0` (`wit/0.1/`), linked beside 0.2.0's so that
/// handlers built against it run as before. Its `handle` and task are 0.2.0's, so one
/// [`TaskHandlerPre`] checks and calls both.
#[allow(missing_docs)]
pub mod bindings_v1 {
    wasmtime::component::bindgen!({
        path: "../wit/0.1",
        world: "task-handler",
        exports: { default: async },
    });
}

pub use bindings::TaskHandlerPre;

/// The task as the handler receives it.
#[derive(Debug, Clone)]
pub struct RunInput {
    /// The task.
    pub task_id: TaskId,
    /// The run.
    pub run_id: RunId,
    /// The run's attempt number.
    pub attempt: u32,
    /// The handler.
    pub handler: String,
    /// The task's data (a JSON document).
    pub data: String,
    /// Who queued the task.
    pub queued_by: Option<String>,
    /// What its run may queue (`enqueue`) besides its handler's limits.
    pub queueing: children::Queueing,
}

/// How a run ended inside the sandbox.
#[derive(Debug, Clone)]
pub enum GuestOutcome {
    /// The handler returned Ok with these (validated) JSON results.
    Success(Option<String>),
    /// A handler error, a trap or a broken limit.
    Failed(Failure),
    /// Stopped from outside (its [`RunControl::stop`]) before it ended.
    Stopped,
    /// The handler called `snooze` and returned ok: its task is due again after this long.
    Snoozed(Duration),
    /// The handler's wait for a signal found it not yet sent and returned ok: its task waits.
    Awaiting(crate::model::SignalWait),
}

/// What a run gets besides its handler and task, all optional: where its progress goes, what is
/// left of its task's run timeout, and a signal that stops it (the task was cancelled, or its run
/// ended elsewhere). A run stopped so keeps what it logged and the fuel it used.
#[derive(Debug, Default, Clone)]
pub struct RunControl {
    /// Where progress reports go (None: dropped).
    pub progress: Option<ProgressSender>,
    /// The run stops at the earlier of this and its handler's deadline.
    pub time_left: Option<Duration>,
    /// Notified to stop the run at once (cancelled, or ended elsewhere).
    pub stop: Option<Arc<tokio::sync::Notify>>,
    /// Reads the tasks its task runs after, if it asks (`dependencies`; None: it runs after none).
    pub dependencies: Option<dependencies::DependencyReader>,
    /// Looks up the signals it waits for (`await-signal`; None: none is ever sent).
    pub signals: Option<signals::SignalReader>,
}

/// How a run in the sandbox went.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// How it ended.
    pub outcome: GuestOutcome,
    /// The fuel it burnt.
    pub fuel_used: u64,
    /// What it reported and logged.
    pub report: RunReport,
    /// How long it took.
    pub elapsed: Duration,
    /// The tasks it queued, if it ended well (returned ok, snoozed or waits); none otherwise.
    pub children: Vec<children::Child>,
    /// The signals handed to it (read if it succeeded), if it ended well; none otherwise.
    pub signals: Vec<crate::model::SignalId>,
}

impl RunResult {
    /// A run that failed before its guest started: nothing used, reported or queued.
    fn unstarted(failure: Failure, started: Instant) -> Self {
        RunResult {
            outcome: GuestOutcome::Failed(failure),
            fuel_used: 0,
            report: RunReport::default(),
            elapsed: started.elapsed(),
            children: Vec::new(),
            signals: Vec::new(),
        }
    }
}

/// The run stops at the earlier of its handler's deadline and its task's run timeout: whether
/// the run timeout comes first, the time allowed, and the instant it ends.
fn time_allowed(limits: &Limits, time_left: Option<Duration>, started: Instant) -> (bool, Duration, Instant) {
    let run_timeout_first = time_left.is_some_and(|t| t < limits.deadline);
    let allowed = match time_left {
        Some(t) if run_timeout_first => t,
        _ => limits.deadline,
    };
    let far = started + Duration::from_secs(365 * 24 * 3600);
    (run_timeout_first, allowed, started.checked_add(allowed).unwrap_or(far))
}

/// Fuel a run gets at a time; a yield to tokio comes with each step. Compiled code keeps its
/// fuel count in a register and stores it only when it leaves wasm for the fuel check, so a run
/// interrupted for time would report the fuel of its last store (often a few hundred units).
/// Refuelling in steps stores it every step: a run stopped by its deadline then reports what it
/// burnt, short by less than one step.
const FUEL_STEP: u64 = 1_000_000;

/// The wasmtime engine and linker shared by every run.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
    fingerprint: String,
    capacity: u32,
    max_wasm_stack: usize,
    ticker: EpochTicker,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

impl Sandbox {
    /// The engine and its pool, as `config` says; the one place an engine is built.
    pub fn new(config: &SandboxConfig) -> Result<Self> {
        let mut cfg = engine_config(config.max_wasm_stack);
        let mut pool = PoolingAllocationConfig::default();
        let n = config.pool_instances.max(1);
        let (cores, memories, tables) = (
            config.max_core_instances_per_run.max(1),
            config.max_memories_per_run.max(1),
            config.max_tables_per_run.max(1),
        );
        pool.total_component_instances(n)
            .max_core_instances_per_component(cores)
            .max_memories_per_component(memories)
            .max_tables_per_component(tables)
            .total_core_instances(n.saturating_mul(cores))
            .total_memories(n.saturating_mul(memories))
            .total_tables(n.saturating_mul(tables))
            .table_elements(usize::try_from(Limits::MAX_TABLE_ELEMENTS).unwrap_or(usize::MAX))
            .total_stacks(n)
            .max_memory_size(usize::try_from(config.max_memory_bytes).unwrap_or(usize::MAX))
            // Reset small, reused slots with memset instead of madvise: madvise flushes the TLB
            // of every thread (an IPI per run), which dominated short runs. The pages a run wrote
            // are found by a scan of up to 512 regions (32 in wasmtime as published: vendor/).
            .linear_memory_keep_resident(config.keep_resident_bytes)
            .table_keep_resident(config.keep_resident_bytes.min(1 << 16))
            .pagemap_scan(Enabled::Auto);
        // Decommits are not batched: a batch holds the memory of every slot in it until it is
        // flushed, and a few memory-hungry guests would then pass the worker's RSS cap.
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&cfg).map_err(|e| Error::Engine(format!("{e:#}")))?;

        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| Error::Engine(format!("{e:#}")))?;
        // wasi:http for every handler; requests pass the run's grant check (sandbox::net).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|e| Error::Engine(format!("{e:#}")))?;
        // Sockets stay refused, now saying so in the run's logs.
        net::link_sockets(&mut linker).map_err(|e| Error::Engine(format!("{e:#}")))?;
        bindings::TaskHandler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| Error::Engine(format!("{e:#}")))?;
        bindings_v1::TaskHandler::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| Error::Engine(format!("{e:#}")))?;

        let fingerprint = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut h);
            format!("{:016x}", h.finish())
        };
        let ticker = EpochTicker::start(engine.clone(), config.epoch_tick)?;
        Ok(Sandbox { engine, linker, fingerprint, capacity: n, max_wasm_stack: config.max_wasm_stack, ticker })
    }

    /// Runs this sandbox can hold at once (its pool's component instances).
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Native stack a guest may use (part of the compilation settings).
    pub fn max_wasm_stack(&self) -> usize {
        self.max_wasm_stack
    }

    /// The engine, for compiling components.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Identifies the engine's compilation settings (and wasmtime's version): part of the key
    /// of cached compiled artifacts.
    pub fn engine_fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Check a compiled component against the `task-handler` world: every import must be one
    /// the host provides and `handle` must be exported.
    pub fn prepare(&self, component: &Component) -> std::result::Result<TaskHandlerPre<HostState>, String> {
        let pre = self.linker.instantiate_pre(component).map_err(|e| format!("{e:#}"))?;
        TaskHandlerPre::new(pre).map_err(|e| format!("does not implement the task-handler world: {e:#}"))
    }

    /// Run one task in a fresh store. Never panics and never returns early on a guest
    /// failure: every way a run can end is a [`GuestOutcome`].
    pub async fn run(
        &self,
        pre: &TaskHandlerPre<HostState>,
        limits: Limits,
        grants: &Grants,
        input: RunInput,
        control: RunControl,
    ) -> RunResult {
        let RunControl { progress, time_left, stop, dependencies, signals } = control;
        // The epoch moves (deadlines, yields) while this run lasts, its store dropped included.
        let _ticking = self.ticker.running();
        let started = Instant::now();
        let output = output::GuestOutput::new(limits.max_log_bytes);
        let (run_timeout_first, allowed, deadline) = time_allowed(&limits, time_left, started);
        let net = net::RunNet::new(&input.handler, grants, deadline);
        let wasi = match grants::wasi_ctx(grants, &output, net.sockets()) {
            Ok(w) => w,
            Err(e) => return RunResult::unstarted(Failure::denied(e), started),
        };
        let net_log = net.log().clone();
        let mut store = self.store(
            HostState::new(wasi, limits, (input.task_id, input.run_id), progress, deadline, net, input.queueing),
            &limits,
        );
        store.data_mut().dependencies = dependencies::Dependencies::new(dependencies);
        store.data_mut().signals = signals::Signals::new(signals);
        let task = bindings::Task {
            task_id: input.task_id,
            run_id: input.run_id,
            attempt: input.attempt,
            handler: input.handler,
            data: input.data,
            queued_by: input.queued_by,
        };
        // The outer timeout covers what epochs cannot interrupt: time blocked in a host call.
        let grace = Duration::from_secs(1).max(allowed / 10);
        let call = async {
            let instance = pre.instantiate_async(&mut store).await?;
            instance.call_handle(&mut store, &task).await
        };
        let stopped = async {
            match &stop {
                Some(stop) => stop.notified().await,
                None => std::future::pending().await,
            }
        };
        // Stopped: the call is dropped here, the store kept, as when the outer timeout fires.
        let result = tokio::select! {
            r = tokio::time::timeout(allowed.saturating_add(grace), call) => Some(r),
            () = stopped => None,
        };
        let fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        // Stopped for time: by the run timeout when it came first, else by the deadline.
        let for_time = |in_host_call: bool| match run_timeout_first {
            true => Failure::run_timeout(allowed),
            false => Failure::deadline(limits.deadline, in_host_call),
        };
        let outcome = match result {
            None => GuestOutcome::Stopped,
            Some(Err(_elapsed)) => GuestOutcome::Failed(for_time(true)),
            Some(Ok(called)) => outcome_of(called, store.data(), &limits, for_time),
        };
        let mut report = std::mem::take(&mut store.data_mut().report);
        // A run that failed or was stopped queues nothing and reads no signal.
        let (children, signals) = match outcome {
            GuestOutcome::Success(_) | GuestOutcome::Snoozed(_) | GuestOutcome::Awaiting(_) => {
                (store.data_mut().children.take(), store.data().signals.delivered())
            }
            GuestOutcome::Failed(_) | GuestOutcome::Stopped => (Vec::new(), Vec::new()),
        };
        // Dropping the store stops the run's requests still going: their lines say so.
        drop(store);
        let outcome = what_it_left(outcome, &mut report, &net_log, &output, limits.max_log_bytes);
        RunResult { outcome, fuel_used, report, elapsed: started.elapsed(), children, signals }
    }

    /// A fresh store for one run, bounded by `limits`: memory and tables by its limiter, what the
    /// guest hands the host by hostcall fuel, instructions by fuel, time by the epoch deadline.
    fn store(&self, state: HostState, limits: &Limits) -> Store<HostState> {
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Bounds every string or list the guest hands the host, checked before copying.
        store.set_hostcall_fuel(limits.transfer_bytes());
        let _ = store.fuel_async_yield_interval(Some(FUEL_STEP));
        let _ = store.set_fuel(limits.fuel);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                // Give the tokio worker back to other runs and the heartbeat.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store
    }
}
