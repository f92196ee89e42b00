//! Counts the words, lines and characters of `{"text": "..."}`, reporting progress as it goes.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

use taskhost::plugin::host::{log, set_progress, set_results};
use taskhost::plugin::types::LogLevel;

struct WordCount;

fn invalid(message: &str) -> HandlerError {
    HandlerError { code: "invalid-input".into(), message: message.into(), retryable: false }
}

impl Guest for WordCount {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value =
            serde_json::from_str(&task.data).map_err(|e| invalid(&format!("data is not JSON: {e}")))?;
        let text = data.get("text").and_then(|t| t.as_str()).ok_or_else(|| invalid("expected {\"text\": \"...\"}"))?;
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len().max(1);
        let (mut words, mut chars) = (0usize, 0usize);
        let mut last_percent = 0;
        for (i, line) in lines.iter().enumerate() {
            words += line.split_whitespace().count();
            chars += line.chars().count();
            let percent = ((i + 1) * 100 / total) as u8;
            // Report every 10%, and partial counts once half way.
            if percent / 10 > last_percent / 10 {
                set_progress(percent);
                if last_percent < 50 && percent >= 50 {
                    let _ = set_results(&format!(r#"{{"words_so_far":{words},"lines_so_far":{}}}"#, i + 1));
                }
                last_percent = percent;
            }
        }
        set_progress(100);
        log(LogLevel::Info, &format!("counted {words} words in {} lines", lines.len()));
        Ok(Some(format!(r#"{{"words":{words},"lines":{},"chars":{chars}}}"#, lines.len())))
    }
}

export!(WordCount);
