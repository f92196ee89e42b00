//! [`Store`] for [`SqlStore`]: each method hands on to the function in this module's files that does it.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::dialect::{ClaimRequest, Claimed, Dialect};
use crate::store::interface::Store;
use crate::store::types::*;
use crate::store::{stats, transitions};

use super::*;
use crate::error::Result;
use crate::model::*;
use crate::schedule::{NewSchedule, Schedule};

#[async_trait]
impl<D: Dialect> Store for SqlStore<D> {
    fn backend(&self) -> Backend {
        D::BACKEND
    }

    async fn migrate(&self) -> Result<Vec<String>> {
        tables::migrate(&self.db).await
    }

    async fn check_migrated(&self) -> Result<()> {
        tables::check_migrated(&self.db).await
    }

    async fn ping(&self) -> Result<()> {
        tables::ping(&self.db).await
    }

    async fn set_sql_data_limit(&self, bytes: u64) -> Result<crate::store::interface::DataLimitWrite> {
        settings::set_sql_data_limit(&self.db, bytes).await
    }

    async fn set_sql_add_handlers(&self, deployed_only: bool) -> Result<bool> {
        sql_add_check::set(&self.db, deployed_only).await
    }

    async fn sql_add_check(&self) -> Result<crate::store::interface::SqlAddCheck> {
        sql_add_check::read(&self.db).await
    }

