//! Per-run limits: what one run of a handler may consume, and how the store enforces them.

use std::time::Duration;

use serde::Deserialize;
use wasmtime::ResourceLimiter;

/// Resource limits of one run. Defaults are the constants below; a plugin's manifest
/// (`NAME.toml`, see [`crate::plugins`]) may override each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel (roughly: wasm instructions) a run may burn.
    pub fuel: u64,
    /// Bytes of linear memory, summed over the component's memories.
    pub memory_bytes: u64,
    /// Wall-clock time a run may take, host calls included.
    pub deadline: Duration,
    /// Elements a table may grow to.
    pub table_elements: u64,
    /// Bytes of results (final or partial) a run may return.
    pub max_results_bytes: usize,
    /// Bytes of log lines kept per run; later lines are counted and dropped.
    pub max_log_bytes: usize,
    /// Handles a run may hold at once: open files and directories, streams, pollables.
    pub max_handles: usize,
    /// Tasks a run may queue (`enqueue`).
    pub max_children: usize,
}

impl Limits {
    /// Fuel of a run (about instructions).
    pub const DEFAULT_FUEL: u64 = 10_000_000_000;
    /// Linear memory of a guest.
    pub const DEFAULT_MEMORY_BYTES: u64 = 256 << 20;
    /// Wall-clock time of a run.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);
    /// Elements of a guest's tables.
    pub const DEFAULT_TABLE_ELEMENTS: u64 = 20_000;
    /// Bytes of a run's results.
    pub const DEFAULT_MAX_RESULTS_BYTES: usize = 1 << 20;
    /// Bytes of a run's logs kept.
    pub const DEFAULT_MAX_LOG_BYTES: usize = 64 << 10;
    /// Handles (files, streams, pollables) a guest holds at once.
    pub const DEFAULT_MAX_HANDLES: usize = 1024;
    /// Tasks a run may queue.
    pub const DEFAULT_MAX_CHILDREN: usize = 1000;

    /// The largest value each limit may have, whoever sets it.
    pub const MAX_FUEL: u64 = 1_000_000_000_000_000;
    /// The most memory any configuration may give a guest.
    pub const MAX_MEMORY_BYTES: u64 = 4 << 30;
    /// The longest deadline any configuration may give.
    pub const MAX_DEADLINE: Duration = Duration::from_secs(24 * 3600);
    /// The most table elements any configuration may give.
    pub const MAX_TABLE_ELEMENTS: u64 = 100_000;
    /// The largest results any configuration may allow.
    pub const MAX_RESULTS_BYTES: usize = 64 << 20;
    /// The most log bytes any configuration may keep.
    pub const MAX_LOG_BYTES: usize = 16 << 20;
    /// The most handles any configuration may allow.
    pub const MAX_HANDLES: usize = 1 << 20;
    /// The most tasks any configuration lets a run queue.
    pub const MAX_CHILDREN: usize = 100_000;

    /// Bytes a guest may hand the host in one call (a string or list argument, or its returned
    /// results or error), checked in guest memory before anything is copied: the larger of the
    /// results and log caps, plus room for an error's code and message.
    pub fn transfer_bytes(&self) -> usize {
        self.max_results_bytes.max(self.max_log_bytes).max(64 << 10) + (16 << 10)
    }

    /// Apply the operator's overrides, which may raise or lower each limit, then check ranges.
    pub fn with(self, o: &LimitOverrides) -> Result<Limits, String> {
        let limits = self.apply(o);
        limits.check()?;
        Ok(limits)
    }

    fn apply(mut self, o: &LimitOverrides) -> Limits {
        if let Some(v) = o.fuel {
            self.fuel = v;
        }
        if let Some(v) = o.memory_mb {
            self.memory_bytes = v.saturating_mul(1 << 20);
        }
        if let Some(v) = o.deadline {
            self.deadline = v;
        }
        if let Some(v) = o.table_elements {
            self.table_elements = v;
        }
        if let Some(v) = o.max_results_bytes {
            self.max_results_bytes = v;
        }
        if let Some(v) = o.max_log_bytes {
            self.max_log_bytes = v;
        }
        if let Some(v) = o.max_handles {
            self.max_handles = v;
        }
        if let Some(v) = o.max_children {
            self.max_children = v;
        }
        self
    }

