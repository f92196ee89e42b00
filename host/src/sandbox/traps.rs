//! How a run failed: traps, limits and handler errors turned into stable error codes.

use std::time::Duration;

use wasmtime::Trap;

use super::bindings::HandlerError;
use super::host::HostState;
use super::limits::Limits;
use super::GuestOutcome;

/// A failed run: the error code and message stored on the run, and whether a retry may help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

/// Error codes the host itself produces (handlers choose their own).
pub mod codes {
    pub const FUEL_EXHAUSTED: &str = "fuel-exhausted";
    pub const DEADLINE: &str = "deadline";
    pub const MEMORY_LIMIT: &str = "memory-limit";
    pub const TABLE_LIMIT: &str = "table-limit";
    pub const STACK_OVERFLOW: &str = "stack-overflow";
    pub const TRAP: &str = "trap";
    pub const OUTPUT_TOO_LARGE: &str = "output-too-large";
    pub const INVALID_RESULTS: &str = "invalid-results";
    pub const HANDLER_NOT_FOUND: &str = "handler-not-found";
    pub const HANDLER_BROKEN: &str = "handler-broken";
    pub const DENIED: &str = "denied";
}

impl Failure {
    fn new(code: &str, message: impl Into<String>, retryable: bool) -> Self {
        Failure { code: code.to_string(), message: message.into(), retryable }
    }

    pub fn handler(e: HandlerError) -> Self {
        Failure { code: e.code, message: e.message, retryable: e.retryable }
    }

    pub fn deadline(limit: Duration, in_host_call: bool) -> Self {
        let where_ = if in_host_call { " (stuck in a host call)" } else { "" };
        Failure::new(
            codes::DEADLINE,
            format!("the run passed its wall-clock deadline of {}{where_}", humantime::format_duration(limit)),
            true,
        )
    }

    /// A grant could not be set up (e.g. a granted directory vanished).
    pub fn denied(message: String) -> Self {
        Failure::new(codes::DENIED, message, true)
    }

    pub fn handler_not_found(name: &str) -> Self {
        Failure::new(
            codes::HANDLER_NOT_FOUND,
            format!("handler not found: no usable plugin named {name:?} is loaded"),
            false,
        )
    }

    pub fn handler_broken(name: &str, reason: &str) -> Self {
        Failure::new(codes::HANDLER_BROKEN, format!("handler {name:?} cannot be used: {reason}"), false)
    }
}

/// Turn the error of an instantiation or a call into a [`Failure`].
pub(crate) fn classify(err: &wasmtime::Error, state: &HostState, limits: &Limits) -> Failure {
    let trap = err.downcast_ref::<Trap>().copied();
    match trap {
        Some(Trap::OutOfFuel) => {
            Failure::new(codes::FUEL_EXHAUSTED, format!("the run used all of its fuel ({} units)", limits.fuel), true)
        }
        Some(Trap::Interrupt) => Failure::deadline(limits.deadline, false),
        Some(Trap::StackOverflow) => Failure::new(codes::STACK_OVERFLOW, "the guest overflowed its stack", true),
        // A refused memory.grow usually ends in an allocator abort (unreachable).
        _ if state.limiter.memory_refused => Failure::new(
            codes::MEMORY_LIMIT,
            format!("the guest tried to grow its memory past the limit of {} MiB", limits.memory_bytes >> 20),
            true,
        ),
        _ if state.limiter.table_refused => Failure::new(
            codes::TABLE_LIMIT,
            format!("the guest tried to grow a table past {} elements", limits.table_elements),
            true,
        ),
        Some(t) => Failure::new(codes::TRAP, format!("the guest trapped: {t}"), true),
        None => Failure::new(codes::TRAP, format!("the run failed: {err:#}"), true),
    }
}

/// Validate the final results a handler returned.
pub(crate) fn check_results(results: Option<String>, limits: &Limits) -> GuestOutcome {
    let Some(json) = results else {
        return GuestOutcome::Success(None);
    };
    if json.len() > limits.max_results_bytes {
        return GuestOutcome::Failed(Failure::new(
            codes::OUTPUT_TOO_LARGE,
            format!("results are {} bytes, over the limit of {} bytes", json.len(), limits.max_results_bytes),
            false,
        ));
    }
    match serde_json::from_str::<serde::de::IgnoredAny>(&json) {
        Ok(_) => GuestOutcome::Success(Some(json)),
        Err(e) => GuestOutcome::Failed(Failure::new(
            codes::INVALID_RESULTS,
            format!("results are not valid JSON: {e}"),
            false,
        )),
    }
}
