//! A task and its runs as JSON, the same for `show --json`, `list --json` and the HTTP API: its
//! data and each run's results as JSON values (not the strings they are stored as), logs as a
//! list of lines, and who produced each run's error (`error_source`).

use serde::{Serialize, Serializer};

use super::{Dependency, ErrorSource, Run, Signal, Task, Transition};

/// A task with its runs, oldest first.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct TaskDetail {
    /// The task.
    pub task: Task,
    /// Its runs, oldest first.
    pub runs: Vec<RunDetail>,
    /// The tasks it runs after, in id order, each with its state (absent when none, and in
    /// lists of tasks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Dependency>,
    /// The signals sent to it, the newest 100, oldest first (absent when none, and in lists).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<Signal>,
    /// What an operator may do with it in its state: `cancel` (unfinished), `replay` (dead or
    /// cancelled), `delete` (finished).
    pub allows: Vec<&'static str>,
}

/// A run, and who produced its error.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct RunDetail {
    /// The run.
    #[serde(flatten)]
    pub run: Run,
    /// Who produced its error: the host or the handler.
    pub error_source: Option<ErrorSource>,
}

impl TaskDetail {
    /// A task and its runs, each run's error source read from its code.
    pub fn new(task: Task, runs: Vec<Run>) -> Self {
        let runs = runs.into_iter().map(|run| RunDetail { error_source: run.error_source(), run }).collect();
        let state = task.state;
        let allows = [
            (state.allows(Transition::Cancel), "cancel"),
            (state.allows(Transition::Replay), "replay"),
            (state.is_final(), "delete"),
        ];
        let allows = allows.into_iter().filter(|(yes, _)| *yes).map(|(_, name)| name).collect();
        TaskDetail { task, runs, after: Vec::new(), signals: Vec::new(), allows }
    }

    /// With the tasks it runs after.
    pub fn with_after(self, after: Vec<Dependency>) -> Self {
        TaskDetail { after, ..self }
    }

    /// With the signals sent to it.
    pub fn with_signals(self, signals: Vec<Signal>) -> Self {
        TaskDetail { signals, ..self }
    }
}

/// [`TaskDetail`] as a JSON value.
pub fn task_json(t: &Task, runs: &[Run]) -> serde_json::Result<serde_json::Value> {
    serde_json::to_value(TaskDetail::new(t.clone(), runs.to_vec()))
}

/// A stored JSON document as a value; one that does not parse (it always should) stays a string.
pub(super) fn stored<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    match serde_json::from_str::<&serde_json::value::RawValue>(text) {
        Ok(raw) => raw.serialize(s),
        Err(_) => s.serialize_str(text),
    }
}

pub(super) fn stored_or_null<S: Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match text {
        Some(t) => stored(t, s),
        None => s.serialize_none(),
    }
}

pub(super) fn lines<S: Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(text.as_deref().unwrap_or_default().lines())
}
