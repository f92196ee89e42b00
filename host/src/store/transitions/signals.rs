//! Signals: sending one to a task, a run's lookup of one, reading it with the run's success,
//! and a run's end waiting for one. See [`crate::model::signals`] for the life of a signal.
//!
//! Sending locks the task's row, as the end of its running run does, so a run that ends waiting
//! for a signal sent meanwhile (after its lookup) finds it at its end and is due at once.

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::{Cells, TxOf};
use super::super::rows;
use super::super::sql::{args, SCHEDULED};
use crate::error::{Error, Result};
use crate::model::{RunEnd, RunOutcome, Signal, SignalLookup, SignalSent, TaskId, TaskState, MAX_UNREAD_SIGNALS};

/// The unread signals of a task (of a name: `AND name = $2`).
const UNREAD: &str = "task_id = $1 AND read_by_run IS NULL";

/// Send the signal `name` with `data` (checked already) to `task`, at `now`: kept until a run
/// reads it; a task scheduled and awaiting it is due at once. Refused for a task finished or
/// unknown, or one with [`MAX_UNREAD_SIGNALS`] unread.
pub async fn send<D: Dialect>(db: &D, task: TaskId, name: &str, data: &str, now: DateTime<Utc>) -> Result<SignalSent> {
    transaction(db, |tx| {
        Box::pin(async move {
            let lock = format!(
                "SELECT id, last_status, gave_up_on, awaiting_signal FROM task_queue WHERE id = $1{}",
                D::FOR_UPDATE
            );
            let found = db.rows(Some(&mut tx.tx), &lock, args![task]).await?;
            let Some(row) = found.first() else {
                return Err(Error::TaskNotFound(task));
            };
            let state = rows::task_state(row)?;
            if state.is_final() {
                let reason = format!("it is {state}: no run of it will read a signal");
                return Err(Error::CannotSignal { id: task, reason });
            }
            let awaiting = row.text("awaiting_signal")?;
            let count = format!("SELECT COUNT(*) AS n FROM task_signals WHERE {UNREAD}");
            let unread = db.rows(Some(&mut tx.tx), &count, args![task]).await?;
            let unread = unread.first().map(|r| r.int("n")).transpose()?.flatten().unwrap_or(0);
            if u64::try_from(unread).unwrap_or(0) >= MAX_UNREAD_SIGNALS {
                let reason = format!("it has {MAX_UNREAD_SIGNALS} signals no run has read yet, the most it may hold");
                return Err(Error::CannotSignal { id: task, reason });
            }
            let insert = "INSERT INTO task_signals (task_id, name, data, sent_on) VALUES ($1, $2, $3, $4)";
            let id = db.insert(Some(&mut tx.tx), insert, args![task, name, data, now]).await?;
            // Its row is kept when it succeeds (`ends`): a signal outlives the run that reads it.
            super::ends::keep(db, Some(&mut tx.tx), &[task], false).await?;
            let mut woke = false;
            if state == TaskState::Scheduled && awaiting.as_deref() == Some(name) {
                let due = format!(
                    "UPDATE task_queue SET scheduled_on = $2
                     WHERE id = $1 AND last_status = {SCHEDULED} AND scheduled_on > $2"
                );
                woke = db.exec(Some(&mut tx.tx), &due, args![task, now]).await? > 0;
            }
            if woke {
                db.notify_tasks(&mut tx.tx).await?;
            }
            Ok(SignalSent { id, woke })
        })
    })
    .await
}

/// What a run of `task` waiting for `name` finds in the store: the oldest unread signal of that
/// name, and what the task awaits.
pub async fn lookup<D: Dialect>(db: &D, task: TaskId, name: &str) -> Result<SignalLookup> {
    let oldest = format!("SELECT id, data FROM task_signals WHERE {UNREAD} AND name = $2 ORDER BY id LIMIT 1");
    let unread = match db.rows(None, &oldest, args![task, name]).await?.first() {
        Some(r) => Some((rows::id(r, "id")?, r.text("data")?.unwrap_or_default())),
        None => None,
    };
    let awaits = "SELECT awaiting_signal, awaiting_until FROM task_queue WHERE id = $1";
    let awaiting = match db.rows(None, awaits, args![task]).await?.first() {
        Some(r) => r.text("awaiting_signal")?.zip(r.time("awaiting_until")?),
        None => None,
    };
    Ok(SignalLookup { unread, awaiting })
}

/// The most signals of a task `show` and the API list: the newest.
pub const LISTED: u32 = 100;

/// A task's signals, the newest [`LISTED`], oldest first.
pub async fn of<D: Dialect>(db: &D, task: TaskId) -> Result<Vec<Signal>> {
    let sql = "SELECT * FROM task_signals WHERE task_id = $1 ORDER BY id DESC LIMIT $2";
    let mut found =
        db.rows(None, sql, args![task, LISTED]).await?.iter().map(rows::signal).collect::<Result<Vec<_>>>()?;
    found.reverse();
    Ok(found)
}

/// Mark read the signals the runs that succeeded here were handed (each run's own task's: a
/// signal is found by its task, so a run can read no other task's). A run that snoozes or waits
/// leaves them unread: a handler runs from the top each time, and its next run, asking again, is
/// handed them again (a wait for `a`, then for `b`, reads `a` again on the run that gets `b`).
pub async fn read<D: Dialect>(db: &D, tx: &mut TxOf<D>, well: &[&RunOutcome]) -> Result<()> {
    let sql = format!("UPDATE task_signals SET read_by_run = $2 WHERE id IN ($3) AND {UNREAD}");
    for o in well.iter().filter(|o| matches!(o.end, RunEnd::Success { .. })) {
        let ids = &o.children().signals;
        if !ids.is_empty() {
            db.exec(Some(&mut *tx), &sql, args![o.task_id, o.run_id, ids]).await?;
        }
    }
    Ok(())
}

/// Mark a task just snoozed by its run as awaiting the signal `name` until `until`; due at once
/// if one was sent since the run looked (sending locks the row this run's end holds).
pub async fn awaiting<D: Dialect>(
    db: &D,
    tx: &mut TxOf<D>,
    task: TaskId,
    name: &str,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<()> {
    let mark = "UPDATE task_queue SET awaiting_signal = $2, awaiting_until = $3 WHERE id = $1";
    db.exec(Some(&mut *tx), mark, args![task, name, until]).await?;
    let sent = format!("SELECT id FROM task_signals WHERE {UNREAD} AND name = $2 LIMIT 1");
    if !db.rows(Some(&mut *tx), &sent, args![task, name]).await?.is_empty() {
        let due = "UPDATE task_queue SET scheduled_on = $2 WHERE id = $1";
        db.exec(Some(&mut *tx), due, args![task, now]).await?;
    }
    Ok(())
}
