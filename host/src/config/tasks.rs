//! `[tasks]`: the operator's bounds on every task, whoever queues it (a caller, or a run).

use serde::Deserialize;

use super::Policy;

/// Times a task may snooze unless the file says otherwise.
pub(super) const DEFAULT_MAX_SNOOZES: u32 = 1000;

/// The `[tasks]` table, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TasksSection {
    max_data_bytes: Option<usize>,
    max_snoozes: Option<u32>,
    max_depth: Option<u32>,
    sql_add_handlers: Option<String>,
}

/// The `[tasks]` table, checked, its defaults filled in.
pub(super) struct Checked {
    pub max_data_bytes: usize,
    pub max_snoozes: u32,
    pub max_depth: u32,
    pub sql_add_handlers: SqlAddHandlers,
}

/// Which handlers `taskhost_add` in SQL takes (`[tasks] sql_add_handlers`), applied by `taskhost
/// migrate`: the database sees the handlers deployed into it, never a plugins directory's files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SqlAddHandlers {
    /// Any well-named handler: one no worker has becomes a `handler-not-found` dead letter after
    /// the overseer's `unserved` horizon.
    #[default]
    Any,
    /// Only a handler deployed into the database (`taskhost deploy`); any other is refused in the
    /// caller's statement.
    Deployed,
}

impl TasksSection {
    /// Each value within its range, or one line naming the one that is not.
    pub(super) fn checked(&self) -> Result<Checked, String> {
        let max_data_bytes = self.max_data_bytes.unwrap_or(Policy::DEFAULT_MAX_DATA_BYTES);
        if !(Policy::MIN_DATA_BYTES..=Policy::MAX_DATA_BYTES).contains(&max_data_bytes) {
            let (min, max) = (Policy::MIN_DATA_BYTES, Policy::MAX_DATA_BYTES);
            return Err(format!("[tasks] max_data_bytes = {max_data_bytes} is out of range ({min} to {max})"));
        }
        let sql_add_handlers = match self.sql_add_handlers.as_deref() {
            None | Some("any") => SqlAddHandlers::Any,
            Some("deployed") => SqlAddHandlers::Deployed,
            Some(other) => {
                let other = crate::text::bounded(other, 64, "…");
                return Err(format!("[tasks] sql_add_handlers = {other:?}: expected \"any\" or \"deployed\""));
            }
        };
        Ok(Checked {
            max_data_bytes,
            max_snoozes: self.max_snoozes.unwrap_or(DEFAULT_MAX_SNOOZES),
            max_depth: self.max_depth.unwrap_or(crate::model::DEFAULT_MAX_DEPTH),
            sql_add_handlers,
        })
    }
}
