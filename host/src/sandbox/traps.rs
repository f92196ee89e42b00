//! How a run failed: traps, limits and handler errors turned into stable error codes.

use std::time::Duration;

use wasmtime::component::ResourceTableError;
use wasmtime::Trap;

use super::bindings::HandlerError;
use super::host::HostState;
use super::limits::Limits;
use super::GuestOutcome;
use crate::model::RunStatus;
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
    pub code: String,
    pub message: String,
    pub retryable: bool,
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
    pub const fn status(self) -> RunStatus {
        match self {
            FailureKind::Error => RunStatus::Error,
            FailureKind::Timeout => RunStatus::Timeout,
        }
    }
}

/// Error codes the host itself produces. They are reserved: a handler returning one of them
/// has it stored as `guest-CODE` (see [`Failure::handler`]), so a code in [`HOST`] always
/// means the host ended the run.
pub mod codes {
    pub const FUEL_EXHAUSTED: &str = "fuel-exhausted";
    pub const DEADLINE: &str = "deadline";
    pub const MEMORY_LIMIT: &str = "memory-limit";
    pub const TABLE_LIMIT: &str = "table-limit";
    pub const HANDLE_LIMIT: &str = "handle-limit";
    pub const STACK_OVERFLOW: &str = "stack-overflow";
    pub const TRAP: &str = "trap";
    pub const OUTPUT_TOO_LARGE: &str = "output-too-large";
    pub const TRANSFER_TOO_LARGE: &str = "transfer-too-large";
    pub const INVALID_RESULTS: &str = "invalid-results";
    pub const HANDLER_NOT_FOUND: &str = "handler-not-found";
    pub const HANDLER_BROKEN: &str = "handler-broken";
    pub const DENIED: &str = "denied";
    /// A request went past a bound of the handler's HTTP grant (count, concurrency, body size).
    pub const HTTP_LIMIT: &str = "http-limit";
    /// A run created more sockets and name lookups than its socket grant's `max_sockets`.
    pub const SOCKET_LIMIT: &str = "socket-limit";
    pub const HOST_ERROR: &str = "host-error";
    pub const OUTCOME_REJECTED: &str = "outcome-rejected";
    pub const RUNNER_LOST: &str = "runner-lost";
    pub const RUN_TIMEOUT: &str = "run-timeout";
    /// The run could not start for want of a host resource (the sandbox's pool was full). The
    /// worker puts such a run back in the queue, uncounted; this code is stored only when it
    /// could not start for long.
    pub const HOST_BUSY: &str = "host-busy";
    /// An operator cancelled the task (the run's status is `cancelled`).
    pub const CANCELLED: &str = "cancelled";
    /// An uncaught exception, in any language (see [`super::super::uncaught`]): the host gives
    /// it to a trap it recognises, and a handler's glue may return it; not reserved.
    pub const UNCAUGHT_EXCEPTION: &str = "uncaught-exception";

