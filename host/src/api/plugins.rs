//! Plugins: each handler, deployed into the database or a file of the plugins directory, with its
//! digest, limits, grants, whether it can be queued and which workers serve it. Answered without
//! compiling anything.

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
    /// `deployed` (its active version, from the database) or `directory` (this server's plugins
    /// directory; a file whose name is deployed is not used, nor listed).
    source: &'static str,
    /// The release that made the deployed version active.
    release: Option<i64>,
    /// Of the component file, hex; null when it could not be read.
    sha256: Option<String>,
    /// Whether queueing accepts it (its files can be read and it implements the world); when
    /// not, `error` says why.
    ok: bool,
    error: Option<String>,
    /// This server's cache holds its compiled code (a worker sharing the cache loads it at once).
    compiled: bool,
    /// Live workers that serve this version (this digest) of it.
    served_by: u32,
    /// Runs in flight allowed across all workers, by the operator's configuration.
    max_running: Option<u32>,
    /// What its runs get (null when its files cannot be used).
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

/// Each handler as queueing sees it: its active deployed version, or its file in the plugins
/// directory: digest, whether it implements the world (checked from its types, once per version
/// of its files; nothing is compiled), how many live workers serve that version, limits, and
/// grants by name only.
#[utoipa::path(get, path = "/api/v1/plugins", operation_id = "list_plugins", tag = "operations", responses((status = 200, description = "Done", body = Plugins), Errors))]
pub(super) async fn list(State(state): State<Arc<ApiState>>) -> Result<Json<Plugins>, ApiError> {
    let _one_at_a_time = state.plugin_scan.lock().await;
    let catalog = state.client.catalog().clone();
    let store = state.client.store();
    let deployed = store.active_versions().await?;
    // Without a plugins directory, the deployed handlers alone.
    let dir = match catalog.check_dir() {
        Ok(()) => true,
        Err(e) if deployed.is_empty() => return Err(e.into()),
        Err(_) => false,
    };
    let runners = store.live_runners().await?;
    let surveyed = match dir {
        true => {
            let scan = catalog.clone();
            tokio::task::spawn_blocking(move || scan.survey()).await.map_err(|e| {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("the scan failed: {e}"))
            })??
        }
        false => Vec::new(),
    };
    let running = store.limits_in_force().await?.handlers;
    let serving = |name: &str, digest: &str| {
        let served = runners.iter().filter_map(|r| r.handlers.as_ref()?.get(name)).filter(|d| *d == digest);
        u32::try_from(served.count()).unwrap_or(u32::MAX)
    };
    let mut plugins: Vec<PluginInfo> = deployed
        .into_iter()
        .map(|v| {
            let limits = catalog.deployed_limits(&v.handler, &v.digest, v.manifest.as_deref());
            PluginInfo {
                source: "deployed",
                release: Some(v.release),
                max_running: running.get(&v.handler).and_then(|l| l.max_running),
                ok: limits.is_ok(),
                compiled: catalog.is_compiled(&v.digest),
                served_by: serving(&v.handler, &v.digest),
                limits: limits.as_ref().ok().map(|(l, _)| LimitsInfo::from(l)),
                grants: limits.as_ref().ok().map(|(_, g)| g.summary()),
                error: limits.err(),
                sha256: Some(v.digest),
                name: v.handler,
            }
        })
        .collect();
    let files = surveyed.into_iter().filter(|s| !plugins.iter().any(|p| p.name == s.name)).map(|s| {
        let (checked, error) = match s.checked {
            Ok(c) => {
                let error = c.types.clone().err();
                (Some(c), error)
            }
            Err(e) => (None, Some(e)),
        };
        PluginInfo {
            source: "directory",
            release: None,
            max_running: running.get(&s.name).and_then(|l| l.max_running),
            sha256: checked.as_ref().map(|c| c.digest.clone()),
            ok: error.is_none(),
            error,
            compiled: s.compiled,
            served_by: checked.as_ref().map_or(0, |c| serving(&s.name, &c.digest)),
            limits: checked.as_ref().map(|c| LimitsInfo::from(&c.limits)),
            grants: checked.map(|c| c.grants.summary()),
            name: s.name,
        }
    });
    plugins.extend(files.collect::<Vec<_>>());
    plugins.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(Plugins { plugins }))
}
