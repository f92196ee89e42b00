//! What a queue's successes do with their tasks (a queue's limit `on_success`; see
//! `store::transitions::ends`).

use serde::{Deserialize, Serialize};

/// What a queue's successes do with their tasks (`on_success`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum OnSuccess {
    /// The task's row stays, with its run, until rotation or a delete.
    #[default]
    Keep,
    /// The task's row is deleted, and a narrow row of its end written in its place, unless a
    /// wait, a dependent, a signal, a unique key, an earlier run or its children need it kept.
    Delete,
}

impl OnSuccess {
    /// Its name, as the operator writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            OnSuccess::Keep => "keep",
            OnSuccess::Delete => "delete",
        }
    }

    /// From the operator's word.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "keep" => Ok(OnSuccess::Keep),
            "delete" => Ok(OnSuccess::Delete),
            _ => Err(format!("on_success = {s:?} is neither keep nor delete")),
        }
    }
}