    /// Every code the host writes.
    pub const HOST: [&str; 21] = [
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

/// wasmtime's error when a guest hands the host more bytes in one call than the store's
/// hostcall fuel allows; its type is private, so it is recognised by its text.
const TRANSFER_REFUSED: &str = "fuel allocated for hostcalls has been exhausted";

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

    fn timed_out(code: &str, message: String) -> Self {
        Failure { kind: FailureKind::Timeout, ..Failure::host(code, message, true) }
    }

    /// A handler's own error: code and message bounded and storable; a host code is not taken
    /// as it is but stored as `guest-CODE`, and the message says so.
    pub fn handler(e: HandlerError) -> Self {
        // Codes are identifiers: anything but ASCII letters, digits and `._:-/` becomes `_`, so no
        // code can pass for a host code by look alone (no hidden or look-alike characters).
        let code: String =
            e.code.chars().map(|c| if c.is_ascii_alphanumeric() || "._:-/".contains(c) { c } else { '_' }).collect();
        let mut code = text::bounded(&code, codes::MAX_CODE_BYTES, "…");
        let mut message = text::printable(&e.message);
        if codes::is_host(&code) {
            message = format!("[the handler returned {code:?}, a code reserved for the host] {message}");
            code = format!("guest-{code}");
        }
        // One rule for an uncaught exception, however it is reported.
        let retryable = if code == codes::UNCAUGHT_EXCEPTION { super::uncaught::RETRYABLE } else { e.retryable };
        Failure { code, message, retryable, source: ErrorSource::Guest, kind: FailureKind::Error }.bounded()
    }

    /// The guest's uncaught exception, read from what it printed before it trapped.
    pub(crate) fn uncaught(report: String) -> Self {
        Failure {
            code: codes::UNCAUGHT_EXCEPTION.into(),
            message: text::printable(&report),
            retryable: super::uncaught::RETRYABLE,
            source: ErrorSource::Guest,
            kind: FailureKind::Error,
        }
        .bounded()
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

    pub fn deadline(limit: Duration, in_host_call: bool) -> Self {
        let where_ = if in_host_call { " (stuck in a host call)" } else { "" };
        Failure::timed_out(
            codes::DEADLINE,
            format!("the run passed its wall-clock deadline of {}{where_}", crate::text::duration(limit)),
        )
    }

    /// The run reached its task's run timeout (`timeout_on`) before its handler's deadline.
    pub fn run_timeout(limit: Duration) -> Self {
        Failure::timed_out(
            codes::RUN_TIMEOUT,
            format!("the run did not finish within its run timeout ({})", crate::text::duration(limit)),
        )
    }

    /// A grant could not be set up (e.g. a granted directory vanished).
    pub fn denied(message: String) -> Self {
        Failure::host(codes::DENIED, message, true)
    }

    /// A run that failed after the host refused one of its requests. When the handler failed of
    /// itself (its own error, or an uncaught exception: a trap), the refusal is the cause and
    /// its code the run's (retried only when the worker was busy, not for the grant); a limit
    /// the run broke after (fuel, memory, its deadline) keeps its code, the refusal told in its
    /// message.
    pub fn after_refusal(self, refusal: &super::net::Refusal) -> Self {
        if self.source == ErrorSource::Guest || self.code == codes::TRAP {
            let message = format!("{}; the handler then failed: {}: {}", refusal.message, self.code, self.message);
            Failure::host(refusal.code, message, refusal.code == codes::HOST_BUSY).bounded()
        } else {
            let message = format!("{}; before it, the host refused a request: {}", self.message, refusal.message);
            Failure { message, ..self }.bounded()
        }
    }

    pub fn handler_not_found(name: &str) -> Self {
        Failure::host(
            codes::HANDLER_NOT_FOUND,
            format!("handler not found: no usable plugin named {name:?} is loaded"),
            false,
        )
    }

    pub fn handler_broken(name: &str, reason: &str) -> Self {
        Failure::host(codes::HANDLER_BROKEN, format!("handler {name:?} cannot be used: {reason}"), false)
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

/// Turn the error of an instantiation or a call into a [`Failure`].
pub(crate) fn classify(err: &wasmtime::Error, state: &HostState, limits: &Limits) -> Failure {
    let trap = err.downcast_ref::<Trap>().copied();
    match trap {
        Some(Trap::OutOfFuel) => {
            Failure::host(codes::FUEL_EXHAUSTED, format!("the run used all of its fuel ({} units)", limits.fuel), true)
        }
        Some(Trap::Interrupt) => Failure::deadline(limits.deadline, false),
        Some(Trap::StackOverflow) => Failure::host(codes::STACK_OVERFLOW, "the guest overflowed its stack", true),
        // A refused memory.grow usually ends in an allocator abort (unreachable).
        _ if state.limiter.memory_refused => Failure::host(
            codes::MEMORY_LIMIT,
            format!("the guest tried to grow its memory past the limit of {} MiB", limits.memory_bytes >> 20),
            true,
        ),
        _ if state.limiter.table_refused => Failure::host(
            codes::TABLE_LIMIT,
            format!("the guest tried to grow a table past {} elements", limits.table_elements),
            true,
        ),
        Some(t) => Failure::host(codes::TRAP, format!("the guest trapped: {t}"), true),
        // Another run holds the pool's slots: this run never started.
        None if err.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
            Failure::host(codes::HOST_BUSY, format!("the run could not start: {err:#}"), true)
        }
        None if matches!(err.downcast_ref::<ResourceTableError>(), Some(ResourceTableError::Full)) => Failure::host(
            codes::HANDLE_LIMIT,
            format!("the guest held more than {} handles at once (files, streams, pollables)", limits.max_handles),
            true,
        ),
        None if format!("{err:#}").contains(TRANSFER_REFUSED) => Failure::host(
            codes::TRANSFER_TOO_LARGE,
            format!(
                "the guest passed the host more than {} bytes in one call (its results or error, or the \
                 arguments of a host call): refused before copying",
                limits.transfer_bytes()
            ),
            false,
        ),
        None => Failure::host(codes::TRAP, format!("the run failed: {err:#}"), true),
    }
}

/// Validate the final results a handler returned.
pub(crate) fn check_results(results: Option<String>, limits: &Limits) -> GuestOutcome {
    let Some(json) = results else {
        return GuestOutcome::Success(None);
    };
    if json.len() > limits.max_results_bytes {
        return GuestOutcome::Failed(Failure::host(
            codes::OUTPUT_TOO_LARGE,
            format!("results are {} bytes, over the limit of {} bytes", json.len(), limits.max_results_bytes),
            false,
        ));
    }
    match serde_json::from_str::<serde::de::IgnoredAny>(&json) {
        Ok(_) => GuestOutcome::Success(Some(json)),
        Err(e) => GuestOutcome::Failed(Failure::host(
            codes::INVALID_RESULTS,
            format!("results are not valid JSON: {e}"),
            false,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(code: &str, message: &str) -> Failure {
        Failure::handler(HandlerError { code: code.into(), message: message.into(), retryable: true })
    }

    #[test]
    fn a_handler_cannot_produce_a_host_code() {
        let f = guest("deadline", "fake");
        assert_eq!(f.code, "guest-deadline");
        assert_eq!(f.status(), RunStatus::Error, "a handler never produces a timeout");
        assert!(f.message.contains("reserved for the host"), "{}", f.message);
        assert_eq!(f.source, ErrorSource::Guest);
    }

    #[test]
    fn a_handlers_own_code_is_kept() {
        assert_eq!(guest("invalid-input", "m").code, "invalid-input");
    }

    #[test]
    fn long_codes_and_messages_are_cut_with_a_marker() {
        let f = guest(&"c".repeat(1000), &"m".repeat(100_000));
        assert!(f.code.len() <= codes::MAX_CODE_BYTES);
        assert!(f.message.len() <= codes::MAX_MESSAGE_BYTES);
        assert!(f.message.ends_with("[cut: 100000 bytes in all]"), "{}", &f.message[f.message.len() - 40..]);
    }

    #[test]
    fn a_host_deadline_is_a_timeout() {
        assert_eq!(Failure::deadline(Duration::from_secs(1), false).status(), RunStatus::Timeout);
    }
}
