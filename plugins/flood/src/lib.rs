//! Hostile: hands the host strings it should not have to keep, or words that are the host's.
//! The task data picks what it sends (sizes in bytes):
//! `{"log_bytes": N}` one log line of N bytes, `{"results_bytes": N}` partial results of N bytes,
//! `{"return_bytes": N}` final results of N bytes, `{"code_bytes": N, "message_bytes": M}` an
//! error with a code and a message of those sizes, `{"code": C, "message": M}` an error with
//! that code and message, `{"log": TEXT}` a log line of that text, `{"nul": true}` NUL bytes
//! in a log line, the error code and the error message.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

use taskhost::plugin::host::{log, set_results};
use taskhost::plugin::types::LogLevel;

struct Flood;

/// A JSON string document of exactly `n` bytes (n ≥ 2).
fn json_of(n: usize) -> String {
    format!("\"{}\"", "x".repeat(n.saturating_sub(2)))
}

impl Guest for Flood {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data).unwrap_or_default();
        let n = |k: &str| data.get(k).and_then(|v| v.as_u64()).map(|v| v as usize);
        let s = |k: &str| data.get(k).and_then(|v| v.as_str()).map(str::to_string);
        if let Some(text) = s("log") {
            log(LogLevel::Info, &text);
        }
        if let Some(len) = n("log_bytes") {
            log(LogLevel::Info, &"y".repeat(len));
        }
        if let Some(len) = n("results_bytes") {
            if let Err(e) = set_results(&json_of(len)) {
                log(LogLevel::Warn, &format!("set-results refused: {e}"));
            }
        }
        if data.get("nul").and_then(|v| v.as_bool()) == Some(true) {
            log(LogLevel::Info, "a\0line");
            return Err(HandlerError { code: "nul\0code".into(), message: "nul\0message".into(), retryable: false });
        }
        if n("code_bytes").is_some() || n("message_bytes").is_some() {
            return Err(HandlerError {
                code: "c".repeat(n("code_bytes").unwrap_or(4)),
                message: "m".repeat(n("message_bytes").unwrap_or(4)),
                retryable: false,
            });
        }
        if let Some(code) = s("code") {
            let message = s("message").unwrap_or_default();
            return Err(HandlerError { code, message, retryable: false });
        }
        if let Some(len) = n("return_bytes") {
            return Ok(Some(json_of(len)));
        }
        Ok(None)
    }
}

export!(Flood);
