//! Periodic tasks' schedules, and queueing their due slots exactly once: the schedule's row is
//! read under its lock (`FOR UPDATE`; SQLite serializes writers) and its `last_slot` moved in the
//! same transaction as the task, so a second overseer racing for the same slot finds it taken.

use chrono::{DateTime, Utc};

use super::super::dialect::{retrying, transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::sql::args;
use super::tasks::add_one;
use crate::error::{Error, Result};
use crate::model::{NewTask, TaskId};
use crate::schedule::{plan, NewSchedule, Schedule, Synced};

pub async fn add<D: Dialect>(db: &D, s: &NewSchedule, now: DateTime<Utc>) -> Result<()> {
    match insert(db, None, s, false, now).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_unique_violation() => {
            Err(Error::invalid("schedule", format!("a schedule named {:?} exists already", s.name)))
        }
        Err(e) => Err(e),
    }
}

/// Insert a schedule whose first slot is the first after `now`.
async fn insert<D: Dialect>(
    db: &D,
    tx: Option<&mut TxOf<D>>,
    s: &NewSchedule,
    declared: bool,
    now: DateTime<Utc>,
) -> Result<()> {
    let sql = "INSERT INTO task_schedules (name, cron, time_zone, task_handler_class, task_data, queue, priority,
                   missed, last_slot, created_on, declared)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10)";
    let values = args![
        &s.name,
        &s.cron,
        &s.time_zone,
        &s.handler,
        &s.data,
        &s.queue,
        i64::from(s.priority),
        s.missed.as_str(),
        now,
        i64::from(declared)
    ];
    db.exec(tx, sql, values).await.map(|_| ())
}

/// Make the declared schedules (`declared = 1`) those of `declared`, in one transaction: add the
/// missing ones, update those that differ (one made by hand of the same name is taken over; a
/// new cron expression or time zone starts from the first slot after `now`), remove the others.
/// Schedules made by hand are left alone, and a pause is kept. With `apply` false nothing is
/// written (the transaction is rolled back): what would change, for a command to show first.
pub async fn sync<D: Dialect>(db: &D, declared: &[NewSchedule], now: DateTime<Utc>, apply: bool) -> Result<Synced> {
    let all = format!("SELECT * FROM task_schedules ORDER BY name{}", D::FOR_UPDATE);
    // last_slot first: MySQL assigns left to right, each seeing the ones before.
    let update =
        "UPDATE task_schedules SET last_slot = CASE WHEN cron = $2 AND time_zone = $3 THEN last_slot ELSE $9 END,
                      cron = $2, time_zone = $3, task_handler_class = $4, task_data = $5, queue = $6,
                      priority = $7, missed = $8, declared = 1
                  WHERE name = $1";
    // Not `transaction`: a plan (`apply` false) makes the same writes and rolls them back.
    retrying::<D, _, _, _>(|| async {
        let mut tx = db.begin().await?;
        let current: Vec<Schedule> =
            db.rows(Some(&mut tx), &all, &[]).await?.iter().map(read).collect::<Result<_>>()?;
        let mut synced = Synced::default();
        for d in declared {
            match current.iter().find(|c| c.spec.name == d.name) {
                None => {
                    insert(db, Some(&mut tx), d, true, now).await?;
                    synced.added.push(d.name.clone());
                }
                Some(c) if c.spec != *d || !c.declared => {
                    let values = args![
                        &d.name,
                        &d.cron,
                        &d.time_zone,
                        &d.handler,
                        &d.data,
                        &d.queue,
                        i64::from(d.priority),
                        d.missed.as_str(),
                        now
                    ];
                    db.exec(Some(&mut tx), update, values).await?;
                    synced.updated.push(d.name.clone());
                }
                Some(_) => {}
            }
        }
        for c in current.iter().filter(|c| c.declared && !declared.iter().any(|d| d.name == c.spec.name)) {
            db.exec(Some(&mut tx), "DELETE FROM task_schedules WHERE name = $1", args![&c.spec.name]).await?;
            synced.removed.push(c.spec.name.clone());
        }
        if apply {
            db.commit(tx).await?;
        } else {
            db.rollback(tx).await?;
        }
        Ok(synced)
    })
    .await
}

pub async fn list<D: Dialect>(db: &D) -> Result<Vec<Schedule>> {
    let found = db.rows(None, "SELECT * FROM task_schedules ORDER BY name", &[]).await?;
    found.iter().map(read).collect()
}

pub async fn remove<D: Dialect>(db: &D, name: &str) -> Result<bool> {
    if db.exec(None, "DELETE FROM task_schedules WHERE name = $1 AND declared = 0", args![name]).await? > 0 {
        return Ok(true);
    }
    if db.rows(None, "SELECT name FROM task_schedules WHERE name = $1", args![name]).await?.is_empty() {
        return Ok(false);
    }
    let reason = format!("{name} is declared in the configuration file: remove it there");
    Err(Error::invalid("schedule", reason))
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
/// Schedules are read first without locks: only one with a slot due takes a locked transaction.
pub async fn queue_due<D: Dialect>(db: &D, now: DateTime<Utc>) -> Result<Vec<(String, TaskId)>> {
    let all = db.rows(None, "SELECT * FROM task_schedules WHERE paused_on IS NULL ORDER BY name", &[]).await?;
    let mut queued = Vec::new();
    for r in &all {
        let schedule = read(r)?;
        let name = schedule.spec.name.clone();
        // A slot another overseer queues meanwhile is found taken under the lock.
        match plan(&schedule, now) {
            Ok(p) if p.last_slot.is_none() => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(schedule = %name, "schedule skipped: {e}");
                continue;
            }
        }
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
    let pick = &pick;
    transaction(db, |tx| {
        Box::pin(async move {
            let found = db.rows(Some(&mut tx.tx), pick, args![name]).await?;
            let Some(schedule) = found.first().map(read).transpose()? else {
                return Ok(None);
            };
            let plan = plan(&schedule, now)?;
            let Some(last) = plan.last_slot else {
                return Ok(None);
            };
            let task = match plan.queue {
                Some(slot) => Some(add_one::<D>(D::conn(&mut tx.tx), &task_of(&schedule, slot), now).await?.id),
                None => None,
            };
            let moved = "UPDATE task_schedules SET last_slot = $2 WHERE name = $1";
            db.exec(Some(&mut tx.tx), moved, args![name, last]).await?;
            Ok(task)
        })
    })
    .await
}

/// Queue a task of schedule `name` now, outside its slots (its `last_slot` is left alone).
pub async fn trigger<D: Dialect>(db: &D, name: &str, now: DateTime<Utc>) -> Result<TaskId> {
    let found = db.rows(None, "SELECT * FROM task_schedules WHERE name = $1", args![name]).await?;
    let schedule = found.first().map(read).transpose()?.ok_or_else(|| Error::ScheduleNotFound(name.to_string()))?;
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
        declared: r.int("declared")?.unwrap_or(0) != 0,
        last_slot: time("last_slot")?,
        created_on: time("created_on")?,
    })
}
