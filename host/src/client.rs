//! Queueing and inspecting tasks: what applications and the CLI call.
//!
//! ```no_run
//! # async fn demo(client: taskhost::Client) -> taskhost::Result<()> {
//! use taskhost::NewTask;
//! let added = client.add(NewTask::new("word-count", r#"{"text": "a b c"}"#).with_priority(-1)).await?;
//! let (task, runs) = client.show(added.id).await?;
//! # Ok(()) }
//! ```
//!
//! To queue tasks inside your own SQLite transaction, validate with [`Client::validate`] and
//! write with [`crate::store::sqlite::SqliteStore::add_tasks_in`] on your transaction.

mod deploys;
mod schedules;

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::model::*;
use crate::plugins::Catalog;
use crate::store::SharedStore;

/// The most keys [`Client::keys`] lists at once.
pub const MAX_KEYS_LISTED: u32 = 1_000;

/// The same maximum length on every database, and no NUL byte (PostgreSQL refuses it).
fn check_text(what: &'static str, value: &str, max: usize) -> Result<()> {
    text_refusal(value, max).map_or(Ok(()), |reason| Err(Error::invalid(what, reason)))
}

/// The filters of a read: each at most [`Client::MAX_FILTER_BYTES`], without NUL.
fn check_filters(filters: &[(&'static str, Option<&str>)]) -> Result<()> {
    for (what, value) in filters {
        if let Some(v) = value {
            check_text(what, v, Client::MAX_FILTER_BYTES)?;
        }
    }
    Ok(())
}

/// [`NewTask::check`]'s refusal as the client's error.
fn refused(e: Invalid) -> Error {
    match e {
        Invalid::Json(e) => Error::InvalidJson(e),
        Invalid::Field { what, reason } => Error::Invalid { what, reason },
    }
}

/// Queueing and reading tasks, each input checked first (JSON, handler, sizes): what the CLI,
/// the API and a library user call.
#[derive(Debug, Clone)]
pub struct Client {
    store: SharedStore,
    catalog: Arc<Catalog>,
    clock: SharedClock,
}

impl std::fmt::Debug for dyn crate::store::Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({:?})", self.backend())
    }
}

impl Client {
    /// The longest text a filter of a read (list, statistics) may hold.
    pub const MAX_FILTER_BYTES: usize = 1024;
    /// The shortest run timeout a task may have.
    pub const MIN_RUN_TIMEOUT: std::time::Duration = MIN_RUN_TIMEOUT;
    /// The longest run timeout a task may have: a year (365.25 days).
    pub const MAX_RUN_TIMEOUT: std::time::Duration = MAX_RUN_TIMEOUT;

    /// A client over `store`, checking handlers against `catalog`.
    pub fn new(store: SharedStore, catalog: Arc<Catalog>, clock: SharedClock) -> Self {
        Client { store, catalog, clock }
    }

    /// The time as this client reads it: the database server's, on a server.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The store underneath.
    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    /// The handlers this client checks tasks against.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Check tasks before they are written: the data must be valid JSON within the operator's
    /// size limit and the handler a loadable plugin implementing the task-handler world.
    pub async fn validate(&self, tasks: &[NewTask]) -> Result<()> {
        let mut handlers = HashSet::new();
        let max_data_bytes = self.catalog.policy().max_data_bytes;
        for t in tasks {
            t.check(max_data_bytes).map_err(refused)?;
            handlers.insert(t.handler.clone());
        }
        if tasks.iter().any(|t| t.version.is_some()) {
            self.pin_versions(&mut tasks.to_vec()).await?;
        }
        for name in handlers {
            if self.catalog.known_deployed(&name) {
                continue;
            }
            let catalog = self.catalog.clone();
            // Checked from its types, not compiled: a machine that only queues never compiles.
            let checked = tokio::task::spawn_blocking({
                let name = name.clone();
                move || catalog.check(&name)
            })
            .await
            .map_err(|e| Error::Engine(format!("plugin loader panicked: {e}")))?;
            if let Err(e) = checked {
                // Deployed to the database (checked then): the plugins directory's file, if any,
                // is not what runs.
                if !crate::model::valid_handler_name(&name) || self.store.releases(&name, 1).await?.is_empty() {
                    return Err(match e {
                        Error::UnknownHandler { name, dir } => Error::NotDeployed { name, dir },
                        e => e,
                    });
                }
                self.catalog.note_deployed(&name);
            }
        }
        Ok(())
    }

