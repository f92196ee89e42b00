//! What a caller asks to queue, with its bounds and defaults, and the operator's limits on runs
//! in flight.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Per-task retry backoff; `None` fields fall back to the worker's [`crate::retry::Backoff`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct BackoffSettings {
    /// Delay before the first retry, in milliseconds; doubles with each further failure.
    pub base_ms: Option<i64>,
    /// Upper bound of the delay, in milliseconds.
    pub max_ms: Option<i64>,
}

/// What a caller asks to queue. Build one with [`NewTask::new`] and the `with_*` methods.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// The handler (plugin name) that runs it.
    pub handler: String,
    /// The task's data, a JSON document (validated by the client before it is written).
    pub data: String,
    /// When to run it; `None` = now.
    pub scheduled_on: Option<DateTime<Utc>>,
    /// Runs it may have before it is given up on, the first included: each failed run in a row is
    /// an attempt, and the task is a dead letter once this many have failed ([`DEFAULT_MAX_ATTEMPTS`];
    /// at least 1). Celery's `max_retries=N` is `max_attempts` N + 1.
    pub max_attempts: u32,
    /// Who queued it, for people reading the queue (free text).
    pub queued_by: Option<String>,
    /// The queue it is claimed from ([`DEFAULT_QUEUE`]).
    pub queue: String,
    /// Lower runs first.
    pub priority: i32,
    /// The key whose share it is taken in (a tenant, a customer): claims interleave keys, each
    /// by its weight (see `docs/queue.md`, "Fair shares").
    pub key: Option<String>,
    /// While a task with this key is unfinished, adding another returns the existing one.
    pub unique_key: Option<String>,
    /// The key is let go this long after the task is queued, whatever its state (none: held
    /// as long as [`Self::unique_states`] says).
    pub unique_for: Option<Duration>,
    /// In which states the task keeps its key ([`super::UniqueStates::Unfinished`]: until it ends).
    pub unique_states: super::UniqueStates,
    /// `None` = the system-wide default (1 day).
    pub run_timeout: Option<Duration>,
    /// This task's retry backoff; unset parts are the worker's.
    pub backoff: BackoffSettings,
    /// Tasks it runs after: it waits until each has succeeded (at most [`MAX_AFTER`]).
    pub after: Vec<super::TaskId>,
    /// When a task it runs after ends badly (dead or cancelled), run it all the same instead of
    /// cancelling it.
    pub run_anyway: bool,
    /// The version of its handler its runs run: a deployed component's digest, or the start of
    /// one (at least [`MIN_VERSION_CHARS`] hex digits), which the client resolves to the whole
    /// digest (None: the version active when each run is claimed).
    pub version: Option<String>,
}

/// The fewest hex digits that name a version.
pub const MIN_VERSION_CHARS: usize = 8;

/// A version as a person may write it: as `show` prints it (`sha256:5e8f…`), in capitals too;
/// the digest's hex digits as stored (lower case).
pub fn version_text(asked: &str) -> String {
    let asked = asked.trim();
    asked.strip_prefix("sha256:").unwrap_or(asked).to_ascii_lowercase()
}

/// Tasks one task may run after.
pub const MAX_AFTER: usize = 10_000;

/// A task's data at most, unless the operator says otherwise (`[tasks] max_data_bytes`).
pub const DEFAULT_MAX_DATA_BYTES: usize = 1 << 20;
/// How deep tasks queued by runs may nest, unless the operator says otherwise (`[tasks] max_depth`):
/// a task this deep may queue none.
pub const DEFAULT_MAX_DEPTH: u32 = 100;
/// Runs a task may have (each failed run in a row an attempt) before it is given up on, unless
/// it says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Longest handler name, queue name, unique key and `queued_by`, in bytes, on every database.
pub const MAX_HANDLER_BYTES: usize = 128;
/// Longest queue name, in bytes.
pub const MAX_QUEUE_BYTES: usize = 128;
/// Longest unique key, in bytes.
pub const MAX_UNIQUE_KEY_BYTES: usize = 255;
/// Longest share key (`--key`), in bytes.
pub const MAX_SHARE_KEY_BYTES: usize = 128;
/// Longest `queued_by`, in bytes.
pub const MAX_QUEUED_BY_BYTES: usize = 255;
/// The queue of a task that names none.
pub const DEFAULT_QUEUE: &str = "default";
/// A worker's queue list that means every queue (and a name no task may have).
pub const EVERY_QUEUE: &str = "*";

