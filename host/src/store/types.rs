//! The values the [`Store`](super::interface::Store) trait takes and gives besides the model's: which
//! database, retry decisions, bulk filters, queues as listed, wake-up channels.

use chrono::{DateTime, Utc};

use crate::model::*;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
    /// A MySQL or MariaDB server.
    MySql,
}

/// A failed task that needs its next run created (or to be given up on).
#[derive(Debug, Clone)]
pub struct RetryCandidate {
    /// The task.
    pub task_id: TaskId,
    /// Its failed runs in a row.
    pub failures: u32,
    /// Failed runs in a row after which it is given up.
    pub max_attempts: u32,
    /// Its own backoff, if any.
    pub backoff: BackoffSettings,
}

/// A decision about a [`RetryCandidate`].
#[derive(Debug, Clone, Copy)]
pub struct RetryPlan {
    /// The task.
    pub task_id: TaskId,
    /// `RetryAt` or `GiveUp`.
    pub next: NextStep,
}

/// Which tasks a bulk action touches: those of a queue, of a handler and among some ids (None:
/// any). The action's own condition (unfinished, dead, ...) still applies to each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkFilter {
    /// Only tasks of this queue.
    pub queue: Option<String>,
    /// Only tasks of this handler.
    pub handler: Option<String>,
    /// Only these tasks (as a person picks them on a page); the caller bounds how many.
    pub ids: Option<Vec<crate::model::TaskId>>,
}

/// Which finished tasks [`Store::delete_finished`](super::interface::Store::delete_finished) deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Tasks that succeeded.
    Succeeded,
    /// Tasks cancelled.
    Cancelled,
    /// Dead letters: tasks given up on.
    Dead,
    /// All three.
    Any,
}

/// Which ended tasks [`Store::replay`](super::interface::Store::replay) schedules again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Dead letters: tasks given up on.
    Dead,
    /// Cancelled tasks.
    Cancelled,
}

/// Which unfinished tasks [`Store::cancel_matching`](super::interface::Store::cancel_matching) cancels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unfinished {
    /// Not running: waiting for the tasks it runs after or for its time, or awaiting a retry.
    Waiting,
    /// Running tasks.
    Running,
    /// Both.
    #[default]
    Any,
}

/// What [`Store::cancel_matching`](super::interface::Store::cancel_matching) cancelled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cancelled {
    /// Tasks cancelled.
    pub tasks: u64,
    /// Of those, how many were running (their workers stop them).
    pub running: u64,
}

/// What [`Store::wakeups`](super::interface::Store::wakeups) delivers: each channel receives a message soon after its event.
#[derive(Debug)]
pub struct Wakeups {
    /// Tasks were added.
    pub tasks: tokio::sync::mpsc::Receiver<()>,
    /// Running tasks were cancelled.
    pub cancels: tokio::sync::mpsc::Receiver<()>,
}

/// A queue as [`Store::queues`](super::interface::Store::queues) sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// Scheduled tasks due now.
    pub due: u64,
    /// Scheduled tasks due later.
    pub later: u64,
    /// Tasks of it running.
    pub running: u64,
    /// When the longest-waiting due task was due: how far behind the queue is.
    pub oldest_due: Option<DateTime<Utc>>,
    /// Since when it is paused; None: it is not.
    pub paused_on: Option<DateTime<Utc>>,
    /// Runs in flight allowed across all workers (the store leaves it None;
    /// [`crate::Client::queues`] fills it in from the limits kept in the database).
    pub max_running: Option<u32>,
    /// Starts allowed per period across all workers, as `N/PERIOD` with its burst (filled in
    /// as `max_running` is).
    pub rate_limit: Option<String>,
    /// Due tasks its limit holds back now (None: the queue has no limit; filled in as
    /// `max_running` is). See [`LimitInfo::held_back`].
    pub held_back: Option<u64>,
    /// Live workers that claim from it (a worker of an older host, which does not say, counts).
    pub served_by: u32,
}

impl QueueInfo {
    /// A queue that holds nothing.
    pub fn empty(name: String) -> Self {
        QueueInfo {
            name,
            due: 0,
            later: 0,
            running: 0,
            oldest_due: None,
            paused_on: None,
            max_running: None,
            rate_limit: None,
            held_back: None,
            served_by: 0,
        }
    }
}

/// The handlers a runner serves: name → sha256 of the component.
pub type Served = std::collections::BTreeMap<String, String>;