    async fn add_tasks(&self, tasks: &[NewTask], now: DateTime<Utc>) -> Result<Vec<Added>> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        self.telling(self.db.add_tasks(tasks, now).await, |added| added.iter().any(|a| a.created))
    }

    async fn get_task(&self, id: TaskId) -> Result<Option<Task>> {
        tasks::get(&self.db, None, id).await
    }

    async fn keep_tasks(&self, ids: &[TaskId]) -> Result<u64> {
        transitions::ends::keep(&self.db, None, ids, true).await
    }

    async fn runs_of(&self, task_id: TaskId) -> Result<Vec<Run>> {
        tasks::runs_of(&self.db, task_id).await
    }

    async fn change_marker(&self) -> Result<Option<u64>> {
        self.db.change_marker().await
    }

    fn commit_bell(&self) -> Option<crate::store::bell::CommitBell> {
        self.db.commit_bell()
    }

    async fn glimpse(&self, look: &Look) -> Result<Glimpse> {
        events::glimpse(&self.db, look).await
    }

    async fn final_details(&self, ids: &[TaskId]) -> Result<Vec<TaskDetail>> {
        details::final_details(&self.db, ids).await
    }

    async fn dependencies(&self, task_id: TaskId) -> Result<Vec<Dependency>> {
        transitions::deps::of(&self.db, task_id).await
    }

    async fn dependency_results(&self, task_id: TaskId, max_bytes: usize) -> Result<Vec<DependencyResults>> {
        transitions::deps::results_of(&self.db, task_id, max_bytes).await
    }

    async fn signal(&self, task_id: TaskId, name: &str, data: &str, now: DateTime<Utc>) -> Result<SignalSent> {
        self.telling(transitions::signals::send(&self.db, task_id, name, data, now).await, |sent| sent.woke)
    }

    async fn signal_lookup(&self, task_id: TaskId, name: &str) -> Result<SignalLookup> {
        transitions::signals::lookup(&self.db, task_id, name).await
    }

    async fn signals_of(&self, task_id: TaskId) -> Result<Vec<Signal>> {
        transitions::signals::of(&self.db, task_id).await
    }

    async fn list_tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>> {
        tasks::list(&self.db, filter).await
    }

    async fn counts(&self) -> Result<QueueCounts> {
        tasks::counts(&self.db).await
    }

    async fn retry_task(&self, id: TaskId, data: Option<&str>, now: DateTime<Utc>) -> Result<u32> {
        self.telling(tasks::replay(&self.db, id, data, now).await, |_| true)
    }

    async fn stats(
        &self,
        handler: Option<&str>,
        queue: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::stats::HandlerStats>> {
        stats::read(&self.db, handler, queue, now).await
    }

    async fn throughput(
        &self,
        handler: Option<&str>,
        queue: Option<&str>,
        now: DateTime<Utc>,
        minutes: u32,
    ) -> Result<Vec<crate::stats::Minute>> {
        stats::per_minute(&self.db, handler, queue, now, minutes).await
    }

    async fn replay(&self, which: Replay, filter: &BulkFilter, now: DateTime<Utc>) -> Result<u64> {
        self.telling(bulk::replay(&self.db, which, filter, now).await, |replayed| *replayed > 0)
    }

    async fn cancel_tasks(&self, ids: &[TaskId], now: DateTime<Utc>) -> Result<Vec<TaskId>> {
        cancel::by_ids(&self.db, ids, now).await
    }

    async fn cancel_with_children(&self, ids: &[TaskId], now: DateTime<Utc>) -> Result<Vec<TaskId>> {
        cancel::with_children(&self.db, ids, now).await
    }

    async fn cancel_matching(&self, filter: &BulkFilter, which: Unfinished, now: DateTime<Utc>) -> Result<Cancelled> {
        cancel::matching(&self.db, filter, which, now).await
    }

    async fn delete_finished(&self, which: Finished, filter: &BulkFilter, before: DateTime<Utc>) -> Result<u64> {
        bulk::delete_finished(&self.db, which, filter, before).await
    }

    async fn register_runner(&self, pid: u32, host: &str, now: DateTime<Utc>, limit: u32) -> Result<RunnerId> {
        runners::register(&self.db, pid, host, now, limit).await
    }

    async fn server_time(&self) -> Result<Option<DateTime<Utc>>> {
        runners::server_time(&self.db).await
    }

    async fn heartbeat(&self, runner: RunnerId, now: DateTime<Utc>) -> Result<bool> {
        runners::heartbeat(&self.db, runner, now).await
    }

    async fn finish_runner(&self, runner: RunnerId, status: RunnerStatus, now: DateTime<Utc>) -> Result<()> {
        runners::finish(&self.db, runner, status, now).await
    }

    async fn live_runners(&self) -> Result<Vec<Runner>> {
        runners::live(&self.db).await
    }

    async fn runners_seen_since(&self, since: DateTime<Utc>) -> Result<Vec<Runner>> {
        runners::seen_since(&self.db, since).await
    }

    async fn set_runner_queues(&self, runner: RunnerId, queues: &[String]) -> Result<()> {
        runners::set_queues(&self.db, runner, queues).await
    }

    async fn scheduled_queues(&self, limit: u32) -> Result<Vec<String>> {
        queues::scheduled_names(&self.db, limit).await
    }

    async fn set_runner_handlers(&self, runner: RunnerId, handlers: &Served) -> Result<()> {
        runners::set_handlers(&self.db, runner, handlers).await
    }

    async fn claim_paced(&self, req: &ClaimRequest<'_>) -> Result<Claimed> {
        if req.is_empty() {
            return Ok(Claimed::default());
        }
        limits::claim(&self.db, req, &self.deep).await
    }

    async fn limits(&self, now: DateTime<Utc>, scope: Option<LimitScope>) -> Result<Vec<LimitInfo>> {
        limit_rows::list(&self.db, now, scope).await
    }

    async fn keys(&self, queue: Option<&str>, now: DateTime<Utc>, limit: u32) -> Result<Vec<KeyInfo>> {
        keys::list(&self.db, queue, now, limit).await
    }

    async fn limits_in_force(&self) -> Result<RunLimits> {
        limit_rows::in_force(&self.db).await
    }

    async fn set_limit(
        &self,
        scope: LimitScope,
        target: &str,
        edit: LimitEdit<'_>,
        by: LimitSetBy,
        now: DateTime<Utc>,
    ) -> Result<LimitWritten> {
        limit_rows::set(&self.db, scope, target, edit, by, now).await
    }

    async fn set_file_limits(&self, limits: &RunLimits, now: DateTime<Utc>) -> Result<Vec<String>> {
        limit_rows::set_from_file(&self.db, limits, now).await
    }

    async fn record_progress(&self, updates: &[ProgressUpdate]) -> Result<()> {
        if updates.is_empty() {
            return Ok(());
        }
        self.db.record_progress(&runs::coalesce_progress(updates)).await
    }

    async fn release_runs(&self, releases: &[RunRelease<'_>]) -> Result<Released> {
        transitions::runs::release(&self.db, releases).await
    }

    async fn pause_queue(&self, queue: &str, now: DateTime<Utc>) -> Result<bool> {
        queues::pause(&self.db, queue, now).await
    }

    async fn resume_queue(&self, queue: &str) -> Result<bool> {
        self.telling(queues::resume(&self.db, queue).await, |resumed| *resumed)
    }

    async fn paused_queues(&self) -> Result<Vec<String>> {
        queues::paused(&self.db).await
    }

    async fn queues(&self, now: DateTime<Utc>) -> Result<Vec<QueueInfo>> {
        queues::list(&self.db, now).await
    }

    async fn add_schedule(&self, schedule: &NewSchedule, now: DateTime<Utc>) -> Result<()> {
        schedules::add(&self.db, schedule, now).await
    }

    async fn schedules(&self) -> Result<Vec<Schedule>> {
        schedules::list(&self.db).await
    }

    async fn remove_schedule(&self, name: &str) -> Result<bool> {
        schedules::remove(&self.db, name).await
    }

    async fn set_schedule_paused(&self, name: &str, paused_on: Option<DateTime<Utc>>) -> Result<bool> {
        schedules::set_paused(&self.db, name, paused_on).await
    }

    async fn queue_due_slots(&self, now: DateTime<Utc>) -> Result<Vec<(String, TaskId)>> {
        self.telling(schedules::queue_due(&self.db, now).await, |queued| !queued.is_empty())
    }

    async fn sync_schedules(&self, declared: &[NewSchedule], now: DateTime<Utc>) -> Result<crate::schedule::Synced> {
        schedules::sync(&self.db, declared, now, true).await
    }

    async fn plan_schedules(&self, declared: &[NewSchedule], now: DateTime<Utc>) -> Result<crate::schedule::Synced> {
        schedules::sync(&self.db, declared, now, false).await
    }

    async fn trigger_schedule(&self, name: &str, now: DateTime<Utc>) -> Result<TaskId> {
        self.telling(schedules::trigger(&self.db, name, now).await, |_| true)
    }

    async fn has_due_work_for(
        &self,
        queues: &[String],
        handlers: Option<&[String]>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        runs::has_due_work(&self.db, queues, handlers, now).await
    }

    async fn time_out_runners(&self, runners: &[RunnerId], now: DateTime<Utc>) -> Result<u64> {
        runners::time_out(&self.db, runners, now).await
    }

    async fn time_out_orphaned_runs(&self, now: DateTime<Utc>, limit: u32) -> Result<u64> {
        runners::time_out_orphans(&self.db, now, limit).await
    }

    async fn time_out_overdue_runs(&self, cutoff: DateTime<Utc>, now: DateTime<Utc>, limit: u32) -> Result<u64> {
        runs::time_out_overdue(&self.db, cutoff, now, limit).await
    }

    async fn running_runs_of(&self, runner: RunnerId) -> Result<Vec<RunId>> {
        runs::running_of(&self.db, runner).await
    }

    async fn retry_candidates(&self, limit: u32) -> Result<Vec<RetryCandidate>> {
        upkeep::retry_candidates(&self.db, limit).await
    }

    async fn apply_retry_plans(&self, plans: &[RetryPlan], now: DateTime<Utc>) -> Result<()> {
        upkeep::apply_retry_plans(&self.db, plans, now).await
    }

    async fn give_up_unserved(
        &self,
        served: &[String],
        due_before: DateTime<Utc>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64> {
        upkeep::give_up_unserved(&self.db, served, due_before, now, limit).await
    }

    async fn prune_key_turns(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        keys::prune_turns(&self.db, before, batch).await
    }

    async fn keys_to_relay(&self, limit: u32) -> Result<Vec<KeyToRelay>> {
        relay::keys_to_relay(&self.db, limit).await
    }

    async fn relay_turns(
        &self,
        key: &KeyToRelay,
        at: Option<RelayCursor>,
        now: DateTime<Utc>,
        limit: u32,
        batch: u32,
    ) -> Result<Relaid> {
        relay::relay(&self.db, key, at, now, (limit, batch)).await
    }

    async fn take_in_arrivals(&self, now: DateTime<Utc>, batch: u32) -> Result<u64> {
        transitions::intake::take_in(&self.db, now, batch).await
    }

    async fn rotate(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        bulk::rotate_batch(&self.db, before, batch).await
    }

    async fn compact_stats(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        stats::compact(&self.db, before, batch).await
    }

    async fn forget_stats(&self, queue: &str) -> Result<u64> {
        stats::forget(&self.db, queue).await
    }

    async fn newest_task_id(&self) -> Result<TaskId> {
        tasks::newest_id(&self.db).await
    }

    async fn wakeups(&self) -> Result<Option<Wakeups>> {
        self.db.wakeups().await
    }

    fn added_here(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.added.subscribe())
    }

    async fn try_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool> {
        upkeep::try_lease(&self.db, name, holder, now, ttl).await
    }

    async fn release_lease(&self, name: &str, holder: &str, now: DateTime<Utc>) -> Result<bool> {
        upkeep::release_lease(&self.db, name, holder, now).await
    }
}
