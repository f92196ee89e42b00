//! The [`Store`] trait: everything the host keeps, as it asks for it. Implemented once
//! (`shared::SqlStore`) over each database's part.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::dialect::{ClaimRequest, Claimed};
use super::types::*;
use crate::error::Result;
use crate::model::*;
use crate::schedule::{NewSchedule, Schedule};

/// Everything the host keeps: tasks, runs, runners, queues, schedules, statistics, leases.
/// Written once for every database ([`SqlStore`](super::shared::SqlStore) over a [`Dialect`](super::dialect::Dialect)); each
/// change of a task's state is one of the store's transitions (`store/transitions/`). Every method is one transaction (or a
/// series of bounded ones), run again after a deadlock.
#[async_trait]
pub trait Store: super::components::Components + Send + Sync + 'static {
    /// Which database this is.
    fn backend(&self) -> Backend;

    /// Create or update the tables (idempotent); the migrations applied now (`0005 registration`).
    async fn migrate(&self) -> Result<Vec<String>>;
    /// Fails with [`Error::NotMigrated`](crate::error::Error::NotMigrated) when the tables do not exist.
    async fn check_migrated(&self) -> Result<()>;
    /// The database answers (a statement reading no table: nothing locked or large slows it).
    async fn ping(&self) -> Result<()>;
    /// Tell `taskhost_add` in SQL the operator's `[tasks] max_data_bytes` (where it differs from
    /// what it has); what was written over.
    async fn set_sql_data_limit(&self, bytes: u64) -> Result<DataLimitWrite>;
    /// Make `taskhost_add` in SQL refuse a handler not deployed into the database
    /// (`deployed_only`, `[tasks] sql_add_handlers = "deployed"`), or take any again; whether that
    /// changed anything.
    async fn set_sql_add_handlers(&self, deployed_only: bool) -> Result<bool>;
    /// The database's check of handlers queued in SQL, as `taskhost migrate` left it, and whether
    /// this process's sessions are marked as the host's, whose inserts it lets by.
    async fn sql_add_check(&self) -> Result<SqlAddCheck>;

    // --- tasks -----------------------------------------------------------------------------

    /// Queue tasks with their first run, in one transaction. Inputs are already validated.
    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>>;
    /// A task, if it exists.
    async fn get_task(&self, id: TaskId) -> Result<Option<Task>>;
    /// Keep these tasks' rows when they succeed, in a queue that deletes its successes
    /// (a wait for them begins): those not finished yet; how many were marked.
    async fn keep_tasks(&self, ids: &[TaskId]) -> Result<u64>;
    /// A task's runs, oldest first.
    async fn runs_of(&self, task_id: TaskId) -> Result<Vec<Run>>;
    /// A number that changes whenever anything may have been committed (a write-ahead log's
    /// stat, a snapshot), far cheaper to read than the data; None where the database has none.
    async fn change_marker(&self) -> Result<Option<u64>>;
    /// A bell that rings when something may have been committed (SQLite on Linux: its log is
    /// written); None where readers must look at the marker each tick.
    fn commit_bell(&self) -> Option<super::bell::CommitBell>;
    /// The tasks that may have changed, in brief, as `look` asks: what the event stream reads.
    async fn glimpse(&self, look: &Look) -> Result<Glimpse>;
    /// Of `ids`, the tasks that are final (succeeded, dead, cancelled), each as a plain read of
    /// the task, its runs, dependencies and signals has it, in a few statements for them all:
    /// what waits for their ends are answered with. No row while nothing ends, however many
    /// are asked.
    async fn final_details(&self, ids: &[TaskId]) -> Result<Vec<TaskDetail>>;
    /// The tasks a task runs after, in id order.
    async fn dependencies(&self, task_id: TaskId) -> Result<Vec<Dependency>>;
    /// The tasks a task runs after, in id order, with their last runs' results while those fit in
    /// `max_bytes` in all (what its run reads: `dependencies`).
    async fn dependency_results(&self, task_id: TaskId, max_bytes: usize) -> Result<Vec<DependencyResults>>;
    /// Send the signal `name` with `data` (a JSON document, checked) to an unfinished task: kept
    /// until a run reads it; a task awaiting it is due at once. Refused (`CannotSignal`) for a
    /// finished task or one holding too many unread signals.
    async fn signal(&self, task_id: TaskId, name: &str, data: &str, now: DateTime<Utc>) -> Result<SignalSent>;
    /// What a run of a task waiting for the signal `name` finds (`await-signal`).
    async fn signal_lookup(&self, task_id: TaskId, name: &str) -> Result<SignalLookup>;
    /// A task's signals, the newest 100, oldest first.
    async fn signals_of(&self, task_id: TaskId) -> Result<Vec<Signal>>;
    /// Tasks matching `filter`.
    async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>>;
    /// Tasks by status, and dead letters.
    async fn counts(&self) -> Result<QueueCounts>;
    /// Replay a dead letter: reset its failure count and schedule it now; with `data`, the
    /// task's data is replaced first (in the same transaction). The attempt its next run will be.
    async fn retry_task(&self, id: TaskId, data: Option<&str>, now: DateTime<Utc>) -> Result<u32>;
    /// Replay every dead letter (or cancelled task) matching `filter`, in batches; how many.
    /// Those whose unique key another task holds are left as they are.
    async fn replay(&self, which: Replay, filter: &BulkFilter, now: DateTime<Utc>) -> Result<u64>;
    /// Cancel the unfinished tasks among `ids`; the ids cancelled (finished or unknown ones are
    /// left as they are). See [`Store::cancel_matching`].
    async fn cancel_tasks(&self, ids: &[TaskId], now: DateTime<Utc>) -> Result<Vec<TaskId>>;
    /// [`Store::cancel_tasks`], and every unfinished task under them: their children, the
    /// children's children, ... (those of a finished one's too); the ids cancelled, `ids`' first.
    async fn cancel_with_children(&self, ids: &[TaskId], now: DateTime<Utc>) -> Result<Vec<TaskId>>;
    /// Cancel every unfinished task of `which` kind matching `filter`, in batches: its scheduled
    /// run never starts; its running run is `cancelled` at once and its worker stops the guest
    /// (within a second; at once on PostgreSQL), its late outcome ignored.
    async fn cancel_matching(&self, filter: &BulkFilter, which: Unfinished, now: DateTime<Utc>) -> Result<Cancelled>;
    /// Delete every finished task of the kind `which` matching `filter` that finished before
    /// `before`, with its runs, in batches; how many. Scheduled, running and retry-awaiting
    /// tasks are never touched.
    async fn delete_finished(&self, which: Finished, filter: &BulkFilter, before: DateTime<Utc>) -> Result<u64>;

    /// Statistics per handler and queue (of one handler, one queue, when given), at `now`:
    /// tasks by status, and the runs counted as they ended (see [`crate::stats`]).
    async fn stats(
        &self,
        handler: Option<&str>,
        queue: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::stats::HandlerStats>>;
    /// The runs ended in each of the `minutes` minutes up to `now`'s (oldest first, one point a
    /// minute, empty ones included), of one handler, one queue, when given.
    async fn throughput(
        &self,
        handler: Option<&str>,
        queue: Option<&str>,
        now: DateTime<Utc>,
        minutes: u32,
    ) -> Result<Vec<crate::stats::Minute>>;

    // --- runners ---------------------------------------------------------------------------

    /// Register a runner unless `limit` runners are already live.
    async fn register_runner(&self, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId>;
    /// The database server's time now; None when the database has no clock of its own (SQLite:
    /// it is this machine's).
    async fn server_time(&self) -> Result<Option<DateTime<Utc>>>;
    /// Returns false when the runner is no longer `running` (the overseer timed it out).
    async fn heartbeat(&self, runner: RunnerId, now: DateTime<Utc>) -> Result<bool>;
    /// Mark a runner stopped (`status`) at `now`.
    async fn finish_runner(&self, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()>;
    /// Runners still running.
    async fn live_runners(&self) -> Result<Vec<Runner>>;
    /// Runners (live or not) whose latest heartbeat is at or after `since`.
    async fn runners_seen_since(&self, since: DateTime<Utc>) -> Result<Vec<Runner>>;
    /// Record the queues a runner claims from (`["*"]`: every queue).
    async fn set_runner_queues(&self, runner: RunnerId, queues: &[String]) -> Result<()>;
    /// The queues holding scheduled tasks, by name, at most `limit` of them.
    async fn scheduled_queues(&self, limit: u32) -> Result<Vec<String>>;
    /// Record the handlers a runner serves, each with its component's digest.
    async fn set_runner_handlers(&self, runner: RunnerId, handlers: &Served) -> Result<()>;

    // --- runs ------------------------------------------------------------------------------

    /// Atomically claim up to `limit` due scheduled tasks of `queues` (priority, then FIFO),
    /// making their runs.
    /// `default_timeout` applies to tasks without their own run timeout.
    async fn claim(
        &self,
        runner: RunnerId,
        queues: &[String],
        limit: u32,
        now: DateTime<Utc>,
        default_timeout: Duration,
    ) -> Result<Vec<ClaimedRun>> {
        let req = ClaimRequest {
            runner,
            queues,
            handlers: None,
            limit,
            now,
            default_timeout,
            limits: None,
            paced_by_server: false,
        };
        self.claim_for(&req).await
    }
    /// [`Store::claim`] as `req` asks: of tasks whose handler is one of `req.handlers` only (a
    /// worker claims only what it can run), and within the limits of `req.limits` (runs in
    /// flight and starts per period across all workers, per queue and per handler).
    async fn claim_for(&self, req: &ClaimRequest<'_>) -> Result<Vec<ClaimedRun>> {
        Ok(self.claim_paced(req).await?.runs)
    }
    /// [`Store::claim_for`], saying also when a rate limit that held runs back allows the next
    /// start.
    async fn claim_paced(&self, req: &ClaimRequest<'_>) -> Result<Claimed>;
    /// Every flow-control limit set (of `scope`, or of every scope), with its runs in flight,
    /// its due tasks and those it holds back at `now`.
    async fn limits(&self, now: DateTime<Utc>, scope: Option<LimitScope>) -> Result<Vec<LimitInfo>>;
    /// The keys with unfinished tasks (of `queue`, or of every queue) at `now`, the
    /// longest-waiting first, at most `limit`.
    async fn keys(&self, queue: Option<&str>, now: DateTime<Utc>, limit: u32) -> Result<Vec<KeyInfo>>;
    /// The flow-control limits in force, as workers apply them.
    async fn limits_in_force(&self) -> Result<RunLimits>;
    /// Write the limit on `target` of `scope` as `edit` says (nothing left limited: take it
    /// out), for every worker from its next claim; a file's (`by` the file) does not overwrite
    /// one an operator set.
    async fn set_limit(
        &self,
        scope: LimitScope,
        target: &str,
        edit: LimitEdit<'_>,
        by: LimitSetBy,
        now: DateTime<Utc>,
    ) -> Result<LimitWritten>;
    /// Set the limits of the operator's file (a worker's start); the names of those kept as an
    /// operator set them.
    async fn set_file_limits(&self, limits: &RunLimits, now: DateTime<Utc>) -> Result<Vec<String>>;
    /// Progress of running runs, in order: a later report of a run overrides an earlier one;
    /// a run no longer running is left as it is.
    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()>;
    /// Apply how claimed runs leave their worker, all in one transaction: each
    /// [`RunRelease::Ended`] as [`Store::finish_runs`], each [`RunRelease::PutBack`] as
    /// [`Store::put_back`], each [`RunRelease::Stopped`] as [`Store::keep_stopped`].
    async fn release_runs(&self, releases: &[RunRelease<'_>]) -> Result<Released>;
    /// Write finished runs and update their tasks, in one transaction. A run that is no longer
    /// `running` (timed out meanwhile) is left as it is.
    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> Result<()> {
        let releases: Vec<RunRelease<'_>> = outcomes.iter().map(RunRelease::Ended).collect();
        self.release_runs(&releases).await.map(drop)
    }
    /// Whether a scheduled task of `queues` not paused is due, a run is running (on any runner),
    /// or a failed task awaits its retry: what keeps a draining worker going.
    async fn has_due_work(&self, queues: &[String], now: DateTime<Utc>) -> Result<bool> {
        self.has_due_work_for(queues, None, now).await
    }
    /// [`Store::has_due_work`], counting scheduled and retry-awaiting tasks of `handlers` only.
    async fn has_due_work_for(
        &self,
        queues: &[String],
        handlers: Option<&[String]>,
        now: DateTime<Utc>,
    ) -> Result<bool>;

    // --- queues ----------------------------------------------------------------------------

    /// Pause a queue: workers claim nothing more from it (they finish what they run), until it
    /// is resumed. Kept in the database, so it holds across restarts and machines. False when
    /// it was paused already.
    async fn pause_queue(&self, queue: &str, now: DateTime<Utc>) -> Result<bool>;
    /// Resume a paused queue. False when it was not paused.
    async fn resume_queue(&self, queue: &str) -> Result<bool>;
    /// The paused queues, by name.
    async fn paused_queues(&self) -> Result<Vec<String>>;
    /// Every queue that holds scheduled or running tasks, or is paused, by name.
    async fn queues(&self, now: DateTime<Utc>) -> Result<Vec<QueueInfo>>;

    // --- periodic tasks (see [`crate::schedule`]) --------------------------------------------

    /// Create a schedule; its first slot is the first after `now`.
    async fn add_schedule(&self, schedule: &NewSchedule, now: DateTime<Utc>) -> Result<()>;
    /// Every schedule, by name.
    async fn schedules(&self) -> Result<Vec<Schedule>>;
    /// False when there is no such schedule; an error for one declared in the configuration file
    /// (the overseer keeps those in line with the file).
    async fn remove_schedule(&self, name: &str) -> Result<bool>;
    /// Pause (`Some(now)`) or resume (None) a schedule; false when there is no such schedule.
    async fn set_schedule_paused(&self, name: &str, paused_on: Option<DateTime<Utc>>) -> Result<bool>;
    /// Queue the due slot of every schedule not paused, each slot once however many callers
    /// race; the tasks queued, with their schedules' names.
    async fn queue_due_slots(&self, now: DateTime<Utc>) -> Result<Vec<(String, TaskId)>>;
    /// Make the declared schedules exactly `declared` (the operator's configuration file's):
    /// add, update and remove declared ones, in one transaction; schedules made by hand are
    /// left alone (one of a declared name is taken over).
    async fn sync_schedules(&self, declared: &[NewSchedule], now: DateTime<Utc>) -> Result<crate::schedule::Synced>;
    /// What [`Store::sync_schedules`] would change, without changing it.
    async fn plan_schedules(&self, declared: &[NewSchedule], now: DateTime<Utc>) -> Result<crate::schedule::Synced>;
    /// Queue a task of the schedule now, outside its slots.
    async fn trigger_schedule(&self, name: &str, now: DateTime<Utc>) -> Result<TaskId>;

    // --- maintenance -----------------------------------------------------------------------

    /// Mark runners `timeout`, and their running runs with them. Returns the runs timed out.
    async fn time_out_runners(&self, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64>;
    /// Time out, as lost, up to `limit` runs still running under a runner that is no longer
    /// running (none should be; see the liveness service). Returns how many.
    async fn time_out_orphaned_runs(&self, now: DateTime<Utc>, limit: u32) -> Result<u64>;
    /// Time out running runs whose `timeout_on` is at or before `cutoff`, as finished at `now`.
    /// Returns how many.
    async fn time_out_overdue_runs(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>, limit: u32) -> Result<u64>;
    /// Return running runs that did not run to their end (no slot, no host resource, a stop)
    /// to the queue, each due at its time, without counting a failure, in one transaction: each
    /// task is `scheduled` again, as before the claim. The runs put back; one no longer running
    /// (ended elsewhere) is not among them.
    async fn put_back(&self, runs: &[(RunId, DateTime<Utc>)]) -> Result<Vec<RunId>> {
        let releases: Vec<RunRelease<'_>> = runs.iter().map(|&(run, at)| RunRelease::PutBack { run, at }).collect();
        Ok(self.release_runs(&releases).await?.put_back)
    }
    /// Keep what a run stopped from outside logged and used, on its row ended elsewhere (cancelled,
    /// timed out). False when the row is running or scheduled again, or already has them.
    async fn keep_stopped(&self, run: &StoppedRun) -> Result<bool> {
        Ok(!self.release_runs(&[RunRelease::Stopped(run)]).await?.kept.is_empty())
    }
    /// The runs `running` on this runner (what its heartbeat checks its in-flight runs against).
    async fn running_runs_of(&self, runner: RunnerId) -> Result<Vec<RunId>>;
    /// Failed tasks (error/timeout, not given up) whose next step is not decided yet.
    async fn retry_candidates(&self, limit: u32) -> Result<Vec<RetryCandidate>>;
    /// Apply the overseer's decisions: retry (scheduled again) or give up, each guarded by the task's state.
    async fn apply_retry_plans(&self, plans: &[RetryPlan], now: DateTime<Utc>) -> Result<()>;
    /// Give up (as `handler-not-found`) up to `limit` scheduled tasks due at or before `due_before`
    /// whose handler is not in `served`. Returns how many.
    async fn give_up_unserved(
        &self,
        served: &[String],
        due_before: DateTime<Utc>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64>;
    /// Delete up to `batch` successful or cancelled tasks finished before `before`, with their runs.
    async fn rotate(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;
    /// Delete at most `batch` rows of keys' last turns (fair shares) older than `before`; how
    /// many.
    async fn prune_key_turns(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;
    /// Keys of queues weighed by fuel whose due tasks' turns were laid by another fuel a run than
    /// their runs burn now (more than twice, or under half; or not yet known), at most `limit`.
    async fn keys_to_relay(&self, limit: u32) -> Result<Vec<KeyToRelay>>;
    /// Lay at most `limit` of `key`'s due tasks' turns again by its stride now, going on from
    /// `at` (None: from the start), `batch` a transaction: how many were read and moved, and
    /// where to go on (None: done).
    async fn relay_turns(
        &self,
        key: &KeyToRelay,
        at: Option<RelayCursor>,
        now: DateTime<Utc>,
        limit: u32,
        batch: u32,
    ) -> Result<Relaid>;
    /// Give at most `batch` tasks queued in SQL with a key or `after` their turns and waits
    /// (`store/transitions/intake.rs`); how many were taken in.
    async fn take_in_arrivals(&self, now: DateTime<Utc>, batch: u32) -> Result<u64>;
    /// Merge up to `batch` rows of statistics of minutes before `before` into one row per
    /// handler, queue and hour; the rows merged (0: nothing left to merge). The statistics read
    /// the same after, but for the runs of the last minute and hour, which must be after `before`.
    async fn compact_stats(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;
    /// Delete every statistic of `queue` (a queue whose tasks are gone and whose counts should
    /// go with them, as `taskhost bench` leaves nothing behind); the rows deleted.
    async fn forget_stats(&self, queue: &str) -> Result<u64>;

    /// Changes each time this store (this process) queued tasks: added, replayed, or a
    /// schedule's slot. A worker of this process on this store claims at once rather than at its
    /// next poll, on every database (tasks queued by other processes wait for [`Store::wakeups`]
    /// or the poll). None: no such signal.
    fn added_here(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// The newest task's id (0 when there is none): one index lookup, which an idle worker
    /// without [`Store::wakeups`] takes often to claim tasks other processes add without waiting
    /// for its poll.
    async fn newest_task_id(&self) -> Result<TaskId>;

    /// Channels woken soon after tasks are added, or running tasks cancelled, anywhere
    /// (PostgreSQL: LISTEN/NOTIFY), so a worker need not wait for its next poll. None: poll only.
    async fn wakeups(&self) -> Result<Option<Wakeups>> {
        Ok(None)
    }

    /// Take or renew the lease `name` for `holder` until `now + ttl`. True when `holder` has it:
    /// it was free, expired, or already its own.
    async fn try_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool>;

    /// Hand the lease `name` back: it expires at `now` if `holder` still holds it (another's is
    /// left alone), so another's next try takes it. True when it was `holder`'s.
    async fn release_lease(&self, name: &str, holder: &str, now: DateTime<Utc>) -> Result<bool>;
}

/// A store shared by the parts of a process.
pub type SharedStore = Arc<dyn Store>;

/// What [`Store::sql_add_check`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlAddCheck {
    /// `taskhost_add` in SQL refuses a handler not deployed into the database.
    pub deployed_only: bool,
    /// This process's sessions are marked as the host's.
    pub host_marked: bool,
}

/// What [`Store::set_sql_data_limit`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataLimitWrite {
    /// The database held this limit already: nothing was written.
    Unchanged,
    /// It held this other limit, written over.
    Replaced(u64),
    /// It held none (the row missing, or holding no number): the limit was written.
    WasUnset,
}
