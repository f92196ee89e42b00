//! Workflows: tasks a run queues (its children, and joins after them), and what a join reads of
//! the tasks it runs after.

use crate::bindings::taskhost::plugin::host;
use crate::bindings::taskhost::plugin::types::{Due, NewTask};
use crate::{Error, Result, Value};

/// Queue a task for `handler` with `data`, this task's child, written only if this run ends well
/// (returns ok or snoozes), so a retried run never queues it twice; its number among this run's.
pub fn enqueue(handler: &str, data: &Value) -> Result<u32> {
    Enqueue::new(handler, data).send()
}

/// A task to queue with more than its handler and data:
/// `Enqueue::new("resize", &json!({"id": 7})).queue("images").delay(Duration::from_secs(60)).send()?`.
#[derive(Debug, Clone)]
pub struct Enqueue(NewTask, Vec<u32>, bool);

impl Enqueue {
    pub fn new(handler: &str, data: &Value) -> Self {
        Enqueue(
            NewTask {
                handler: handler.into(),
                data: data.to_string(),
                queue: None,
                priority: None,
                due: None,
                unique_key: None,
                max_attempts: None,
            },
            Vec::new(),
            false,
        )
    }
    /// In `queue` instead of `default`.
    pub fn queue(mut self, queue: &str) -> Self {
        self.0.queue = Some(queue.into());
        self
    }
    /// Lower runs first (default 0).
    pub fn priority(mut self, priority: i32) -> Self {
        self.0.priority = Some(priority);
        self
    }
    /// Due this long after this run ends (at most a year).
    pub fn delay(mut self, after: std::time::Duration) -> Self {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        self.0.due = Some(Due::AfterMs(ms));
        self
    }
    /// Due at this time, in milliseconds since 1970 (UTC).
    pub fn at_ms(mut self, ms: i64) -> Self {
        self.0.due = Some(Due::AtMs(ms));
        self
    }
    /// Not queued while an unfinished task holds `key`.
    pub fn unique_key(mut self, key: &str) -> Self {
        self.0.unique_key = Some(key.into());
        self
    }
    /// Runs it may have, the first included (default 5).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.0.max_attempts = Some(n);
        self
    }
    /// Waiting until each of these tasks has succeeded: numbers [`Enqueue::send`] returned for
    /// tasks this run queued before it. One dead or cancelled cancels it (`dependency-failed`)
    /// unless it runs anyway ([`Enqueue::run_anyway`]). At most 10,000.
    pub fn after(mut self, tasks: &[u32]) -> Self {
        self.1.extend_from_slice(tasks);
        self
    }
    /// Run once those it runs after ended, however they ended.
    pub fn run_anyway(mut self) -> Self {
        self.2 = true;
        self
    }
    /// Queue it (see [`enqueue`]); refused, the run fails `enqueue-refused` with the host's reason.
    pub fn send(self) -> Result<u32> {
        let Enqueue(task, after, run_anyway) = self;
        let sent = match after.is_empty() && !run_anyway {
            true => host::enqueue(&task),
            false => host::enqueue_after(&task, &after, run_anyway),
        };
        sent.map_err(|e| Error::fail("enqueue-refused", e))
    }
}

/// A task this one runs after, as [`dependencies`] reads it.
#[derive(Debug, Clone)]
pub struct Dependency {
    pub id: i64,
    pub handler: String,
    /// false: it is dead or cancelled (this task runs anyway), or was queued again since.
    pub succeeded: bool,
    /// Its last run's results, parsed (`Value::Null`: none, or left out).
    pub results: Value,
    /// Its results were left out: with those before them they would pass this handler's results
    /// limit.
    pub results_left_out: bool,
}

/// The tasks this one runs after, in the order of their ids (for a run's tasks, the order it
/// queued them), each with its last run's results while they fit this handler's results limit;
/// none when it was added without `after`. Refused (the database could not be read), the run
/// fails `dependencies-unread`, which is retried.
pub fn dependencies() -> Result<Vec<Dependency>> {
    let found = host::dependencies().map_err(|e| Error::retry("dependencies-unread", e))?;
    let dependency = |d: crate::bindings::taskhost::plugin::types::Dependency| Dependency {
        id: d.task_id,
        handler: d.handler,
        succeeded: d.succeeded,
        results: d.results.and_then(|r| serde_json::from_str(&r).ok()).unwrap_or(Value::Null),
        results_left_out: d.results_left_out,
    };
    Ok(found.into_iter().map(dependency).collect())
}

/// Wait for the signal `name` sent to this task (`taskhost signal ID NAME --data JSON`, or the
/// API), for at most `timeout` (1 s to 30 days) from the wait's start: its data, parsed, once it
/// was sent; `None` once the wait timed out. Not yet sent, it returns an `Err` that ends this run
/// waiting (return it with `?`): the task runs again when the signal is sent, or at the timeout,
/// and this call then answers. A run waiting again keeps the first wait's timeout; a wait counts
/// as a snooze. Refused (a bad name or timeout), the run fails `invalid-signal-wait`; the
/// database unread, `signal-unread`, which is retried.
pub fn await_signal(name: &str, timeout: std::time::Duration) -> Result<Option<Value>> {
    use crate::bindings::taskhost::plugin::types::Signal;
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let refused = |e: String| match e.contains("could not be looked up") {
        true => Error::retry("signal-unread", e),
        false => Error::fail("invalid-signal-wait", e),
    };
    match host::await_signal(name, ms).map_err(refused)? {
        Signal::Delivered(data) => Ok(Some(serde_json::from_str(&data).unwrap_or(Value::Null))),
        Signal::TimedOut => Ok(None),
        Signal::NotYet => {
            let mut waiting = Error::retry("awaiting-signal", format!("waiting for the signal {name:?}"));
            waiting.waiting = true;
            Err(waiting)
        }
    }
}
