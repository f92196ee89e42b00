//! Plugins: each handler in the plugins directory with its digest, limits, grants and whether
//! it loads, as `taskhost plugins --json` says and more.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::{ApiError, ApiState};

/// `GET /api/v1/plugins`: the directory scanned again (a changed file is loaded again, a
/// compiled one comes from the cache), one scan at a time.
pub(super) async fn list(State(state): State<Arc<ApiState>>) -> Result<Json<Value>, ApiError> {
    let _one_at_a_time = state.plugin_scan.lock().await;
    let catalog = state.client.catalog().clone();
    catalog.check_dir()?;
    let reports = tokio::task::spawn_blocking(move || {
        let reports = catalog.reload();
        let loaded: Vec<_> = reports.iter().map(|r| catalog.get(&r.name)).collect();
        (reports, loaded, catalog)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("the scan failed: {e}")))?;
    let (reports, loaded, catalog) = reports;
    let running = &catalog.policy().run_limits.handlers;
    let plugins: Vec<Value> = reports
        .iter()
        .zip(loaded)
        .map(|(r, plugin)| {
            let limits = plugin.as_ref().map(|p| {
                json!({
                    "fuel": p.limits.fuel,
                    "memory_bytes": p.limits.memory_bytes,
                    "timeout_ms": p.limits.deadline.as_millis() as u64,
                    "max_results_bytes": p.limits.max_results_bytes,
                    "max_log_bytes": p.limits.max_log_bytes,
                    "max_handles": p.limits.max_handles,
                })
            });
            json!({
                "name": r.name,
                "sha256": r.digest,
                "ok": r.status.is_ok(),
                "error": r.status.as_ref().err(),
                "cached": r.cached,
                "load_ms": r.load_time.as_millis() as u64,
                "max_running": running.get(&r.name),
                "limits": limits,
                "grants": plugin.map(|p| p.grants.summary()),
            })
        })
        .collect();
    Ok(Json(json!({ "plugins": plugins })))
}