    /// A task's data: at most the operator's `[tasks] max_data_bytes` and valid JSON.
    fn check_data(&self, data: &str) -> Result<()> {
        NewTask::new("-", data).check(self.catalog.policy().max_data_bytes).map_err(refused)
    }

    /// [`Client::validate`], and when it refuses, which task it refuses (the first refused alone,
    /// None when none is) and why: a batch's error can then name its line or index.
    pub async fn validate_each(&self, tasks: &[NewTask]) -> std::result::Result<(), (Option<usize>, Error)> {
        let Err(all) = self.validate(tasks).await else {
            return Ok(());
        };
        for (i, t) in tasks.iter().enumerate() {
            if let Err(e) = self.validate(std::slice::from_ref(t)).await {
                return Err((Some(i), e));
            }
        }
        Err((None, all))
    }

    /// Queue one task. Returns its id (or, with a unique key held by an unfinished task, that
    /// task's id and `created: false`).
    pub async fn add(&self, task: NewTask) -> Result<Added> {
        let mut added = self.add_many(vec![task]).await?;
        added.pop().ok_or_else(|| Error::invalid("task", "nothing was added"))
    }

    /// Queue many tasks in one transaction: all or nothing.
    pub async fn add_many(&self, mut tasks: Vec<NewTask>) -> Result<Vec<Added>> {
        self.validate(&tasks).await?;
        self.pin_versions(&mut tasks).await?;
        let added = self.store.add_tasks(&tasks, self.clock.now()).await?;
        let metrics = crate::metrics::global();
        for (task, a) in tasks.iter().zip(&added) {
            if a.created {
                metrics.add(crate::metrics::Counter::TasksAdded, &[("queue", &task.queue)], 1);
            }
        }
        Ok(added)
    }

    /// A task with its runs, oldest run first.
    pub async fn show(&self, id: TaskId) -> Result<(Task, Vec<Run>)> {
        let Some(task) = self.store.get_task(id).await? else {
            return self.or_gone(Err(Error::TaskNotFound(id))).await;
        };
        let runs = self.store.runs_of(id).await?;
        Ok((task, runs))
    }

    /// `answer`, or, when it is that a task is not there and the task's success deleted it (its
    /// queue's `on_success = delete`), [`Error::TaskDeleted`] with its end: a caller told "not
    /// found" could not tell a task that succeeded from an id never given. A lookup that fails
    /// answers its own error (the API's 503), not "not found", which may be untrue.
    async fn or_gone<T>(&self, answer: Result<T>) -> Result<T> {
        let Err(Error::TaskNotFound(id)) = answer else { return answer };
        let look = crate::store::Look { ids: vec![id], limit: 1, ..Default::default() };
        // (Read from the ends where the task is not there; a task is never queued again once gone.)
        let found = match self.store.glimpse(&look).await {
            Ok(g) => g.asked.into_iter().find(|b| b.id == id && b.state == TaskState::Succeeded),
            Err(lookup) => return Err(lookup),
        };
        Err(match found {
            Some(crate::store::Brief { queue, handler, finished_on: Some(finished_on), .. }) => {
                Error::TaskDeleted { id, queue, handler, finished_on }
            }
            _ => Error::TaskNotFound(id),
        })
    }

    /// The tasks a task runs after (`after`), each with its state, in id order.
    pub async fn dependencies(&self, id: TaskId) -> Result<Vec<crate::model::Dependency>> {
        self.store.dependencies(id).await
    }

    /// Tasks as `filter` selects them; a filter's text is at most [`Self::MAX_FILTER_BYTES`].
    pub async fn list(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        let (queue, handler, text) = (filter.queue.as_deref(), filter.handler.as_deref(), filter.text.as_deref());
        check_filters(&[("queue", queue), ("handler", handler), ("text", text)])?;
        self.store.list_tasks(filter).await
    }

