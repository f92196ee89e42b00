//! Schedules of periodic tasks, checked as queueing checks a task (see [`crate::schedule`]).

use super::{check_text, Client};
use crate::error::{Error, Result};
use crate::model::{NewTask, TaskId};

impl Client {
    /// Create a schedule of periodic tasks, after checking its cron expression, time zone,
    /// handler and data as queueing would.
    pub async fn add_schedule(&self, s: &crate::schedule::NewSchedule) -> Result<()> {
        self.check_schedule(s).await?;
        self.store.add_schedule(s, self.clock.now()).await
    }

    async fn check_schedule(&self, s: &crate::schedule::NewSchedule) -> Result<()> {
        check_text("schedule name", &s.name, crate::schedule::MAX_NAME_BYTES)?;
        if s.name.is_empty() {
            return Err(Error::invalid("schedule name", "the name is empty"));
        }
        crate::schedule::Slots::new(&s.cron, &s.time_zone)?;
        let task = NewTask::new(&s.handler, &s.data).with_queue(&s.queue).with_priority(s.priority);
        self.validate(std::slice::from_ref(&task)).await
    }

    /// Every schedule, by name.
    pub async fn schedules(&self) -> Result<Vec<crate::schedule::Schedule>> {
        self.store.schedules().await
    }

    /// False when there is no such schedule. A declared schedule is refused: the overseer would
    /// add it again; remove it from the configuration file.
    pub async fn remove_schedule(&self, name: &str) -> Result<bool> {
        self.store.remove_schedule(name).await
    }

    /// Make the declared schedules exactly these (what the overseer does with the configuration
    /// file's): each is checked as [`Client::add_schedule`] checks one, then the declared ones
    /// are added, updated and removed in one transaction. Schedules added by hand stay.
    pub async fn declare_schedules(
        &self,
        declared: &[crate::schedule::NewSchedule],
    ) -> Result<crate::schedule::Synced> {
        for s in declared {
            self.check_schedule(s).await?;
        }
        self.store.sync_schedules(declared, self.clock.now()).await
    }

    /// Pause or resume a schedule; false when there is no such schedule.
    pub async fn pause_schedule(&self, name: &str, paused: bool) -> Result<bool> {
        self.store.set_schedule_paused(name, paused.then(|| self.clock.now())).await
    }

    /// Queue a task of the schedule now, besides its slots.
    pub async fn trigger_schedule(&self, name: &str) -> Result<TaskId> {
        self.store.trigger_schedule(name, self.clock.now()).await
    }
}
