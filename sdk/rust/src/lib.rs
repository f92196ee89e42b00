//! taskhost's Rust SDK: a task handler as a plain function.
//!
//! ```ignore
//! use taskhost::{http, json, progress, Task, Value};
//!
//! fn handle(task: Task) -> taskhost::Result<Value> {
//!     let url = task.data["url"].as_str().ok_or_else(|| taskhost::Error::fail("invalid-input", "no url"))?;
//!     let response = http::post(url).json(&task.data["payload"]).send()?.error_for_status()?;
//!     progress(100);
//!     Ok(json!({ "status": response.status }))
//! }
//!
//! taskhost::handler!(handle);
//! ```
//!
//! - [`Task`]: the id, run id, attempt (1 for the first run), handler, who queued it, and its data
//!   parsed (`data`) and as text (`raw`).
//! - Return any JSON value (the run's results; `Value::Null` for none), or an [`Error`]:
//!   [`Error::fail`] ends the run for good, [`Error::retry`] retries the task (up to its
//!   max_attempts). A panic ends the run as `uncaught-exception` (retried), its message and place.
//! - [`Error::snooze`]: not now; the task is due again after that long, this run `snoozed` (not a
//!   failure, no attempt used). [`http::Response::snooze_if_busy`] does it for a 429 or 503 answer.
//! - [`progress`], [`partial`], [`log`]; what the handler prints lands in the run's logs too.
//! - [`enqueue`]: queue a task, this one's child, written only if this run ends well (ok or a
//!   snooze): `taskhost::enqueue("send-mail", &json!({"to": to}))?`, or [`Enqueue`] for its queue,
//!   delay, unique key and attempts, and [`Enqueue::after`] to run after tasks this run queued
//!   before it (a join). The join reads them, with their results, by [`dependencies`].
//! - [`await_signal`]: wait for a signal sent to the task (`taskhost signal ID NAME --data JSON`),
//!   such as a person's approval: `let Some(approval) = await_signal("approved", day)? else {...}`
//!   (`None`: the wait timed out). Not sent yet, its `Err` ends this run waiting: return it with
//!   `?`, and the task runs again when the signal comes.
//! - [`http`]: requests over wasi:http, sent where the operator's grant for this handler allows.

pub mod http;
mod workflow;

pub use workflow::{await_signal, dependencies, enqueue, Dependency, Enqueue};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "task-handler",
        pub_export_macro: true,
        export_macro_name: "__export",
    });
}

use bindings::taskhost::plugin::host;
use bindings::taskhost::plugin::types::LogLevel;
pub use serde_json::{json, Value};

/// The task a run is for.
#[derive(Debug, Clone)]
pub struct Task {
    pub id: i64,
    pub run_id: i64,
    /// 1 for the first run, 2 for the first retry, ...
    pub attempt: u32,
    pub handler: String,
    pub queued_by: Option<String>,
    /// The task's data, parsed.
    pub data: Value,
    /// The task's data as it was queued.
    pub raw: String,
}

/// A failure the handler knows about: a short machine-readable `code`, a `message`, and whether
/// retrying can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    /// Set by [`Error::snooze`]: not a failure, the task is due again after this long.
    pub snooze: Option<std::time::Duration>,
    /// Set by [`await_signal`] for a signal not yet sent: not a failure, the run ends waiting.
    pub waiting: bool,
}

impl Error {
    /// The run fails for good: retrying cannot help (bad input, a missing record).
    pub fn fail(code: impl Into<String>, message: impl Into<String>) -> Self {
        Error { code: code.into(), message: message.into(), retryable: false, snooze: None, waiting: false }
    }

    /// The run fails and the task is tried again later (a dependency's hiccup).
    pub fn retry(code: impl Into<String>, message: impl Into<String>) -> Self {
        Error { code: code.into(), message: message.into(), retryable: true, snooze: None, waiting: false }
    }

    /// Not now: the task is due again after `after` (at most 30 days), and this run ends
    /// `snoozed`, neither a success nor a failure (no attempt used). Return it as an error:
    /// `return Err(Error::snooze(Duration::from_secs(60)))`.
    pub fn snooze(after: std::time::Duration) -> Self {
        Error {
            code: "snoozed".into(),
            message: format!("snoozed for {after:?}"),
            retryable: true,
            snooze: Some(after),
            waiting: false,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// A handler's result.
pub type Result<T = Value> = std::result::Result<T, Error>;

/// Report progress, 0 to 100 percent.
pub fn progress(percent: u8) {
    host::set_progress(percent.min(100));
}

/// Store partial results on the run, replacing earlier ones; refused past the results limit.
pub fn partial(results: &Value) -> Result<()> {
    host::set_results(&results.to_string()).map_err(|e| Error::fail("partial-results-refused", e))
}

/// Log lines, stored with the run (past the handler's log limit they are dropped).
pub mod log {
    use super::{host, LogLevel};

    pub fn debug(message: &str) {
        host::log(LogLevel::Debug, message);
    }
    pub fn info(message: &str) {
        host::log(LogLevel::Info, message);
    }
    pub fn warning(message: &str) {
        host::log(LogLevel::Warn, message);
    }
    pub fn error(message: &str) {
        host::log(LogLevel::Error, message);
    }
}

/// Make `f` the component's `handle` export: `taskhost::handler!(handle);`.
#[macro_export]
macro_rules! handler {
    ($f:path) => {
        struct __TaskhostHandler;
        impl $crate::bindings::Guest for __TaskhostHandler {
            fn handle(
                task: $crate::bindings::Task,
            ) -> ::std::result::Result<::std::option::Option<String>, $crate::bindings::HandlerError> {
                $crate::__run(task, $f)
            }
        }
        $crate::bindings::__export!(__TaskhostHandler with_types_in $crate::bindings);
    };
}

#[doc(hidden)]
pub fn __run(
    task: bindings::Task,
    f: fn(Task) -> Result<Value>,
) -> std::result::Result<Option<String>, bindings::HandlerError> {
    let data = serde_json::from_str(&task.data).unwrap_or(Value::Null);
    let task = Task {
        id: task.task_id,
        run_id: task.run_id,
        attempt: task.attempt,
        handler: task.handler,
        queued_by: task.queued_by,
        data,
        raw: task.data,
    };
    match f(task) {
        Ok(Value::Null) => Ok(None),
        Ok(results) => Ok(Some(results.to_string())),
        // The host holds the wait `await_signal` began: the run ends waiting.
        Err(Error { waiting: true, .. }) => Ok(None),
        Err(Error { snooze: Some(after), .. }) => {
            let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
            match host::snooze(ms) {
                Ok(()) => Ok(None),
                Err(e) => Err(bindings::HandlerError { code: "invalid-snooze".into(), message: e, retryable: false }),
            }
        }
        Err(e) => Err(bindings::HandlerError { code: e.code, message: e.message, retryable: e.retryable }),
    }
}