/// Who set a flow-control limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum LimitSetBy {
    /// A worker's start, from the operator's configuration file.
    File,
    /// An operator, live (`taskhost limits set`, the API): a file does not overwrite it.
    Operator,
}

impl LimitSetBy {
    /// As stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            LimitSetBy::File => "file",
            LimitSetBy::Operator => "operator",
        }
    }

    /// As stored, read.
    pub fn parse(s: &str) -> Option<Self> {
        [LimitSetBy::File, LimitSetBy::Operator].into_iter().find(|b| b.as_str() == s)
    }
}

/// How [`Store::set_limit`](super::interface::Store::set_limit) writes a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitEdit<'a> {
    /// This limit, whole (nothing limited: take it out).
    Set(Limit),
    /// This change to the limit as it is.
    Change(&'a LimitChange),
}

/// What [`Store::set_limit`](super::interface::Store::set_limit) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitWritten {
    /// The limit before (nothing limited: there was none).
    pub before: Limit,
    /// The limit now.
    pub now: Limit,
    /// Whether it was kept as an operator set it (a file's limit was not written).
    pub kept: bool,
}

/// A flow-control limit as [`Store::limits`](super::interface::Store::limits) lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct LimitInfo {
    /// What it limits: a queue, a handler or a key.
    pub scope: LimitScope,
    /// The queue's, handler's or key's name.
    pub target: String,
    /// Runs in flight at once, on all workers together (None: not limited).
    pub max_running: Option<u32>,
    /// Starts per period, on all workers together, as `N/PERIOD` (None: not limited).
    pub rate: Option<String>,
    /// With a rate: starts allowed at once beyond its pace.
    pub rate_burst: Option<u32>,
    /// A queue's runs in flight of each key at once (None: not limited).
    pub max_running_per_key: Option<u32>,
    /// A queue's starts per period of each key, as `N/PERIOD` (None: not limited).
    pub rate_per_key: Option<String>,
    /// With a rate per key: starts each key may take at once beyond its pace.
    pub rate_burst_per_key: Option<u32>,
    /// A queue's fuel a turn of a key buys (None: turns counted by tasks).
    pub fuel_per_turn: Option<u64>,
    /// What a queue's successes do with their tasks.
    pub on_success: crate::model::OnSuccess,
    /// A key's weight (None: 1).
    pub weight: Option<u32>,
    /// Who set it last (None: a host before live limits).
    pub set_by: Option<LimitSetBy>,
    /// When it was set last.
    pub updated_on: Option<DateTime<Utc>>,
    /// Its runs in flight now.
    pub running: u64,
    /// Its due tasks now (of queues not paused): what it may be holding back.
    pub due: u64,
    /// Of those, the ones it holds back now: beyond its room (its cap less its runs in flight,
    /// the starts its rate allows now) and, a queue's, beyond each key's room under its cap and
    /// its rate per key. A key's weight holds nothing back.
    pub held_back: u64,
}

/// A key's tasks in a queue, as [`Store::keys`](super::interface::Store::keys) lists them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct KeyInfo {
    /// The queue.
    pub queue: String,
    /// The key.
    pub key: String,
    /// Its tasks due now.
    pub due: u64,
    /// Its tasks due later.
    pub later: u64,
    /// Its runs in flight.
    pub running: u64,
    /// Since when its longest-waiting due task has waited (the later of its queueing and its
    /// due time); None: nothing of it is due.
    pub waiting_since: Option<DateTime<Utc>>,
    /// Its weight, when set (None: 1).
    pub weight: Option<u32>,
    /// The fuel its runs burn on average, where its queue weighs keys by fuel (`fuel_per_turn`);
    /// None: not weighed, or no run ended yet.
    pub fuel_per_run: Option<u64>,
}

/// What the event stream asks each time the database may have changed (see `api/feed.rs`).
#[derive(Debug, Clone, Default)]
pub struct Look {
    /// Tasks with a greater id: the newly queued.
    pub newer_than: Option<TaskId>,
    /// The running tasks, and those awaiting a retry.
    pub running: bool,
    /// Tasks finished after this, by the database's clock.
    pub finished_after: Option<DateTime<Utc>>,
    /// And up to this (none: up to now).
    pub finished_until: Option<DateTime<Utc>>,
    /// Count the tasks finished after the first time and up to the second (see
    /// [`Glimpse::window`]).
    pub finished_window: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// These tasks, in whatever state.
    pub ids: Vec<TaskId>,
    /// At most this many rows of each part (new, running, awaiting a retry, finished).
    pub limit: u32,
}

