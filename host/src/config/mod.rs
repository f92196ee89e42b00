//! The operator's configuration file: the only place that grants a handler anything or raises
//! its limits. It is trusted (the operator writes it, outside the plugins directory) and given
//! with `--config FILE` or `TASKHOST_CONFIG`:
//!
//! ```toml
//! [limits]                      # every handler's limits (default: the built-in defaults)
//! memory_mb = 128
//! deadline = "30s"
//!
//! [plugins]
//! max_component_mb = 64         # component files over this are refused before being read
//! cache_max_mb = 2048           # the compiled-code cache is kept under this size
//! compile_timeout = "120s"      # one compile's wall-clock bound (in a child process)
//! compile_memory_mb = 3072      # and its address-space bound
//!
//! [handlers.probe]              # one handler: limits above the defaults, and grants
//! digest = "9f86d08…"           # optional: all of this applies only to the component with this sha256
//! limits = { deadline = "120s" }
//! [handlers.probe.grants]
//! env = ["HOME"]
//! dirs = [{ host = "/srv/data", guest = "/data", mode = "ro" }]
//!
//! [handlers.send-mail]
//! max_running = 5               # runs of this handler in flight at once, across all workers
//! rate_limit = "10/1s"          # starts per period, across all workers (rate_burst = N: N more
//!                               # at once after a quiet spell); both kept in the database
//! [queues.payments]
//! max_running = 2               # the same for a queue, and max_running_per_key = N: runs in
//!                               # flight of each key (a task's --key) at once; rate_limit_per_key
//!                               # (and rate_burst_per_key): starts of each key, paced apart;
//!                               # fuel_per_turn = N: each key's turns spaced by its runs' fuel
//!                               # on_success = "delete": a success deletes its task where
//!                               # nothing reads it again (a narrow record of its end is kept)
//! [keys.tenant-a]
//! weight = 3                    # a key's share: three turns to a weight-1 key's one
//!
//! [tasks]
//! max_data_bytes = 1048576      # a task's data at most, on every database (checked before it)
//! max_snoozes = 1000            # times a task may snooze; one more ends it as too-many-snoozes
//! max_depth = 100               # how deep tasks queued by runs nest; a task this deep queues none
//! sql_add_handlers = "any"      # or "deployed": SQL's taskhost_add refuses a handler not
//!                               # deployed into the database (applied by `taskhost migrate`)
//!
//! [schedules.nightly]           # a periodic task (see crate::schedule), kept in the database
//! cron = "0 3 * * *"            # by the overseer holding the lease, which adds, updates and
//! handler = "report"            # removes the schedules the file declares
//! data = { kind = "daily" }     # or a JSON text: data = '{"kind": "daily"}'
//! time_zone = "Europe/Paris"    # optional, like queue, priority and missed = "once" | "skip"
//! ```
//!
//! `[overseer]` holds the maintenance services' settings, one table a service with the fields of
//! its `Config` (see [`crate::overseer`]): `[overseer.rotation] retention = "90days"`.
//!
//! The same file may hold the `taskhost` command's options (`[options]`, `[worker]`, `[add]`,
//! `[list]`), which the command reads; they are ignored here.
//!
//! A plugin's own manifest (`NAME.toml` beside `NAME.wasm`) may only lower these limits. Every
//! value is checked when the file is loaded; a bad one is one clear error.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::located;
use crate::model::{Limit, LimitScope, RunLimits};
use crate::overseer::OverseerConfig;
use crate::sandbox::compile::CompileBounds;
use crate::sandbox::{Grants, GrantsConfig, LimitOverrides, Limits};
use crate::schedule::NewSchedule;

pub mod api;
mod flow;
mod tasks;

pub use tasks::SqlAddHandlers;