    /// Apply a plugin manifest's overrides, which may only lower limits: a value above this
    /// (the operator's) limit is lowered to it; a value below the sane range (zero) is refused.
    pub fn lowered_by(self, o: &LimitOverrides) -> Result<Limits, String> {
        let asked = self.apply(o);
        let pick = |set: bool, mine, theirs| if set { std::cmp::min(mine, theirs) } else { mine };
        let lowered = Limits {
            fuel: pick(o.fuel.is_some(), self.fuel, asked.fuel),
            memory_bytes: pick(o.memory_mb.is_some(), self.memory_bytes, asked.memory_bytes),
            deadline: if o.deadline.is_some() { self.deadline.min(asked.deadline) } else { self.deadline },
            table_elements: pick(o.table_elements.is_some(), self.table_elements, asked.table_elements),
            max_results_bytes: if o.max_results_bytes.is_some() {
                self.max_results_bytes.min(asked.max_results_bytes)
            } else {
                self.max_results_bytes
            },
            max_log_bytes: if o.max_log_bytes.is_some() {
                self.max_log_bytes.min(asked.max_log_bytes)
            } else {
                self.max_log_bytes
            },
            max_handles: if o.max_handles.is_some() {
                self.max_handles.min(asked.max_handles)
            } else {
                self.max_handles
            },
            max_children: if o.max_children.is_some() {
                self.max_children.min(asked.max_children)
            } else {
                self.max_children
            },
        };
        lowered.check()?;
        Ok(lowered)
    }

    /// Every limit within its sane range.
    pub fn check(&self) -> Result<(), String> {
        fn range<T: PartialOrd + std::fmt::Debug>(name: &str, v: T, lo: T, hi: T) -> Result<(), String> {
            if v < lo || v > hi {
                return Err(format!("{name} = {v:?} is out of range ({lo:?} to {hi:?})"));
            }
            Ok(())
        }
        range("fuel", self.fuel, 1, Self::MAX_FUEL)?;
        range("memory_mb", self.memory_bytes >> 20, 1, Self::MAX_MEMORY_BYTES >> 20)?;
        range("deadline", self.deadline, Duration::from_millis(1), Self::MAX_DEADLINE)?;
        range("table_elements", self.table_elements, 1, Self::MAX_TABLE_ELEMENTS)?;
        range("max_results_bytes", self.max_results_bytes, 2, Self::MAX_RESULTS_BYTES)?;
        range("max_log_bytes", self.max_log_bytes, 0, Self::MAX_LOG_BYTES)?;
        range("max_handles", self.max_handles, 16, Self::MAX_HANDLES)?;
        range("max_children", self.max_children, 0, Self::MAX_CHILDREN)?;
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: Self::DEFAULT_FUEL,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            deadline: Self::DEFAULT_DEADLINE,
            table_elements: Self::DEFAULT_TABLE_ELEMENTS,
            max_results_bytes: Self::DEFAULT_MAX_RESULTS_BYTES,
            max_log_bytes: Self::DEFAULT_MAX_LOG_BYTES,
            max_handles: Self::DEFAULT_MAX_HANDLES,
            max_children: Self::DEFAULT_MAX_CHILDREN,
        }
    }
}

/// The `[limits]` table of a plugin manifest. Every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Fuel of a run.
    pub fuel: Option<u64>,
    /// Linear memory, in MiB.
    pub memory_mb: Option<u64>,
    /// Wall-clock time of a run ("90s").
    #[serde(default, with = "humantime_serde_opt")]
    pub deadline: Option<Duration>,
    /// Table elements.
    pub table_elements: Option<u64>,
    /// Bytes of results.
    pub max_results_bytes: Option<usize>,
    /// Bytes of logs kept.
    pub max_log_bytes: Option<usize>,
    /// Handles held at once.
    pub max_handles: Option<usize>,
    /// Tasks a run may queue.
    pub max_children: Option<usize>,
}

/// A duration written as text ("90s", "5m", "30days").
pub(crate) fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    crate::text::parse_duration(&s).map_err(serde::de::Error::custom)
}

/// An optional duration written as text ("90s", "5m").
pub(crate) fn duration_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    humantime_serde_opt::deserialize(d)
}

mod humantime_serde_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| crate::text::parse_duration(&s).map_err(serde::de::Error::custom)).transpose()
    }
}

/// Enforces memory and table limits, and remembers a refused growth so a trap that follows
/// can be reported as `memory-limit` rather than a bare trap.
#[derive(Debug)]
pub struct GuestLimiter {
    memory_bytes: u64,
    table_elements: u64,
    used_memory: u64,
    pub(crate) memory_refused: bool,
    pub(crate) table_refused: bool,
}

impl GuestLimiter {
    /// A limiter for a run with these limits.
    pub fn new(limits: &Limits) -> Self {
        GuestLimiter {
            memory_bytes: limits.memory_bytes,
            table_elements: limits.table_elements,
            used_memory: 0,
            memory_refused: false,
            table_refused: false,
        }
    }
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        // Summed over all memories of the component: several small memories must not add up
        // to more than one large one may have.
        let grow = desired.saturating_sub(current) as u64;
        if self.used_memory.saturating_add(grow) > self.memory_bytes {
            self.memory_refused = true;
            return Ok(false);
        }
        self.used_memory += grow;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired as u64 > self.table_elements {
            self.table_refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        1_000
    }
    fn tables(&self) -> usize {
        1_000
    }
    fn memories(&self) -> usize {
        100
    }
}
