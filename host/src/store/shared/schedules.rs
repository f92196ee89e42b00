//! Periodic tasks' schedules, and queueing their due slots exactly once: the schedule's row is
//! read under its lock (`FOR UPDATE`; SQLite serializes writers) and its `last_slot` moved in the
//! same transaction as the task, so a second overseer racing for the same slot finds it taken.

use chrono::{DateTime, Utc};

use super::super::dialect::{add_one, retrying, Cells, Dialect};
use super::super::sql::args;
use crate::error::{Error, Result};
use crate::model::{NewTask, TaskId};
use crate::schedule::{plan, NewSchedule, Schedule};

pub async fn add<D: Dialect>(db: &D, s: &NewSchedule, now: DateTime<Utc>) -> Result<()> {
    let sql = "INSERT INTO task_schedules (name, cron, time_zone, task_handler_class, task_data, queue, priority,
                   missed, last_slot, created_on)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)";
    let values = args![
        &s.name,
        &s.cron,
        &s.time_zone,
        &s.handler,
        &s.data,
        &s.queue,
        i64::from(s.priority),
        s.missed.as_str(),
        now
    ];
    match db.exec(None, sql, values).await {
        Ok(_) => Ok(()),
        Err(Error::Database(sqlx::Error::Database(e))) if e.is_unique_violation() => {
            Err(Error::invalid("schedule", format!("a schedule named {:?} exists already", s.name)))
        }
        Err(e) => Err(e),
    }
}

pub async fn list<D: Dialect>(db: &D) -> Result<Vec<Schedule>> {
    let found = db.rows(None, "SELECT * FROM task_schedules ORDER BY name", &[]).await?;
    found.iter().map(read).collect()
}

pub async fn remove<D: Dialect>(db: &D, name: &str) -> Result<bool> {
    Ok(db.exec(None, "DELETE FROM task_schedules WHERE name = $1", args![name]).await? > 0)
}

/// Pause (`Some(now)`) or resume (None) a schedule; false when there is no such schedule.
pub async fn set_paused<D: Dialect>(db: &D, name: &str, paused_on: Option<DateTime<Utc>>) -> Result<bool> {
    let n = match paused_on {
        Some(t) => db.exec(None, "UPDATE task_schedules SET paused_on = $2 WHERE name = $1", args![name, t]).await?,
        None => db.exec(None, "UPDATE task_schedules SET paused_on = NULL WHERE name = $1", args![name]).await?,
    };
    Ok(n > 0)
}

/// Queue the due slot of every schedule not paused; the tasks queued, with their schedules.
pub async fn queue_due<D: Dialect>(db: &D, now: DateTime<Utc>) -> Result<Vec<(String, TaskId)>> {
    let names = db.rows(None, "SELECT name FROM task_schedules WHERE paused_on IS NULL ORDER BY name", &[]).await?;
    let mut queued = Vec::new();
    for r in &names {
        let name = r.text("name")?.unwrap_or_default();
        match queue_slot(db, &name, now).await {
            Ok(Some(id)) => queued.push((name, id)),
            Ok(None) => {}
            // One broken schedule (an expression this version cannot read) holds up no other.
            Err(e @ Error::Invalid { .. }) => tracing::warn!(schedule = %name, "schedule skipped: {e}"),
            Err(e) => return Err(e),
        }
    }
    Ok(queued)
}

/// Queue `name`'s due slot, if it has one no one queued yet.
async fn queue_slot<D: Dialect>(db: &D, name: &str, now: DateTime<Utc>) -> Result<Option<TaskId>> {
    let pick = format!("SELECT * FROM task_schedules WHERE name = $1 AND paused_on IS NULL{}", D::FOR_UPDATE);
    retrying::<D, _, _, _>(|| async {
        let mut tx = db.begin().await?;
        let found = db.rows(Some(&mut tx), &pick, args![name]).await?;
        let Some(schedule) = found.first().map(read).transpose()? else {
            db.rollback(tx).await?;
            return Ok(None);
        };
        let plan = plan(&schedule, now)?;
        let Some(last) = plan.last_slot else {
            db.rollback(tx).await?;
            return Ok(None);
        };
        let task = match plan.queue {
            Some(slot) => Some(add_one::<D>(D::conn(&mut tx), &task_of(&schedule, slot), now).await?.id),
            None => None,
        };
        let moved = "UPDATE task_schedules SET last_slot = $2 WHERE name = $1";
        db.exec(Some(&mut tx), moved, args![name, last]).await?;
        db.commit(tx).await?;
        Ok(task)
    })
    .await
}

/// Queue a task of schedule `name` now, outside its slots (its `last_slot` is left alone).
pub async fn trigger<D: Dialect>(db: &D, name: &str, now: DateTime<Utc>) -> Result<TaskId> {
    let found = db.rows(None, "SELECT * FROM task_schedules WHERE name = $1", args![name]).await?;
    let schedule = found
        .first()
        .map(read)
        .transpose()?
        .ok_or_else(|| Error::invalid("schedule", format!("no schedule named {name:?}")))?;
    let mut added = db.add_tasks(&[task_of(&schedule, now)], now).await?;
    added.pop().map(|a| a.id).ok_or_else(|| Error::invalid("schedule", "nothing was queued"))
}

fn task_of(s: &Schedule, due: DateTime<Utc>) -> NewTask {
    let s = &s.spec;
    NewTask::new(&s.handler, &s.data)
        .with_queue(&s.queue)
        .with_priority(s.priority)
        .with_scheduled_on(due)
        .with_queued_by(format!("schedule:{}", s.name))
}

fn read(r: &impl Cells) -> Result<Schedule> {
    let text = |col: &str| -> Result<String> {
        r.text(col)?.ok_or_else(|| Error::CorruptRow { table: "task_schedules", reason: format!("{col} is NULL") })
    };
    let time = |col: &str| -> Result<DateTime<Utc>> {
        r.time(col)?.ok_or_else(|| Error::CorruptRow { table: "task_schedules", reason: format!("{col} is NULL") })
    };
    let spec = NewSchedule {
        name: text("name")?,
        cron: text("cron")?,
        time_zone: text("time_zone")?,
        handler: text("task_handler_class")?,
        data: text("task_data")?,
        queue: text("queue")?,
        priority: r.int("priority")?.unwrap_or(0).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
        missed: text("missed")?
            .parse()
            .map_err(|e: Error| Error::CorruptRow { table: "task_schedules", reason: e.to_string() })?,
    };
    Ok(Schedule {
        spec,
        paused_on: r.time("paused_on")?,
        last_slot: time("last_slot")?,
        created_on: time("created_on")?,
    })
}