/// What the operator allows handlers: limits, grants, and how large a component may be.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Limits of a handler the configuration says nothing else about.
    pub limits: Limits,
    /// Component files larger than this are refused before they are read.
    pub max_component_bytes: u64,
    /// The largest task data queued (`[tasks] max_data_bytes`), the same on every database.
    pub max_data_bytes: usize,
    /// How many times a task may snooze (`[tasks] max_snoozes`); one more fails, not retried.
    pub max_snoozes: u32,
    /// How deep tasks queued by runs may nest (`[tasks] max_depth`).
    pub max_depth: u32,
    /// Which handlers `taskhost_add` in SQL takes (`[tasks] sql_add_handlers`).
    pub sql_add_handlers: SqlAddHandlers,
    /// The compiled-code cache is kept under this size (least recently used artifacts go).
    pub cache_max_bytes: u64,
    /// How compiling a component is bounded. `program` (the binary that compiles in a child
    /// process) is set by whoever starts the host, not by the file.
    pub compile: CompileBounds,
    /// Handler name → the operator's word on it.
    pub handlers: HashMap<String, HandlerPolicy>,
    /// The periodic tasks the file declares, by name.
    pub schedules: Vec<NewSchedule>,
    /// Runs in flight at once across all workers, per queue and per handler.
    pub run_limits: RunLimits,
    /// The maintenance services' settings (`[overseer]`), for a worker's overseer or one alone.
    pub overseer: OverseerConfig,
    /// Who may call the HTTP API (`[api]`).
    pub api: api::ApiSection,
}

/// The operator's word on one handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerPolicy {
    /// When set, the handler is usable only as the component with this sha256 (hex).
    pub digest: Option<String>,
    /// Its limits at most.
    pub limits: Limits,
    /// What it may reach.
    pub grants: Grants,
}

impl Policy {
    /// The largest component read, unless the file says otherwise.
    pub const DEFAULT_MAX_COMPONENT_BYTES: u64 = 64 << 20;
    /// The largest component any configuration may allow.
    pub const MAX_COMPONENT_BYTES: u64 = crate::sandbox::compile::MAX_COMPONENT_BYTES;
    /// The compiled-code cache's size, unless the file says otherwise.
    pub const DEFAULT_CACHE_MAX_BYTES: u64 = 2 << 30;
    /// A task's data at most, unless the file says otherwise (as a cloud task queue's limit).
    pub const DEFAULT_MAX_DATA_BYTES: usize = crate::model::DEFAULT_MAX_DATA_BYTES;
    /// Times a task may snooze unless the file says otherwise.
    pub const DEFAULT_MAX_SNOOZES: u32 = tasks::DEFAULT_MAX_SNOOZES;
    /// The largest task data any configuration may allow (as the largest results).
    pub const MAX_DATA_BYTES: usize = Limits::MAX_RESULTS_BYTES;
    /// The least limit of task data a configuration may set: `taskhost_add` on MariaDB reads the
    /// limit only for more data than this (a read costs its common call a third more).
    pub const MIN_DATA_BYTES: usize = 1024;

