//! The arguments of `add` and `list`: a task as the command line queues it, and the filters of
//! a listing.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;
use taskhost::model::{RunStatus, TaskState};
use taskhost::text::parse_time;

use super::values::*;

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The handler: deployed (taskhost deploy), or NAME.wasm in the plugins directory.
    #[arg(required_unless_present = "many")]
    pub handler: Option<String>,
    /// Queue the tasks of a file instead, one JSON object a line ({"handler": …, "data": …,
    /// "queue", "priority", "key", "max_attempts", "unique_key", "unique_for", "unique_states", "queued_by", "at",
    /// "after", "run_anyway", "version"}); - reads standard
    /// input. Every line is checked before any task is queued.
    #[arg(long, conflicts_with = "handler", value_name = "FILE")]
    pub many: Option<String>,
    /// The task's data, a JSON document; @FILE reads it from a file, - from standard input.
    #[arg(long, default_value = "{}")]
    pub data: String,
    /// Run at this time (RFC 3339 with a zone, e.g. 2026-01-02T03:04:05Z or …+01:00).
    #[arg(long, conflicts_with = "in_", value_parser = parse_time)]
    pub at: Option<DateTime<Utc>>,
    /// Run after this delay (e.g. 90s, 5m, 1h 30m).
    #[arg(long = "in", value_parser = taskhost::text::parse_duration)]
    pub in_: Option<Duration>,
    /// Runs the task may have, the first included, before it is given up on (a dead letter):
    /// each failed run in a row is an attempt. At least 1 (1: no retry) [default: 5].
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// The old name of --max-attempts: the same number, 0 taken as 1.
    #[arg(long, hide = true, conflicts_with = "max_attempts")]
    pub max_retries: Option<u32>,
    /// The queue: workers claim from the queues they are given.
    #[arg(long, default_value = taskhost::model::DEFAULT_QUEUE, value_parser = non_empty)]
    pub queue: String,
    /// Lower runs first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
    /// The key whose share the task is taken in (a tenant, a customer): claims interleave keys,
    /// each by its weight (taskhost limits set key:NAME --weight N).
    #[arg(long)]
    pub key: Option<String>,
    /// While a task with this key is unfinished, adding another returns the existing one.
    #[arg(long)]
    pub unique_key: Option<String>,
    /// Pin it to a deployed version of its handler: its runs run that version, not the active
    /// one (a digest, or its start, as `taskhost versions` shows it).
    #[arg(long, value_name = "DIGEST")]
    pub version: Option<String>,
    /// With --unique-key: the key is let go this long after the task is queued, whatever its
    /// state (e.g. 24h).
    // (Not clap's `requires`: its refusal is five lines; the task's own check says it in one.)
    #[arg(long, conflicts_with = "many", value_parser = taskhost::text::parse_duration)]
    pub unique_for: Option<Duration>,
    /// With --unique-key: the states in which the task keeps its key: unfinished (until it ends),
    /// succeeded (unfinished or succeeded), any (finished ones too) [default: unfinished].
    #[arg(long, conflicts_with = "many", value_name = "STATES")]
    pub unique_states: Option<taskhost::model::UniqueStates>,
    /// Who queued it, for the record (shown by `show` and handed to the handler).
    #[arg(long)]
    pub queued_by: Option<String>,
    /// Time out a run after this long [default: 1 day].
    #[arg(long, value_parser = taskhost::text::parse_duration)]
    pub run_timeout: Option<Duration>,
    /// Run after these tasks (comma-separated ids): wait until each succeeded, cancelled if one fails for good.
    #[arg(long, value_delimiter = ',', value_name = "ID[,ID...]")]
    pub after: Vec<taskhost::model::TaskId>,
    /// With --after: run it even when a task it runs after is dead or cancelled.
    #[arg(long, conflicts_with = "many")]
    pub run_anyway: bool,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only tasks whose latest run has this status.
    #[arg(long, value_parser = status())]
    pub status: Option<RunStatus>,
    /// Only tasks in this state (awaiting-retry leaves dead letters out, whose latest run also
    /// failed).
    #[arg(long, value_parser = state())]
    pub state: Option<TaskState>,
    /// Only tasks of this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only tasks of this handler.
    #[arg(long)]
    pub handler: Option<String>,
    /// Only dead letters: tasks given up on, with their last error.
    #[arg(long)]
    pub dead: bool,
    /// Only tasks whose data contains TEXT (case-sensitive).
    #[arg(long, value_name = "TEXT")]
    pub contains: Option<String>,
    /// Only the tasks task ID's runs queued (its children).
    #[arg(long, value_name = "ID")]
    pub parent: Option<i64>,
    /// Most tasks listed.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Skip this many first (the next page: --offset 100).
    #[arg(long, default_value_t = 0)]
    pub offset: u32,
    /// Oldest first (the default is newest first).
    #[arg(long)]
    pub oldest_first: bool,
    /// List again every INTERVAL (default 2s) until stopped (Ctrl-C), redrawing the screen on a
    /// terminal: progress, results and errors as they happen.
    #[arg(long, value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "2s", value_parser = positive_duration)]
    pub watch: Option<Duration>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}