impl NewTask {
    /// A task for `handler` with `data` (a JSON document), due now, in the default queue.
    pub fn new(handler: impl Into<String>, data: impl Into<String>) -> Self {
        NewTask {
            handler: handler.into(),
            data: data.into(),
            scheduled_on: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            queued_by: None,
            queue: DEFAULT_QUEUE.to_string(),
            priority: 0,
            key: None,
            unique_key: None,
            unique_for: None,
            unique_states: super::UniqueStates::Unfinished,
            run_timeout: None,
            backoff: BackoffSettings::default(),
            after: Vec::new(),
            run_anyway: false,
            version: None,
        }
    }
    /// Due at `at` instead of now.
    pub fn with_scheduled_on(mut self, at: DateTime<Utc>) -> Self {
        self.scheduled_on = Some(at);
        self
    }
    /// Given up on after `n` failed runs in a row (at least 1: the first run is an attempt).
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }
    /// The old name of [`NewTask::with_max_attempts`], the same number (0 is taken as 1).
    #[deprecated(note = "the same number is `with_max_attempts`")]
    pub fn with_max_retries(self, n: u32) -> Self {
        self.with_max_attempts(n.max(1))
    }
    /// Who queued it.
    pub fn with_queued_by(mut self, who: impl Into<String>) -> Self {
        self.queued_by = Some(who.into());
        self
    }
    /// In `queue` instead of the default.
    pub fn with_queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
    /// Claimed before tasks of a higher `priority` (lower runs first).
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    /// Taken in `key`'s share: claims interleave keys, each by its weight.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    /// Not added while another task holds `key` (that task is returned): an unfinished one, or
    /// one that keeps it ([`Self::with_unique_states`]).
    pub fn with_unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }
    /// Its unique key let go `period` after it is queued, whatever its state.
    pub fn with_unique_for(mut self, period: Duration) -> Self {
        self.unique_for = Some(period);
        self
    }
    /// Its unique key kept in these states (succeeded ones, or any) once it ends.
    pub fn with_unique_states(mut self, states: super::UniqueStates) -> Self {
        self.unique_states = states;
        self
    }
    /// Each run may take at most `timeout`.
    pub fn with_run_timeout(mut self, timeout: Duration) -> Self {
        self.run_timeout = Some(timeout);
        self
    }
    /// Its own retry backoff.
    pub fn with_backoff(mut self, backoff: BackoffSettings) -> Self {
        self.backoff = backoff;
        self
    }
    /// Waiting until each of `tasks` has succeeded; cancelled if one ends badly.
    pub fn with_after(mut self, tasks: impl IntoIterator<Item = super::TaskId>) -> Self {
        self.after = tasks.into_iter().collect();
        self
    }
    /// Run when the tasks it runs after have ended, even if one ended badly.
    pub fn with_run_anyway(mut self) -> Self {
        self.run_anyway = true;
        self
    }
    /// Its runs run this version of its handler (a digest, or its start), not the active one.
    pub fn with_version(mut self, digest: impl Into<String>) -> Self {
        self.version = Some(digest.into());
        self
    }
}

/// Why a task may not be queued, found by [`NewTask::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// Its data is not a JSON document (the parser's words).
    Json(String),
    /// A field is wrong: which, and why.
    Field {
        /// The field, by its name in the API and in SQL (`queue`, `unique_key`, `queued_by`, ...;
        /// `task data` for the data's size).
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Json(e) => write!(f, "task data is not valid JSON: {e}"),
            Invalid::Field { what, reason } => write!(f, "invalid {what}: {reason}"),
        }
    }
}

/// Whether a name (a queue, a key, a unique key) begins or ends with white space, as Unicode
/// names it: such names are refused everywhere, as MySQL compares names padded with spaces ("a"
/// and "a " would be one queue there, and two on the other databases).
pub fn padded(name: &str) -> bool {
    name.trim() != name
}

/// What is wrong with `name` as a queue's name; None when nothing is. The one rule wherever a
/// queue is named: a task's, a schedule's, a limit's (`queue:NAME`, `[queues.NAME]`), a pause, a
/// worker's `--queues` (where `*` alone means every queue); SQL's `taskhost_add` checks the same in
/// its migrations. 1 to [`MAX_QUEUE_BYTES`] bytes without NUL, not `*`, not [`padded`].
pub fn queue_refusal(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the queue name is empty".into());
    }
    if name == EVERY_QUEUE {
        return Some("* is not a queue's name: to workers it means every queue".into());
    }
    if padded(name) {
        return Some("the queue begins or ends with white space".into());
    }
    text_refusal(name, MAX_QUEUE_BYTES)
}

