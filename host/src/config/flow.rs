//! `[queues.NAME]` and `[keys.NAME]`: flow-control limits a worker's start writes to the
//! database (see `crate::model::Limit`); `[handlers.NAME]`'s are read with the handler.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::model::{Limit, LimitScope, OnSuccess, RunLimits};

/// A `[queues.NAME]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QueueSection {
    max_running: Option<i64>,
    rate_limit: Option<String>,
    rate_burst: Option<i64>,
    max_running_per_key: Option<i64>,
    rate_limit_per_key: Option<String>,
    rate_burst_per_key: Option<i64>,
    fuel_per_turn: Option<i64>,
    on_success: Option<String>,
}

/// A `[keys.NAME]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeySection {
    weight: Option<i64>,
}

/// The queues' and keys' limits, checked, set in `limits`; or one line naming what is wrong.
pub(super) fn read(
    queues: &BTreeMap<String, QueueSection>,
    keys: &BTreeMap<String, KeySection>,
    limits: &mut RunLimits,
) -> Result<(), String> {
    for (name, q) in queues {
        if let Some(reason) = crate::model::queue_refusal(name) {
            return Err(format!("[queues.{name}]: {reason}"));
        }
        let mut limit = Limit::from_settings(q.max_running, q.rate_limit.as_deref(), q.rate_burst)
            .map_err(|e| format!("[queues.{name}] {e}"))?;
        limit.max_running_per_key = q
            .max_running_per_key
            .map(Limit::max_running)
            .transpose()
            .map_err(|e| format!("[queues.{name}] max_running_per_key: {e}"))?;
        limit.rate_per_key = Limit::rate_setting(q.rate_limit_per_key.as_deref(), q.rate_burst_per_key, "_per_key")
            .map_err(|e| format!("[queues.{name}] {e}"))?;
        limit.fuel_per_turn = q
            .fuel_per_turn
            .map(|n| Limit::fuel_per_turn(i128::from(n)))
            .transpose()
            .map_err(|e| format!("[queues.{name}] {e}"))?;
        if let Some(word) = &q.on_success {
            limit.on_success = OnSuccess::parse(word).map_err(|e| format!("[queues.{name}] {e}"))?;
        }
        limits.set(LimitScope::Queue, name, limit);
    }
    for (name, k) in keys {
        if let Some(reason) = crate::model::key_refusal(name) {
            return Err(format!("[keys.{name}]: {reason}"));
        }
        let weight = k.weight.map(Limit::weight).transpose().map_err(|e| format!("[keys.{name}] {e}"))?;
        limits.set(LimitScope::Key, name, Limit { weight, ..Limit::default() });
    }
    Ok(())
}
