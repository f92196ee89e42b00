//! How a run failed, as the store keeps it: an error code and message, who produced it, and
//! whether a retry may help. The sandbox makes these from traps, limits and a handler's own
//! errors (`sandbox/traps.rs`); the worker decides on them and the store writes them.

use std::time::Duration;

use super::RunStatus;
use crate::text;

/// Who produced a run's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum ErrorSource {
    /// The host: a limit, a trap, a missing handler, the database. Its codes are [`codes::HOST`].
    Host,
    /// The handler returned an error of its own.
    Guest,
}

/// A failed run: the error code and message stored on the run, and whether a retry may help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// A stable error code: one of [`codes`] (the host's) or the handler's own.
    pub code: String,
    /// What happened, for a person.
    pub message: String,
    /// Whether another run may succeed (a non-retryable failure gives the task up at once).
    pub retryable: bool,
    /// Who produced it.
    pub source: ErrorSource,
    /// Stopped for time (status `timeout`) or failed (`error`); only the host stops a run for time.
    pub kind: FailureKind,
}

/// The two ways a run fails, each its own run status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A known failure: the handler returned an error, trapped or broke a limit.
    Error,
    /// The host stopped it for time: its deadline, its run timeout, or its runner died.
    Timeout,
}

impl FailureKind {
    /// The status a run failing this way ends with.
    pub const fn status(self) -> RunStatus {
        match self {
            FailureKind::Error => RunStatus::Error,
            FailureKind::Timeout => RunStatus::Timeout,
        }
    }
}

/// Error codes the host itself produces. They are reserved: a handler returning one of them
/// has it stored as `guest-CODE` (see `Failure::handler`, in the sandbox), so a code in
/// [`codes::HOST`] always means the host ended the run.
pub mod codes {
    /// The run used all of its fuel.
    pub const FUEL_EXHAUSTED: &str = "fuel-exhausted";
    /// The run passed its handler's wall-clock deadline.
    pub const DEADLINE: &str = "deadline";
    /// The guest tried to grow its memory past its limit.
    pub const MEMORY_LIMIT: &str = "memory-limit";
    /// The guest tried to grow a table past its limit.
    pub const TABLE_LIMIT: &str = "table-limit";
    /// The guest held more handles (files, streams, pollables) than its limit.
    pub const HANDLE_LIMIT: &str = "handle-limit";
    /// The guest overflowed its stack.
    pub const STACK_OVERFLOW: &str = "stack-overflow";
    /// The guest trapped (or the call failed otherwise).
    pub const TRAP: &str = "trap";
    /// The results were larger than their limit.
    pub const OUTPUT_TOO_LARGE: &str = "output-too-large";
    /// The guest handed the host more bytes in one call than it may.
    pub const TRANSFER_TOO_LARGE: &str = "transfer-too-large";
    /// The results were not valid JSON.
    pub const INVALID_RESULTS: &str = "invalid-results";
    /// No usable plugin of that name is loaded (or none serves it).
    pub const HANDLER_NOT_FOUND: &str = "handler-not-found";
    /// The plugin exists but cannot be used (it does not compile, or implements the wrong world).
    pub const HANDLER_BROKEN: &str = "handler-broken";
    /// The host refused a request past the handler's grants.
    pub const DENIED: &str = "denied";
    /// A request went past a bound of the handler's HTTP grant (count, concurrency, body size).
    pub const HTTP_LIMIT: &str = "http-limit";
    /// A run created more sockets and name lookups than its socket grant's `max_sockets`.
    pub const SOCKET_LIMIT: &str = "socket-limit";
    /// The host itself failed while running the task (a bug).
    pub const HOST_ERROR: &str = "host-error";
    /// The database refused the run's outcome; this failure, which says why, is written instead.
    pub const OUTCOME_REJECTED: &str = "outcome-rejected";
    /// The run's runner stopped heartbeating (or its process vanished).
    pub const RUNNER_LOST: &str = "runner-lost";
    /// The run passed its task's run timeout.
    pub const RUN_TIMEOUT: &str = "run-timeout";
    /// The run could not start for want of a host resource (the sandbox's pool was full). The
    /// worker puts such a run back in the queue, uncounted; this code is stored only when it
    /// could not start for long.
    pub const HOST_BUSY: &str = "host-busy";
    /// An operator cancelled the task (the run's status is `cancelled`).
    pub const CANCELLED: &str = "cancelled";
    /// The run snoozed its task once more than `[tasks] max_snoozes` allows; not retried.
    pub const TOO_MANY_SNOOZES: &str = "too-many-snoozes";
    /// A task it ran after is dead or was cancelled, so the waiting task was cancelled (the
    /// run's status is `cancelled`).
    pub const DEPENDENCY_FAILED: &str = "dependency-failed";
    /// Its task's row held a value the host cannot read (written past `taskhost_add`: a column of
    /// the wrong type, a time out of range); the task is given up, where it would stop every
    /// claim of its queue. Not retried.
    pub const UNREADABLE_TASK: &str = "unreadable-task";
    /// An uncaught exception, in any language (see `crate::sandbox::uncaught`): the host gives
    /// it to a trap it recognises, and a handler's glue may return it; not reserved.
    pub const UNCAUGHT_EXCEPTION: &str = "uncaught-exception";

