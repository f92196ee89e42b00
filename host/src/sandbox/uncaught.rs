//! An uncaught exception, in any language, ends a run the same way: code `uncaught-exception`,
//! retried (as Oban and Sidekiq retry a raised error: most are a dependency's hiccup, and
//! `max_attempts` bounds the rest; a handler that knows its input is bad returns its own
//! non-retryable error instead). The message starts with the exception's type and text, then
//! its traceback, without the language runtime's own lines.
//!
//! - Python (componentize-py) prints the traceback to stderr, then its runtime panics (a trap):
//!   the host reads the last traceback from the run's stderr.
//! - Rust panics print `thread '…' panicked at FILE:LINE:COL:` and the message, then trap.
//! - JavaScript (componentize-js) loses a thrown `Error`'s text when it traps, so the handler's
//!   `handle` catches it and returns `{code: "uncaught-exception", message: `${e}\n${e.stack}`}`
//!   (as `taskhost new js` writes it); the host applies the same rule to that code.

/// Whether a run ending with an uncaught exception is retried.
pub const RETRYABLE: bool = true;

const PY_START: &str = "Traceback (most recent call last):";

/// The report of the exception a run's last stderr lines hold, if they hold one.
pub fn report<'a>(stderr: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let lines: Vec<&str> = stderr.into_iter().collect();
    python(&lines).or_else(|| rust(&lines))
}

/// `ValueError: bad` then the traceback, from the last `Traceback (most recent call last):`.
fn python(lines: &[&str]) -> Option<String> {
    let start = lines.iter().rposition(|l| *l == PY_START)?;
    // The runtime's panic that follows (`thread '<unnamed>' (1) panicked at runtime/src/…`).
    let block: Vec<&str> = lines[start..].iter().copied().take_while(|l| !is_panic_start(l)).collect();
    let end = block.iter().rposition(|l| !l.trim().is_empty())?;
    let (exception, trace) = (block[end], &block[..end]);
    if exception.starts_with(' ') || exception == PY_START {
        return None;
    }
    Some(format!("{exception}\n{}", trace.join("\n")))
}

/// `panic: MESSAGE` then where, from the last `thread '…' panicked at FILE:LINE:COL:`.
fn rust(lines: &[&str]) -> Option<String> {
    let start = lines.iter().rposition(|l| is_panic_start(l))?;
    let at = lines[start].split(" panicked at ").nth(1)?.trim_end_matches(':');
    let message: Vec<&str> = lines[start + 1..]
        .iter()
        .copied()
        .take_while(|l| !l.starts_with("note: run with `RUST_BACKTRACE=1`") && !l.is_empty())
        .collect();
    Some(format!("panic: {}\n  at {at}", message.join("\n")))
}

fn is_panic_start(line: &str) -> bool {
    line.starts_with("thread '") && line.contains(" panicked at ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_traceback_leads_with_the_exception_without_the_runtime_panic() {
        let stderr = [
            "something printed before",
            "Traceback (most recent call last):",
            "  File \"/0/app.py\", line 29, in handle",
            "    raise ValueError(\"bad\")",
            "ValueError: bad",
            "",
            "thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:",
            "Python function threw an unexpected exception",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        ];
        let r = report(stderr).unwrap_or_default();
        assert_eq!(
            r,
            "ValueError: bad\nTraceback (most recent call last):\n  File \"/0/app.py\", line 29, in handle\n    raise ValueError(\"bad\")"
        );
    }

    #[test]
    fn a_rust_panic_leads_with_its_message_and_says_where() {
        let stderr = [
            "thread '<unnamed>' panicked at src/lib.rs:12:9:",
            "index out of bounds: the len is 3 but the index is 7",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        ];
        let r = report(stderr).unwrap_or_default();
        assert_eq!(r, "panic: index out of bounds: the len is 3 but the index is 7\n  at src/lib.rs:12:9");
    }

    #[test]
    fn other_output_is_no_exception() {
        assert_eq!(report(["just a line", "another"]), None);
        assert_eq!(report([PY_START]), None);
    }
}