/// A task in brief, as the event stream tells it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Brief {
    /// Its id.
    pub id: TaskId,
    /// Its queue.
    pub queue: String,
    /// Its handler.
    pub handler: String,
    /// Where it is in its life.
    pub state: TaskState,
    /// The attempt of its latest run (0 before its first).
    pub attempt: u32,
    /// Failed runs in a row.
    pub failures: u32,
    /// Its running run's progress in percent, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<u8>,
    /// When it finished, if it is final.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_on: Option<DateTime<Utc>>,
}

/// What a [`Look`] found: the new and asked in id order, the running and retrying in none, the
/// finished in the order they finished.
#[derive(Debug, Clone, Default)]
pub struct Glimpse {
    /// The tasks newer than [`Look::newer_than`].
    pub new: Vec<Brief>,
    /// The running tasks.
    pub running: Vec<Brief>,
    /// The failed tasks awaiting their retry.
    pub retrying: Vec<Brief>,
    /// The tasks of [`Look::ids`] found.
    pub asked: Vec<Brief>,
    /// The tasks finished after [`Look::finished_after`].
    pub finished: Vec<Brief>,
    /// When a part of the finished was cut at the limit: the earliest end it was read up to.
    pub finished_cut: Option<DateTime<Utc>>,
    /// The tasks finished within [`Look::finished_window`]: how many, the sum of their ids and
    /// the sum of their runs' attempts (a task replayed and ended again counts anew).
    pub window: Option<(u64, i64, i64)>,
}

/// A key whose due tasks' turns were laid by another stride than it has now: in a queue weighed
/// by fuel, by another fuel a run than its runs burn now, or by another weight than it was given
/// since ([`Store::keys_to_relay`](super::interface::Store::keys_to_relay)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyToRelay {
    /// The queue.
    pub queue: String,
    /// The key.
    pub key: String,
    /// Its runs' average fuel now.
    pub fuel: i64,
    /// The fuel its due tasks' turns were laid by; None: not known, taken as its queue's fuel per
    /// turn (a turn a task, as tasks queued before any of its runs ended are laid).
    pub laid_fuel: Option<i64>,
    /// Its queue's fuel per turn (0: a queue not weighed by fuel).
    pub per_turn: i64,
    /// Its weight now.
    pub weight: u32,
    /// What its due tasks' turns were laid by when the operator changed it since (`limits set
    /// key:K --weight`, `limits set queue:Q --fuel-per-turn`); None: laid by what is in force now.
    pub asked: Option<Asked>,
    /// Its stride now, in picoseconds (`transitions::fair`).
    pub stride_ps: i64,
    /// The stride its due tasks were laid by, in picoseconds.
    pub laid_stride_ps: i64,
}

/// A key's weight, or its queue's fuel per turn, changed by the operator while it had turns: what
/// its due tasks' turns were laid by, and how many changes were asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    /// The weight they were laid by.
    pub weight: u32,
    /// The fuel per turn they were laid by (0: none, a turn a task).
    pub per_turn: i64,
    /// The changes asked: a re-lay done takes the ask out only when no change came meanwhile.
    pub count: i64,
}

/// How far a re-lay of one key's turns has gone
/// ([`Store::relay_turns`](super::interface::Store::relay_turns)): handed back to go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayCursor {
    /// Stretching (from the last due task back) or drawing together (from the first on).
    pub(crate) stretch: bool,
    /// The due time and id of the last task read (not yet: from the end).
    pub(crate) after: Option<(DateTime<Utc>, i64)>,
    /// The turn the next task read is given, in picoseconds.
    pub(crate) next_ps: i128,
    /// The stride it lays by, in picoseconds.
    pub(crate) stride_ps: i64,
}

/// What one call of [`Store::relay_turns`](super::interface::Store::relay_turns) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relaid {
    /// Due tasks read.
    pub read: u64,
    /// Tasks given another turn.
    pub moved: u64,
    /// Where to go on; None: the key is done.
    pub next: Option<RelayCursor>,
}

impl RelayCursor {
    /// The stride it lays by, in picoseconds.
    pub fn stride_ps(&self) -> i64 {
        self.stride_ps
    }
}
