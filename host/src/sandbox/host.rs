//! The store's data for one run, and the host functions a handler may import.
//!
//! Every import is bounded and but two synchronous: they only touch this run's memory-resident
//! state. The two, `dependencies` and `await-signal`, read the database through the runner's
//! readers, once a run (a signal name).
//! Progress reaches the database through a bounded channel drained by the runner, so a guest
//! can neither block on the database nor flood the host.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::taskhost::plugin::{host, types};
use super::bindings_v1::taskhost::plugin as v1;
use super::limits::{GuestLimiter, Limits};
use crate::model::{ProgressUpdate, RunId, TaskId};

/// Where a run's progress reports go. `try_send`: a full channel drops the report, and the
/// final outcome carries the latest progress anyway.
pub type ProgressSender = mpsc::Sender<ProgressUpdate>;

/// Largest partial results forwarded while the run goes on (larger ones are kept for the
/// outcome only): bounds what the progress channel can hold.
const MAX_FORWARDED_RESULTS_BYTES: usize = 64 << 10;

/// Minimum time between two partial-results reports forwarded for one run.
const RESULTS_REPORT_INTERVAL: Duration = Duration::from_millis(100);

/// The longest a run may snooze its task at once.
pub const MAX_SNOOZE: Duration = Duration::from_secs(30 * 24 * 3600);

/// The shortest snooze: a shorter one is taken as this.
pub const MIN_SNOOZE: Duration = Duration::from_secs(1);

/// What a run's store holds: its WASI context, limits, network, progress and report.
pub struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: GuestLimiter,
    pub(crate) limits: Limits,
    pub(crate) task_id: TaskId,
    pub(crate) run_id: RunId,
    pub(crate) deadline: Instant,
    pub(crate) progress_tx: Option<ProgressSender>,
    pub(crate) report: RunReport,
    /// Set by `snooze`: the run, if it returns ok, ends snoozed for this long.
    pub(crate) snooze: Option<Duration>,
    /// The tasks it queued (`enqueue`), and the rules they follow.
    pub(crate) children: super::children::Children,
    queueing: super::children::Queueing,
    /// The tasks its task runs after (`dependencies`), read at the first call.
    pub(crate) dependencies: super::dependencies::Dependencies,
    /// What its waits for signals found (`await-signal`), and the wait it ends with.
    pub(crate) signals: super::signals::Signals,
    last_results_sent: Option<Instant>,
    /// Bytes `dependencies` and `await-signal` handed over this run: each call copies what was
    /// read once, so a guest calling in a loop is refused past [`Self::handed_bound`].
    handed: usize,
    http: WasiHttpCtx,
    pub(crate) net: super::net::RunNet,
}

/// What a handler reported while it ran.
#[derive(Debug, Default, Clone)]
pub struct RunReport {
    /// The latest progress, 0 to 100.
    pub percent: Option<u8>,
    /// The latest partial results.
    pub partial_results: Option<String>,
    /// The guest's log lines, `[LEVEL] text` each, within the run's log cap.
    pub logs: String,
    /// Log lines dropped past the cap.
    pub logs_dropped: u64,
    /// The host's own lines about the run (`[host] text`), few and short.
    host_lines: Vec<String>,
    /// One line per network request (bounded by the network log).
    network: Vec<String>,
}

impl RunReport {
    /// Most host lines kept per run.
    const MAX_HOST_LINES: usize = 16;

    /// Note something the host did or refused, shown with the run's logs as a `[host]` line.
    pub fn note(&mut self, line: impl Into<String>) {
        if self.host_lines.len() < Self::MAX_HOST_LINES {
            self.host_lines.push(line.into());
        }
    }

    /// Add the lines of the run's network requests.
    pub(crate) fn add_network(&mut self, lines: Vec<String>) {
        self.network = lines;
    }

    /// Add what the guest printed after its log lines, within the same cap.
    pub(crate) fn add_printed(&mut self, printed: super::output::Printed, cap: usize) {
        self.logs_dropped += printed.dropped;
        for line in printed.lines.split_inclusive('\n') {
            if self.logs.len() + line.len() <= cap {
                self.logs.push_str(line);
            } else {
                self.logs_dropped += 1;
            }
        }
    }

