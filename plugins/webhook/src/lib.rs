//! Calls a webhook: POSTs the task's `payload` as JSON to its `url` and returns the status and
//! the start of the response. A 5xx answer is a retryable failure, a 4xx one is not. The URL must
//! be granted to this handler in the operator's configuration (`[handlers.webhook.grants.http]`).
//!
//! Task data: `{"url": "https://hooks.example.com/x", "payload": {...}}`.
wit_bindgen::generate!({ path: "../../wit", world: "task-handler" });

use wstd::http::{Client, Request};

struct Webhook;

fn error(code: &str, message: String, retryable: bool) -> HandlerError {
    HandlerError { code: code.into(), message, retryable }
}

impl Guest for Webhook {
    fn handle(task: Task) -> Result<Option<String>, HandlerError> {
        let data: serde_json::Value = serde_json::from_str(&task.data)
            .map_err(|e| error("invalid-input", format!("data is not JSON: {e}"), false))?;
        let url = data["url"].as_str().ok_or_else(|| error("invalid-input", "data has no \"url\"".into(), false))?;
        let payload = data.get("payload").cloned().unwrap_or(serde_json::Value::Null).to_string();
        // wstd runs the request's futures on its own small executor, inside this sync export.
        let (status, text) = wstd::runtime::block_on(async {
            let request = Request::post(url).header("content-type", "application/json").body(payload)?;
            let response = Client::new().send(request).await?;
            let status = response.status().as_u16();
            let mut body = response.into_body();
            let bytes = body.contents().await?;
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1000)]).into_owned();
            Ok::<_, wstd::http::Error>((status, text))
        })
        // A refused or failed request: the host's log says which, and why.
        .map_err(|e| error("request-failed", format!("POST {url}: {e:#}"), true))?;
        match status {
            500.. => Err(error("http-5xx", format!("POST {url} answered {status}: {text}"), true)),
            400.. => Err(error("http-4xx", format!("POST {url} answered {status}: {text}"), false)),
            _ => Ok(Some(serde_json::json!({ "status": status, "response": text }).to_string())),
        }
    }
}

export!(Webhook);
