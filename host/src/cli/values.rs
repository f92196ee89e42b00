//! How the command line reads its values: each parser gives one clear line for a bad value.

use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use taskhost::model::{RunStatus, TaskState};

/// A collector's base URL, over plain HTTP: TLS is not built in (a collector or agent on this
/// machine, or a sidecar, forwards further).
#[cfg(feature = "otlp")]
pub(super) fn otlp_url(s: &str) -> Result<String, String> {
    match s.strip_prefix("http://") {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(s.trim_end_matches('/').to_string()),
        _ if s.starts_with("https://") => {
            Err("https is not built in: point it at a collector or agent on this machine (http://…)".into())
        }
        _ => Err("an http:// URL of an OTLP collector, e.g. http://127.0.0.1:4318".into()),
    }
}

/// A log filter tracing can read.
pub(super) fn log_filter(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s).map_err(|e| format!("not a log filter: {e}"))?;
    Ok(s.to_string())
}

/// A count of at least 1.
pub(super) fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A duration longer than zero.
pub(super) fn positive_duration(s: &str) -> Result<Duration, String> {
    match taskhost::text::parse_duration(s)? {
        d if d.is_zero() => Err("must be longer than zero".into()),
        d => Ok(d),
    }
}

/// A timeout of `serve`'s: at least [`taskhost::api::ServerLimits::MIN_TIMEOUT`].
pub(super) fn server_timeout(s: &str) -> Result<Duration, String> {
    let (min, max) = (taskhost::api::ServerLimits::MIN_TIMEOUT, taskhost::api::ServerLimits::MAX_TIMEOUT);
    match taskhost::text::parse_duration(s)? {
        d if d < min => Err(format!("must be at least {}", taskhost::text::duration(min))),
        d if d > max => Err(format!("must be at most {}", taskhost::text::duration(max))),
        d => Ok(d),
    }
}

/// A name that is not empty or blank.
pub(super) fn non_empty(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("must not be empty".into());
    }
    Ok(s.to_string())
}

/// A queue's name (a queue to pause: `taskhost::model::queue_refusal`).
pub(super) fn queue_name(s: &str) -> Result<String, String> {
    taskhost::model::queue_refusal(s).map_or_else(|| Ok(s.to_string()), Err)
}

/// A worker's queue: a queue's name, or `*` (every queue).
pub(super) fn worker_queue(s: &str) -> Result<String, String> {
    match s == taskhost::model::EVERY_QUEUE {
        true => Ok(s.to_string()),
        false => queue_name(s),
    }
}

/// A run status, its possible values listed in the help.
pub(super) fn status() -> impl TypedValueParser<Value = RunStatus> {
    PossibleValuesParser::new(RunStatus::ALL.into_iter().filter(|s| s.is_of_tasks()).map(RunStatus::as_str))
        .try_map(|s| s.parse::<RunStatus>())
}

/// A task's state, its possible values listed in the help.
pub(super) fn state() -> impl TypedValueParser<Value = TaskState> {
    PossibleValuesParser::new(TaskState::ALL.map(TaskState::as_str)).try_map(|s| s.parse::<TaskState>())
}