    /// Replay a finished task (a dead letter, a cancelled task, or a succeeded one to run it again):
    /// its failure count is reset and it is scheduled now; the attempt its next run will be.
    pub async fn retry(&self, id: TaskId) -> Result<u32> {
        self.or_gone(self.store.retry_task(id, None, self.clock.now()).await).await
    }

    /// Replay a finished task with new data (checked as JSON first).
    pub async fn retry_with_data(&self, id: TaskId, data: &str) -> Result<u32> {
        self.check_data(data)?;
        self.or_gone(self.store.retry_task(id, Some(data), self.clock.now()).await).await
    }

    /// Send the signal `name` to a task with `data` (a JSON document, checked as task data is):
    /// kept until a run of it reads it; a task awaiting it is due at once. Refused for a
    /// finished task, or one holding too many signals no run has read.
    pub async fn signal(&self, id: TaskId, name: &str, data: &str) -> Result<SignalSent> {
        check_signal_name(name).map_err(|reason| Error::invalid("signal name", reason))?;
        self.check_data(data)?;
        if data.trim() == "null" {
            // A wait that timed out answers none: null data would read the same.
            return Err(Error::invalid("signal data", "null reads as no signal: send {} or another value"));
        }
        self.or_gone(self.store.signal(id, name, data, self.clock.now()).await).await
    }

    /// A task's signals, the newest 100, oldest first.
    pub async fn signals(&self, id: TaskId) -> Result<Vec<Signal>> {
        self.store.signals_of(id).await
    }

    /// Replay every dead letter (or cancelled task) of a queue and/or handler; how many.
    pub async fn replay(&self, which: crate::store::Replay, filter: &crate::store::BulkFilter) -> Result<u64> {
        self.store.replay(which, filter, self.clock.now()).await
    }

    /// Cancel these tasks: a scheduled one never runs, a running one is stopped by its worker
    /// within about a second (at once on PostgreSQL). The ids cancelled: finished or unknown
    /// ones are left as they are.
    pub async fn cancel(&self, ids: &[TaskId]) -> Result<Vec<TaskId>> {
        self.store.cancel_tasks(ids, self.clock.now()).await
    }

    /// [`Client::cancel`], and every unfinished task under these: their children, the children's
    /// children, ... (a finished task's too). The ids cancelled, those of `ids` first.
    pub async fn cancel_with_children(&self, ids: &[TaskId]) -> Result<Vec<TaskId>> {
        self.store.cancel_with_children(ids, self.clock.now()).await
    }

    /// Cancel every unfinished task (waiting, running or both) of a queue and/or handler.
    pub async fn cancel_matching(
        &self,
        filter: &crate::store::BulkFilter,
        which: crate::store::Unfinished,
    ) -> Result<crate::store::Cancelled> {
        self.store.cancel_matching(filter, which, self.clock.now()).await
    }

    /// Delete finished tasks (succeeded, dead letters, or both) of a queue and/or handler that
    /// finished more than `older_than` ago, with their runs; how many.
    pub async fn delete_finished(
        &self,
        which: crate::store::Finished,
        filter: &crate::store::BulkFilter,
        older_than: std::time::Duration,
    ) -> Result<u64> {
        let before = self.clock.now() - chrono::Duration::from_std(older_than).unwrap_or(chrono::Duration::MAX);
        self.store.delete_finished(which, filter, before).await
    }

    /// Statistics per handler and queue (of one handler and/or queue): tasks by status, runs by
    /// how they ended, failure rate, processing time, fuel, first and latest run, throughput.
    pub async fn stats(&self, handler: Option<&str>, queue: Option<&str>) -> Result<Vec<crate::stats::HandlerStats>> {
        check_filters(&[("handler", handler), ("queue", queue)])?;
        self.store.stats(handler, queue, self.clock.now()).await
    }

    /// The runs ended in each of the last `minutes` minutes (this one included), oldest first.
    pub async fn throughput(
        &self,
        handler: Option<&str>,
        queue: Option<&str>,
        minutes: u32,
    ) -> Result<Vec<crate::stats::Minute>> {
        check_filters(&[("handler", handler), ("queue", queue)])?;
        self.store.throughput(handler, queue, self.clock.now(), minutes).await
    }