    /// Read and check the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Policy> {
        let bad = |reason: String| Error::BadConfig { path: path.to_path_buf(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let file: ConfigFile = toml::from_str(&text).map_err(|e| bad(located::describe(&e, &text)))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Policy::from_file(&file, &base).map_err(|e| bad(located::locate_message(&text, &e)))
    }

    fn from_file(file: &ConfigFile, base: &Path) -> std::result::Result<Policy, String> {
        let limits = Limits::default().with(&file.limits).map_err(|e| format!("[limits]: {e}"))?;
        let max_mb = file.plugins.max_component_mb.unwrap_or(Self::DEFAULT_MAX_COMPONENT_BYTES >> 20);
        if max_mb == 0 || max_mb > Self::MAX_COMPONENT_BYTES >> 20 {
            return Err(format!(
                "[plugins] max_component_mb = {max_mb} is out of range (1 to {})",
                Self::MAX_COMPONENT_BYTES >> 20
            ));
        }
        let tasks::Checked { max_data_bytes, max_snoozes, max_depth, sql_add_handlers } = file.tasks.checked()?;
        let cache_mb = file.plugins.cache_max_mb.unwrap_or(Self::DEFAULT_CACHE_MAX_BYTES >> 20);
        let compile = compile_bounds(file)?;
        let mut handlers = HashMap::new();
        let mut run_limits = RunLimits::default();
        for (name, h) in &file.handlers {
            if !crate::model::valid_handler_name(name) {
                return Err(format!("[handlers.{name}]: not a plugin name (letters, digits, '-' and '_')"));
            }
            if let Some(d) = &h.digest {
                if d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!("[handlers.{name}] digest: expected 64 hexadecimal digits (a sha256)"));
                }
            }
            let handler = HandlerPolicy {
                digest: h.digest.as_ref().map(|d| d.to_ascii_lowercase()),
                limits: limits.with(&h.limits).map_err(|e| format!("[handlers.{name}.limits]: {e}"))?,
                grants: h.grants.resolve(base).map_err(|e| format!("[handlers.{name}.grants]: {e}"))?,
            };
            let limit = Limit::from_settings(h.max_running, h.rate_limit.as_deref(), h.rate_burst)
                .map_err(|e| format!("[handlers.{name}] {e}"))?;
            run_limits.set(LimitScope::Handler, name, limit);
            handlers.insert(name.clone(), handler);
        }
        flow::read(&file.queues, &file.keys, &mut run_limits)?;
        let mut schedules = Vec::with_capacity(file.schedules.len());
        for (name, entry) in &file.schedules {
            let s = entry.check(name).map_err(|e| format!("[schedules.{name}]: {e}"))?;
            if s.data.len() > max_data_bytes {
                return Err(format!(
                    "[schedules.{name}]: its data is {} bytes, over [tasks] max_data_bytes = {max_data_bytes}",
                    s.data.len()
                ));
            }
            schedules.push(s);
        }
        Ok(Policy {
            limits,
            max_component_bytes: max_mb << 20,
            max_data_bytes,
            max_snoozes,
            max_depth,
            sql_add_handlers,
            cache_max_bytes: cache_mb.saturating_mul(1 << 20),
            compile,
            handlers,
            schedules,
            run_limits,
            overseer: checked_overseer(&file.overseer)?,
            api: {
                file.api.check()?;
                file.api.clone()
            },
        })
    }

    /// The limits a handler may use at most (before its manifest lowers them) and its grants.
    pub fn for_handler(&self, name: &str, digest: &str) -> std::result::Result<(Limits, Grants), String> {
        match self.handlers.get(name) {
            None => Ok((self.limits, Grants::default())),
            Some(h) => match &h.digest {
                Some(pin) if pin != digest => Err(format!(
                    "the operator's configuration pins {name} to sha256 {pin}, but this component's is {digest}"
                )),
                _ => Ok((h.limits, h.grants.clone())),
            },
        }
    }

    /// The largest text this host writes to the database in one value: a task's data, or a
    /// run's results with its logs, under the most generous limits of the file. A server must
    /// take statements of this size (checked when a store opens, see
    /// [`crate::store::StoreOptions::max_value_bytes`]).
    pub fn largest_value_bytes(&self) -> usize {
        let outcome = |l: &Limits| l.max_results_bytes + l.max_log_bytes;
        let handlers = self.handlers.values().map(|h| outcome(&h.limits));
        handlers.chain([outcome(&self.limits), self.max_data_bytes]).max().unwrap_or(self.max_data_bytes)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            limits: Limits::default(),
            max_component_bytes: Self::DEFAULT_MAX_COMPONENT_BYTES,
            max_data_bytes: Self::DEFAULT_MAX_DATA_BYTES,
            max_snoozes: Self::DEFAULT_MAX_SNOOZES,
            max_depth: crate::model::DEFAULT_MAX_DEPTH,
            sql_add_handlers: SqlAddHandlers::Any,
            cache_max_bytes: Self::DEFAULT_CACHE_MAX_BYTES,
            compile: CompileBounds::default(),
            handlers: HashMap::new(),
            schedules: Vec::new(),
            run_limits: RunLimits::default(),
            overseer: OverseerConfig::default(),
            api: api::ApiSection::default(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    limits: LimitOverrides,
    #[serde(default)]
    plugins: PluginsSection,
    #[serde(default)]
    tasks: tasks::TasksSection,
    #[serde(default)]
    handlers: HashMap<String, HandlerSection>,
    #[serde(default)]
    schedules: std::collections::BTreeMap<String, ScheduleSection>,
    #[serde(default)]
    queues: std::collections::BTreeMap<String, flow::QueueSection>,
    #[serde(default)]
    keys: std::collections::BTreeMap<String, flow::KeySection>,
    #[serde(default)]
    overseer: OverseerConfig,
    #[serde(default)]
    api: api::ApiSection,
    // The `taskhost` command's options ([options] and one table per command), which the command
    // reads and checks itself (host/src/cli/file.rs).
    #[allow(dead_code)]
    options: Option<toml::Table>,
    #[allow(dead_code)]
    worker: Option<toml::Table>,
    #[allow(dead_code)]
    add: Option<toml::Table>,
    #[allow(dead_code)]
    list: Option<toml::Table>,
    #[allow(dead_code)]
    serve: Option<toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginsSection {
    max_component_mb: Option<u64>,
    cache_max_mb: Option<u64>,
    #[serde(default, deserialize_with = "crate::sandbox::limits::duration_opt")]
    compile_timeout: Option<Duration>,
    compile_memory_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandlerSection {
    digest: Option<String>,
    #[serde(default)]
    limits: LimitOverrides,
    #[serde(default)]
    grants: GrantsConfig,
    max_running: Option<i64>,
    rate_limit: Option<String>,
    rate_burst: Option<i64>,
}

/// The `[overseer]` table, checked (the schedules it declares are the file's `[schedules]`).
fn checked_overseer(o: &OverseerConfig) -> std::result::Result<OverseerConfig, String> {
    o.check()?;
    Ok(o.clone())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleSection {
    cron: String,
    handler: String,
    /// A JSON text, or any TOML value (written as JSON).
    data: Option<toml::Value>,
    time_zone: Option<String>,
    queue: Option<String>,
    priority: Option<i32>,
    missed: Option<String>,
}

impl ScheduleSection {
    /// The schedule named `name`, checked as `taskhost schedule add` checks one (but for its
    /// handler, which the overseer reading this may not have).
    fn check(&self, name: &str) -> std::result::Result<NewSchedule, String> {
        if name.is_empty() || name.len() > crate::schedule::MAX_NAME_BYTES {
            return Err(format!("a schedule's name is 1 to {} bytes", crate::schedule::MAX_NAME_BYTES));
        }
        crate::schedule::Slots::new(&self.cron, self.time_zone.as_deref().unwrap_or("UTC"))
            .map_err(|e| e.to_string())?;
        if !crate::model::valid_handler_name(&self.handler) {
            return Err(format!("handler {:?} is not a plugin name (letters, digits, '-' and '_')", self.handler));
        }
        let data = match &self.data {
            None => "{}".to_string(),
            Some(toml::Value::String(text)) => {
                serde_json::from_str::<serde::de::IgnoredAny>(text)
                    .map_err(|e| format!("data is not valid JSON: {e}"))?;
                text.clone()
            }
            Some(value) => serde_json::to_string(value).map_err(|e| format!("data: {e}"))?,
        };
        let mut s = NewSchedule::new(name, &self.cron, &self.handler);
        s.data = data;
        if let Some(tz) = &self.time_zone {
            s.time_zone.clone_from(tz);
        }
        if let Some(q) = &self.queue {
            if let Some(reason) = crate::model::queue_refusal(q) {
                return Err(format!("queue: {reason}"));
            }
            s.queue.clone_from(q);
        }
        s.priority = self.priority.unwrap_or(0);
        if let Some(m) = &self.missed {
            s.missed = m.parse().map_err(|e: Error| e.to_string())?;
        }
        Ok(s)
    }
}

/// The compiler's bounds from `[plugins]`, each checked against its range.
fn compile_bounds(file: &ConfigFile) -> std::result::Result<CompileBounds, String> {
    let mut compile = CompileBounds::default();
    if let Some(t) = file.plugins.compile_timeout {
        if t.is_zero() || t > Duration::from_secs(3600) {
            return Err("[plugins] compile_timeout is out of range (1s to 1h)".into());
        }
        compile.timeout = t;
    }
    if let Some(mb) = file.plugins.compile_memory_mb {
        if !(256..=65536).contains(&mb) {
            return Err(format!("[plugins] compile_memory_mb = {mb} is out of range (256 to 65536)"));
        }
        compile.memory_bytes = mb << 20;
    }
    Ok(compile)
}

#[cfg(test)]
mod tests;
