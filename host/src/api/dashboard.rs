//! The dashboard: a small app in plain JavaScript modules, embedded in the binary (no build step,
//! no CDN), that reads and acts through the same JSON API as every other client. Its files live
//! in `host/ui/`; `/` serves the page and `/ui/…` the rest. They hold no data, so they need no
//! token: the page asks for one when the API wants it.
//!
//! The page builds its DOM from text (never HTML strings), and the answers forbid scripts,
//! styles and connections from anywhere but this server (`Content-Security-Policy`), so task
//! data, logs and errors, which anyone's handler or task may have written, show as text.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Every file of the dashboard: its path under `/ui/`, type and content.
const FILES: [(&str, &str, &str); 9] = [
    ("style.css", "text/css; charset=utf-8", include_str!("../../ui/style.css")),
    ("app.js", JS, include_str!("../../ui/app.js")),
    ("view.js", JS, include_str!("../../ui/view.js")),
    ("overview.js", JS, include_str!("../../ui/overview.js")),
    ("tasks.js", JS, include_str!("../../ui/tasks.js")),
    ("task.js", JS, include_str!("../../ui/task.js")),
    ("graph.js", JS, include_str!("../../ui/graph.js")),
    ("operations.js", JS, include_str!("../../ui/operations.js")),
    ("plugins.js", JS, include_str!("../../ui/plugins.js")),
];
const JS: &str = "text/javascript; charset=utf-8";
const INDEX: &str = include_str!("../../ui/index.html");

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                      connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Paths the dashboard's files answer, needing no token.
pub(super) fn is_asset(path: &str) -> bool {
    path == "/" || path.starts_with("/ui/")
}

pub(super) async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

pub(super) async fn asset(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(path, _, _)| *path == name) {
        Some((_, kind, body)) => file(kind, body),
        None => (StatusCode::NOT_FOUND, "no such file of the dashboard").into_response(),
    }
}

fn file(kind: &'static str, body: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // A new binary may bring new files: ask again each time (they are small and local).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
