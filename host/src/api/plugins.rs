//! Plugins: each handler in the plugins directory with its digest, limits, grants and whether
//! it loads, as `taskhost plugins --json` says and more.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::doc::Errors;
use super::{ApiError, ApiState};
use crate::sandbox::grants::GrantsSummary;
use crate::sandbox::Limits;

#[derive(Serialize, ToSchema)]
pub(super) struct Plugins {
    plugins: Vec<PluginInfo>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct PluginInfo {
    name: String,
    /// Of the component file, hex; null when it could not be read.
    sha256: Option<String>,
    /// Whether it loads; when not, `error` says why.
    ok: bool,
    error: Option<String>,
    /// Its compiled code came from the cache.
    cached: bool,
    load_ms: u64,
    /// Runs in flight allowed across all workers, by the operator's configuration.
    max_running: Option<u32>,
    /// Of the version loaded (null when none loads).
    limits: Option<LimitsInfo>,
    grants: Option<GrantsSummary>,
}

/// What one run may use.
#[derive(Serialize, ToSchema)]
pub(super) struct LimitsInfo {
    fuel: u64,
    memory_bytes: u64,
    timeout_ms: u64,
    max_results_bytes: u64,
    max_log_bytes: u64,
    max_handles: u64,
}

impl From<&Limits> for LimitsInfo {
    fn from(l: &Limits) -> Self {
        LimitsInfo {
            fuel: l.fuel,
            memory_bytes: l.memory_bytes,
            timeout_ms: u64::try_from(l.deadline.as_millis()).unwrap_or(u64::MAX),
            max_results_bytes: l.max_results_bytes as u64,
            max_log_bytes: l.max_log_bytes as u64,
            max_handles: l.max_handles as u64,
        }
    }
}

/// Each handler in the plugins directory, scanned again now (a changed file is loaded again, a
/// compiled one comes from the cache; one scan at a time): digest, whether it loads, limits, and
/// grants by name only.
#[utoipa::path(get, path = "/api/v1/plugins", operation_id = "list_plugins", tag = "operations", responses((status = 200, description = "Done", body = Plugins), Errors))]
pub(super) async fn list(State(state): State<Arc<ApiState>>) -> Result<Json<Plugins>, ApiError> {
    let _one_at_a_time = state.plugin_scan.lock().await;
    let catalog = state.client.catalog().clone();
    catalog.check_dir()?;
    let scanned = tokio::task::spawn_blocking(move || {
        let reports = catalog.reload();
        let loaded: Vec<_> = reports.iter().map(|r| catalog.get(&r.name)).collect();
        (reports, loaded, catalog)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("the scan failed: {e}")))?;
    let (reports, loaded, catalog) = scanned;
    let running = &catalog.policy().run_limits.handlers;
    let plugins = reports
        .into_iter()
        .zip(loaded)
        .map(|(r, plugin)| PluginInfo {
            max_running: running.get(&r.name).copied(),
            sha256: r.digest,
            ok: r.status.is_ok(),
            error: r.status.err(),
            cached: r.cached,
            load_ms: u64::try_from(r.load_time.as_millis()).unwrap_or(u64::MAX),
            limits: plugin.as_ref().map(|p| LimitsInfo::from(&p.limits)),
            grants: plugin.map(|p| p.grants.summary()),
            name: r.name,
        })
        .collect();
    Ok(Json(Plugins { plugins }))
}
