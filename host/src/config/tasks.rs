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
}

/// The `[tasks]` table, checked, its defaults filled in.
pub(super) struct Checked {
    pub max_data_bytes: usize,
    pub max_snoozes: u32,
    pub max_depth: u32,
}

impl TasksSection {
    /// Each value within its range, or one line naming the one that is not.
    pub(super) fn checked(&self) -> Result<Checked, String> {
        let max_data_bytes = self.max_data_bytes.unwrap_or(Policy::DEFAULT_MAX_DATA_BYTES);
        if !(Policy::MIN_DATA_BYTES..=Policy::MAX_DATA_BYTES).contains(&max_data_bytes) {
            let (min, max) = (Policy::MIN_DATA_BYTES, Policy::MAX_DATA_BYTES);
            return Err(format!("[tasks] max_data_bytes = {max_data_bytes} is out of range ({min} to {max})"));
        }
        Ok(Checked {
            max_data_bytes,
            max_snoozes: self.max_snoozes.unwrap_or(DEFAULT_MAX_SNOOZES),
            max_depth: self.max_depth.unwrap_or(crate::model::DEFAULT_MAX_DEPTH),
        })
    }
}