    /// The run's logs as stored: the guest's lines, then the host's. Every guest line starts
    /// with its level in brackets and can hold no line break, so a `[host]` line can only be
    /// the host's.
    pub fn logs(&self) -> Option<String> {
        if self.logs.is_empty() && self.logs_dropped == 0 && self.host_lines.is_empty() && self.network.is_empty() {
            return None;
        }
        let mut out = self.logs.clone();
        for line in self.network.iter().chain(&self.host_lines) {
            out.push_str("[host] ");
            out.push_str(&crate::text::one_line(line));
            out.push('\n');
        }
        if self.logs_dropped > 0 {
            out.push_str(&format!("[host] {} more log lines dropped: over the log limit\n", self.logs_dropped));
        }
        Some(out)
    }
}

impl HostState {
    /// What a run may be handed by `dependencies` and `await-signal` in all: four times the
    /// results limit, and at least 64 MiB (a join reads its dependencies once; a loop re-reading
    /// them is the guest making the host copy without end).
    fn handed_bound(&self) -> usize {
        self.limits.max_results_bytes.saturating_mul(4).max(64 << 20)
    }

    /// Count `bytes` handed to the guest; refused once past [`Self::handed_bound`].
    fn hand_over(&mut self, bytes: usize) -> Result<(), String> {
        self.handed = self.handed.saturating_add(bytes);
        match self.handed > self.handed_bound() {
            true => Err(format!(
                "this run was handed {} bytes by dependencies and await-signal, over {}: keep what a call returns",
                self.handed,
                self.handed_bound()
            )),
            false => Ok(()),
        }
    }

    pub(crate) fn new(
        wasi: WasiCtx,
        limits: Limits,
        (task_id, run_id): (TaskId, RunId),
        progress_tx: Option<ProgressSender>,
        deadline: Instant,
        net: super::net::RunNet,
        queueing: super::children::Queueing,
    ) -> Self {
        HostState {
            wasi,
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(limits.max_handles);
                table
            },
            limiter: GuestLimiter::new(&limits),
            limits,
            task_id,
            run_id,
            deadline,
            progress_tx,
            report: RunReport::default(),
            snooze: None,
            children: super::children::Children::default(),
            queueing,
            dependencies: super::dependencies::Dependencies::default(),
            signals: super::signals::Signals::default(),
            last_results_sent: None,
            handed: 0,
            http: {
                // Each header set a guest builds is held by the host: 16 KiB each, not 128.
                let mut ctx = WasiHttpCtx::new();
                ctx.set_field_size_limit(16 << 10);
                ctx
            },
            net,
        }
    }

    fn forward(&mut self, percent: Option<u8>, results: Option<String>) {
        if let Some(tx) = &self.progress_tx {
            let _ = tx.try_send(ProgressUpdate { task_id: self.task_id, run_id: self.run_id, percent, results });
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.net }
    }
}

impl types::Host for HostState {}

impl host::Host for HostState {
    fn set_progress(&mut self, percent: u8) {
        let percent = percent.min(100);
        if self.report.percent == Some(percent) {
            return;
        }
        self.report.percent = Some(percent);
        self.forward(Some(percent), None);
    }