    /// Pause a queue: workers claim nothing more from it and finish what they run. False when
    /// it was paused already.
    pub async fn pause_queue(&self, queue: &str) -> Result<bool> {
        if let Some(reason) = crate::model::queue_refusal(queue) {
            return Err(Error::invalid("queue", reason));
        }
        self.store.pause_queue(queue, self.clock.now()).await
    }

    /// Resume a paused queue. False when it was not paused.
    pub async fn resume_queue(&self, queue: &str) -> Result<bool> {
        // Any name paused before the rule (none is refused here), bounded as a stored text.
        check_text("queue", queue, MAX_QUEUE_BYTES)?;
        self.store.resume_queue(queue).await
    }

    /// Every queue that holds unfinished tasks, is paused or has a flow-control limit, by name:
    /// depth, running, lag, pause, limits (and what each holds back now) and the live workers
    /// that claim from it.
    pub async fn queues(&self) -> Result<Vec<crate::store::QueueInfo>> {
        let now = self.clock.now();
        let mut queues = self.store.queues(now).await?;
        let limits = self.store.limits_in_force().await?.queues;
        let unlisted = limits.keys().filter(|name| !queues.iter().any(|q| &q.name == *name)).count();
        let live = if unlisted > 0 { self.store.live_runners().await? } else { Vec::new() };
        for (name, limit) in &limits {
            let rate = limit.rate.map(|r| r.to_string());
            match queues.iter_mut().find(|q| &q.name == name) {
                Some(q) => (q.max_running, q.rate_limit) = (limit.max_running, rate),
                None => queues.push(crate::store::QueueInfo {
                    max_running: limit.max_running,
                    rate_limit: rate,
                    served_by: live.iter().filter(|r| r.claims_from(name)).count() as u32,
                    ..crate::store::QueueInfo::empty(name.clone())
                }),
            }
        }
        if !limits.is_empty() {
            for l in &self.store.limits(now, Some(LimitScope::Queue)).await? {
                if let Some(q) = queues.iter_mut().find(|q| q.name == l.target) {
                    q.held_back = Some(l.held_back);
                }
            }
        }
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(queues)
    }

    /// The keys with unfinished tasks (of `queue`, or of every queue), the longest-waiting
    /// first, at most `limit` (at most [`MAX_KEYS_LISTED`]): each one's due, later and running
    /// tasks, how long it has waited, its weight.
    pub async fn keys(&self, queue: Option<&str>, limit: u32) -> Result<Vec<crate::store::KeyInfo>> {
        check_filters(&[("queue", queue)])?;
        self.store.keys(queue, self.clock.now(), limit.clamp(1, MAX_KEYS_LISTED)).await
    }

    /// Every flow-control limit set (queues' and handlers'), with its runs in flight and due
    /// tasks.
    pub async fn limits(&self) -> Result<Vec<crate::store::LimitInfo>> {
        self.store.limits(self.clock.now(), None).await
    }

    /// Change the limit `name` (`queue:NAME` or `handler:NAME`) live, for every worker within a
    /// second: `change` says what to set and what to take out, the rest stays. What it is now.
    pub async fn set_limit(&self, name: &str, change: &LimitChange) -> Result<Limit> {
        let (scope, target) = LimitScope::parse_name(name).map_err(|e| Error::invalid("limit", e))?;
        let edit = crate::store::LimitEdit::Change(change);
        let by = crate::store::LimitSetBy::Operator;
        Ok(self.store.set_limit(scope, target, edit, by, self.clock.now()).await?.now)
    }

    /// Take the limit `name` out (a worker started later with it in its file sets it again);
    /// false when there was none.
    pub async fn clear_limit(&self, name: &str) -> Result<bool> {
        let (scope, target) = LimitScope::parse_name(name).map_err(|e| Error::invalid("limit", e))?;
        let edit = crate::store::LimitEdit::Set(Limit::default());
        let by = crate::store::LimitSetBy::Operator;
        Ok(self.store.set_limit(scope, target, edit, by, self.clock.now()).await?.before.is_some())
    }
}
