//! A task as JSON describes it, for `add --many` lines and the HTTP API: `{"handler": "resize",
//! "data": {...}}` with optional `queue`, `priority`, `key`, `max_attempts`, `unique_key` (with
//! `unique_for`, "24h", and `unique_states`: "unfinished", "succeeded" or "any"), `queued_by`,
//! `at` (RFC 3339 with a zone), `run_timeout` ("90s"), `after` (task ids it runs after),
//! `run_anyway` and `version` (a deployed version's digest, or its start, to pin it to). Unknown fields are refused;
//! `max_retries`, the old name of `max_attempts`, is still read (the same number, 0 taken as 1).

use serde::Deserialize;

use super::NewTask;

/// A task as JSON (`add --many`, the API), before it is checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct TaskInput {
    /// The handler.
    pub handler: String,
    /// Any JSON; `{}` when absent.
    #[serde(default = "empty_object")]
    #[cfg_attr(feature = "serve", schema(value_type = serde_json::Value))]
    pub data: serde_json::Value,
    /// Its queue (the default's when absent).
    pub queue: Option<String>,
    /// Its priority (lower runs first).
    pub priority: Option<i32>,
    /// Runs it may have, the first included, before it is given up on (at least 1).
    pub max_attempts: Option<u32>,
    /// The old name of `max_attempts`: the same number, 0 taken as 1.
    #[cfg_attr(feature = "serve", schema(deprecated))]
    pub max_retries: Option<u32>,
    /// The key whose share it is taken in (a tenant): claims interleave keys by weight.
    pub key: Option<String>,
    /// Its unique key.
    pub unique_key: Option<String>,
    /// The key let go this long after it is queued, whatever its state, as text ("24h").
    pub unique_for: Option<String>,
    /// In which states it keeps its key: `unfinished` (the default), `succeeded` or `any`.
    pub unique_states: Option<super::UniqueStates>,
    /// Who queues it.
    pub queued_by: Option<String>,
    /// Read as `add --at` reads its value, to say what is wrong with it.
    pub at: Option<String>,
    /// A run's time at most, as text ("90s").
    pub run_timeout: Option<String>,
    /// Tasks it runs after: it waits until each has succeeded (at most 10,000).
    #[serde(default)]
    pub after: Vec<super::TaskId>,
    /// Run it even when a task it runs after is dead or cancelled (else it is cancelled too).
    #[serde(default)]
    pub run_anyway: bool,
    /// The version of its handler its runs run: a deployed component's digest, or the start of
    /// it (at least 8 hex digits); the active version when absent.
    pub version: Option<String>,
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

impl TaskInput {
    /// The task to queue; the error names the field at fault.
    pub fn task(self) -> Result<NewTask, String> {
        let at = match &self.at {
            Some(at) => Some(crate::text::parse_time(at).map_err(|e| format!("\"at\": {at:?}: {e}"))?),
            None => None,
        };
        let run_timeout = match &self.run_timeout {
            Some(t) => Some(crate::text::parse_duration(t).map_err(|e| format!("\"run_timeout\": {e}"))?),
            None => None,
        };
        let unique_for = match &self.unique_for {
            Some(p) => Some(crate::text::parse_duration(p).map_err(|e| format!("\"unique_for\": {e}"))?),
            None => None,
        };
        let mut t = NewTask::new(self.handler, self.data.to_string());
        if let Some(q) = self.queue {
            t = t.with_queue(q);
        }
        if let Some(p) = self.priority {
            t = t.with_priority(p);
        }
        match (self.max_attempts, self.max_retries) {
            (Some(_), Some(_)) => return Err("give \"max_attempts\" or its old name \"max_retries\", not both".into()),
            (Some(n), None) => t = t.with_max_attempts(n),
            (None, Some(n)) => t = t.with_max_attempts(n.max(1)),
            (None, None) => {}
        }
        t.key = self.key;
        t.unique_key = self.unique_key;
        t.unique_for = unique_for;
        t.unique_states = self.unique_states.unwrap_or_default();
        t.queued_by = self.queued_by;
        t.scheduled_on = at;
        t.run_timeout = run_timeout;
        t.after = self.after;
        t.run_anyway = self.run_anyway;
        t.version = self.version.as_deref().map(super::new_task::version_text);
        Ok(t)
    }
}