    fn set_results(&mut self, json: String) -> Result<(), String> {
        if json.len() > self.limits.max_results_bytes {
            return Err(format!(
                "results are {} bytes, over this handler's limit of {} bytes",
                json.len(),
                self.limits.max_results_bytes
            ));
        }
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&json) {
            return Err(format!("results are not valid JSON: {e}"));
        }
        let now = Instant::now();
        let due = self.last_results_sent.is_none_or(|t| now.duration_since(t) >= RESULTS_REPORT_INTERVAL);
        if due && json.len() <= MAX_FORWARDED_RESULTS_BYTES {
            self.last_results_sent = Some(now);
            self.forward(None, Some(json.clone()));
        }
        self.report.partial_results = Some(json);
        Ok(())
    }

    fn log(&mut self, level: types::LogLevel, message: String) {
        let level = match level {
            types::LogLevel::Trace => "trace",
            types::LogLevel::Debug => "debug",
            types::LogLevel::Info => "info",
            types::LogLevel::Warn => "warn",
            types::LogLevel::Error => "error",
        };
        self.log_line(level, &message);
    }

    fn snooze(&mut self, ms: u64) -> Result<(), String> {
        let after = Duration::from_millis(ms);
        if after > MAX_SNOOZE {
            // The last call counts: a refused one leaves no snooze.
            self.snooze = None;
            return Err(format!("a snooze of {ms} ms is over the longest a task may snooze at once, 30 days"));
        }
        // A shorter one would let a guest (or the API it calls) spin its task without backoff.
        self.snooze = Some(after.max(MIN_SNOOZE));
        self.signals.wait = None;
        Ok(())
    }

    fn enqueue(&mut self, task: types::NewTask) -> Result<u32, String> {
        // Its strings were bounded by the store's hostcall fuel before they were copied.
        self.children.add(task, Vec::new(), false, &self.queueing, self.limits.max_children)
    }

    fn enqueue_after(&mut self, task: types::NewTask, after: Vec<u32>, run_anyway: bool) -> Result<u32, String> {
        // The list, too, was bounded by hostcall fuel: 4 bytes a number.
        self.children.add(task, after, run_anyway, &self.queueing, self.limits.max_children)
    }

    async fn dependencies(&mut self) -> Result<Vec<types::Dependency>, String> {
        // A guest blocked here is stopped by the run's outer timeout, or its stop, as any.
        let found = self.dependencies.get(self.limits.max_results_bytes).await?;
        let bytes = found.iter().map(|d| d.handler.len() + d.results.as_ref().map_or(0, String::len) + 32).sum();
        self.hand_over(bytes)?;
        Ok(found)
    }

    async fn await_signal(&mut self, name: String, timeout_ms: u64) -> Result<types::Signal, String> {
        // The name was bounded by hostcall fuel before it was copied; a guest blocked here is
        // stopped by the run's outer timeout, or its stop, as any.
        let found = self.signals.wait_for(name, timeout_ms).await;
        if self.signals.wait.is_some() {
            self.snooze = None;
        }
        if let Ok(types::Signal::Delivered(data)) = &found {
            self.hand_over(data.len())?;
        }
        found
    }
}

/// `taskhost:plugin@0.1.0`'s host: 0.2.0's without `snooze`.
impl v1::types::Host for HostState {}

impl v1::host::Host for HostState {
    fn set_progress(&mut self, percent: u8) {
        host::Host::set_progress(self, percent);
    }

    fn set_results(&mut self, json: String) -> Result<(), String> {
        host::Host::set_results(self, json)
    }

    fn log(&mut self, level: v1::types::LogLevel, message: String) {
        use v1::types::LogLevel as L;
        let level = match level {
            L::Trace => "trace",
            L::Debug => "debug",
            L::Info => "info",
            L::Warn => "warn",
            L::Error => "error",
        };
        self.log_line(level, &message);
    }
}

impl HostState {
    /// Add a guest's log line at `level`, within the run's log cap.
    fn log_line(&mut self, level: &str, message: &str) {
        // The message was bounded by the store's hostcall fuel before it was copied.
        let room = self.limits.max_log_bytes.saturating_sub(self.report.logs.len());
        if level.len() + message.len() + 4 > room {
            self.report.logs_dropped += 1;
            return;
        }
        let message = crate::text::one_line(message);
        let line_len = level.len() + message.len() + 4;
        if line_len > room {
            self.report.logs_dropped += 1;
            return;
        }
        tracing::debug!(run_id = self.run_id, level, "guest: {message}");
        self.report.logs.push('[');
        self.report.logs.push_str(level);
        self.report.logs.push_str("] ");
        self.report.logs.push_str(&message);
        self.report.logs.push('\n');
    }
}
