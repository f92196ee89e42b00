//! How a run failed: traps, limits and handler errors turned into stable error codes.

use wasmtime::component::ResourceTableError;
use wasmtime::Trap;

use super::bindings::HandlerError;
use super::host::HostState;
use super::limits::Limits;
use super::GuestOutcome;
use crate::text;

pub use crate::model::failure::{codes, ErrorSource, Failure, FailureKind};

/// wasmtime's error when a guest hands the host more bytes in one call than the store's
/// hostcall fuel allows; its type is private, so it is recognised by its text.
const TRANSFER_REFUSED: &str = "fuel allocated for hostcalls has been exhausted";

impl Failure {
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
    use std::time::Duration;

    use super::*;
    use crate::model::RunStatus;

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