/// What is wrong with `name` as a key (a task's `--key`, a limit's `key:NAME`, `[keys.NAME]`);
/// None when nothing is: 1 to [`MAX_SHARE_KEY_BYTES`] bytes without NUL, not [`padded`].
pub fn key_refusal(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the key is empty".into());
    }
    if padded(name) {
        return Some("the key begins or ends with white space".into());
    }
    text_refusal(name, MAX_SHARE_KEY_BYTES)
}

/// What is wrong with a stored text: over `max` bytes (the same maximum on every database) or
/// holding a NUL byte (PostgreSQL refuses it); None when nothing is.
pub fn text_refusal(value: &str, max: usize) -> Option<String> {
    if value.len() > max {
        return Some(format!("{} bytes, over the maximum of {max}", value.len()));
    }
    value.contains('\0').then(|| "it contains a NUL byte".to_string())
}

/// The shortest run timeout a task may ask for.
pub const MIN_RUN_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest run timeout a task may ask for (a year).
pub const MAX_RUN_TIMEOUT: Duration = Duration::from_secs(31_557_600);

impl NewTask {
    /// What every task passes before it is written, whoever queues it (a caller, or a run's
    /// `enqueue`): data that is JSON of at most `max_data_bytes` (measured before it is parsed, so
    /// the same on every database), names and key within their lengths and without NUL, a queue
    /// that is not `*`, attempts and run timeout within their ranges. Not whether its handler
    /// exists: the client asks its catalog.
    pub fn check(&self, max_data_bytes: usize) -> Result<(), Invalid> {
        let field = |what: &'static str, reason: String| Err(Invalid::Field { what, reason });
        if self.data.len() > max_data_bytes {
            let n = self.data.len();
            return field(
                "task data",
                format!("{n} bytes, over the limit of {max_data_bytes} bytes ([tasks] max_data_bytes)"),
            );
        }
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&self.data) {
            return Err(Invalid::Json(e.to_string()));
        }
        if let Some(reason) = queue_refusal(&self.queue) {
            return field("queue", reason);
        }
        if let Some(reason) = self.key.as_deref().and_then(key_refusal) {
            return field("key", reason);
        }
        if self.unique_key.as_deref() == Some("") {
            return field("unique_key", "the unique key is empty".into());
        }
        if self.unique_key.as_deref().is_some_and(padded) {
            return field("unique_key", "the unique key begins or ends with white space".into());
        }
        if let Some(v) = &self.version {
            let hex = v.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex || v.len() < MIN_VERSION_CHARS || v.len() > 64 {
                let shown = crate::text::bounded(v, 70, "…");
                return field(
                    "version",
                    format!("{shown:?} is not a digest: {MIN_VERSION_CHARS} to 64 hex digits (a-f, 0-9)"),
                );
            }
        }
        let held = self.unique_for.is_some() || self.unique_states != super::UniqueStates::Unfinished;
        if held && self.unique_key.is_none() {
            return field("unique_key", "a unique period or states need a unique key".into());
        }
        if let Some(period) = self.unique_for.filter(|p| *p < Duration::from_secs(1) || *p > super::MAX_UNIQUE_FOR) {
            let shown = crate::text::duration;
            return field("unique_for", format!("{} is out of range (1s to 100 years)", shown(period)));
        }
        let texts = [
            ("handler name", Some(&self.handler), MAX_HANDLER_BYTES),
            ("unique_key", self.unique_key.as_ref(), MAX_UNIQUE_KEY_BYTES),
            ("queued_by", self.queued_by.as_ref(), MAX_QUEUED_BY_BYTES),
        ];
        for (what, value, max) in texts {
            if let Some(reason) = value.and_then(|v| text_refusal(v, max)) {
                return field(what, reason);
            }
        }
        if self.max_attempts == 0 {
            return field("max_attempts", "0 is under the minimum of 1 (the first run is an attempt)".into());
        }
        if i32::try_from(self.max_attempts).is_err() {
            return field("max_attempts", format!("{} is over the maximum of {}", self.max_attempts, i32::MAX));
        }
        if let Some(timeout) = self.run_timeout.filter(|t| !(MIN_RUN_TIMEOUT..=MAX_RUN_TIMEOUT).contains(t)) {
            let shown = crate::text::duration;
            let (min, max) = (shown(MIN_RUN_TIMEOUT), shown(MAX_RUN_TIMEOUT));
            return field("run_timeout", format!("{} is out of range ({min} to {max})", shown(timeout)));
        }
        if self.after.len() > MAX_AFTER {
            return field("after", format!("{} tasks, over the maximum of {MAX_AFTER}", self.after.len()));
        }
        if self.run_anyway && self.after.is_empty() {
            return field("run_anyway", "it runs after no task".into());
        }
        Ok(())
    }
}