    /// Every code the host writes.
    pub const HOST: [&str; 24] = [
        FUEL_EXHAUSTED,
        DEADLINE,
        MEMORY_LIMIT,
        TABLE_LIMIT,
        HANDLE_LIMIT,
        STACK_OVERFLOW,
        TRAP,
        OUTPUT_TOO_LARGE,
        TRANSFER_TOO_LARGE,
        INVALID_RESULTS,
        HANDLER_NOT_FOUND,
        HANDLER_BROKEN,
        DENIED,
        HTTP_LIMIT,
        SOCKET_LIMIT,
        HOST_ERROR,
        OUTCOME_REJECTED,
        RUNNER_LOST,
        RUN_TIMEOUT,
        HOST_BUSY,
        CANCELLED,
        TOO_MANY_SNOOZES,
        DEPENDENCY_FAILED,
        UNREADABLE_TASK,
    ];

    /// Whether `code` is one of the host's.
    pub fn is_host(code: &str) -> bool {
        HOST.contains(&code)
    }

    /// Most bytes of an error code kept; longer codes are cut.
    pub const MAX_CODE_BYTES: usize = 128;
    /// Most bytes of an error message kept; longer messages are cut, with a marker.
    pub const MAX_MESSAGE_BYTES: usize = 8 << 10;
}

impl Failure {
    pub(crate) fn host(code: &str, message: impl Into<String>, retryable: bool) -> Self {
        Failure {
            code: code.to_string(),
            message: message.into(),
            retryable,
            source: ErrorSource::Host,
            kind: FailureKind::Error,
        }
    }

    pub(crate) fn timed_out(code: &str, message: String) -> Self {
        Failure { kind: FailureKind::Timeout, ..Failure::host(code, message, true) }
    }

    /// The same failure with its code and message cut to their maxima and free of NUL bytes.
    pub fn bounded(mut self) -> Self {
        if self.code.len() > codes::MAX_CODE_BYTES || self.code.contains('\0') {
            self.code = text::bounded(&self.code, codes::MAX_CODE_BYTES, "…");
        }
        if self.message.len() > codes::MAX_MESSAGE_BYTES || self.message.contains('\0') {
            let total = self.message.len();
            let marker = format!("… [cut: {total} bytes in all]");
            self.message = text::bounded(&self.message, codes::MAX_MESSAGE_BYTES, &marker);
        }
        self
    }

    /// The status a run ending this way gets: `timeout` when the host stopped it for time,
    /// `error` otherwise (a handler can never produce `timeout`).
    pub fn status(&self) -> RunStatus {
        self.kind.status()
    }

    /// The run passed its handler's deadline `limit` (stuck in a host call, or not).
    pub fn deadline(limit: Duration, in_host_call: bool) -> Self {
        let where_ = if in_host_call { " (stuck in a host call)" } else { "" };
        Failure::timed_out(
            codes::DEADLINE,
            format!("the run passed its wall-clock deadline of {}{where_}", text::duration(limit)),
        )
    }

    /// The run reached its task's run timeout (`timeout_on`) before its handler's deadline.
    pub fn run_timeout(limit: Duration) -> Self {
        Failure::timed_out(
            codes::RUN_TIMEOUT,
            format!("the run did not finish within its run timeout ({})", text::duration(limit)),
        )
    }

    /// A grant could not be set up (e.g. a granted directory vanished).
    pub fn denied(message: String) -> Self {
        Failure::host(codes::DENIED, message, true)
    }

    /// No usable plugin named `name` is loaded.
    pub fn handler_not_found(name: &str) -> Self {
        Failure::host(
            codes::HANDLER_NOT_FOUND,
            format!("handler not found: no usable plugin named {name:?} is loaded"),
            false,
        )
    }

    /// The plugin `name` cannot be used, for `reason`.
    pub fn handler_broken(name: &str, reason: &str) -> Self {
        Failure::host(codes::HANDLER_BROKEN, format!("handler {name:?} cannot be used: {reason}"), false)
    }

    /// The run snoozed its task once more than the operator allows: not retried.
    pub fn too_many_snoozes(message: String) -> Self {
        Failure::host(codes::TOO_MANY_SNOOZES, message, false)
    }

    /// Its task's row could not be read, for `reason`: not retried (a run would read it alike).
    pub fn unreadable_task(reason: &str) -> Self {
        Failure::host(codes::UNREADABLE_TASK, format!("its task's row cannot be read: {reason}"), false)
    }

    /// The database refused a run's outcome; this one, which says why, is written instead.
    pub fn outcome_rejected(message: String) -> Self {
        Failure::host(codes::OUTCOME_REJECTED, message, false)
    }

    /// The host itself failed while running the task (a bug): retried like a trap.
    pub fn host_error(what: &str) -> Self {
        Failure::host(codes::HOST_ERROR, format!("the host failed while running this task: {what}"), true)
    }
}
