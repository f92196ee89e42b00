//! The overseer's writes: retries, tasks no worker serves, rotation, and leases.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::Cells;
use super::super::rows;
use super::super::sql::args;
use super::super::transitions::{self, is};
use super::super::types::{RetryCandidate, RetryPlan};
use crate::error::Result;
use crate::model::*;

/// Failed tasks (error or timeout, not given up) whose next step is not decided yet.
pub async fn retry_candidates<D: Dialect>(db: &D, limit: u32) -> Result<Vec<RetryCandidate>> {
    let sql = format!(
        "SELECT q.id, q.task_runs_failed, q.max_retries, q.backoff_base_ms, q.backoff_max_ms
         FROM task_queue q
         WHERE {}
         LIMIT $1",
        is::<D>(TaskState::AwaitingRetry)
    );
    db.rows(None, &sql, args![limit]).await?.iter().map(rows::retry_candidate).collect()
}

pub async fn apply_retry_plans<D: Dialect>(db: &D, plans: &[RetryPlan], now: DateTime<Utc>) -> Result<()> {
    if plans.is_empty() {
        return Ok(());
    }
    transaction(db, |tx| {
        Box::pin(async move {
            for p in plans {
                match p.next {
                    NextStep::RetryAt(at) => {
                        transitions::tasks::retry(db, &mut tx.tx, p.task_id, at).await?;
                    }
                    NextStep::GiveUp => {
                        transitions::tasks::give_up(db, &mut tx.tx, p.task_id, now).await?;
                    }
                }
            }
            Ok(())
        })
    })
    .await
}

/// Give up (as `handler-not-found`) up to `limit` scheduled tasks due and queued at or before
/// `due_before` whose handler is not in `served`; how many. (Queued too: a keyed task's due
/// time is its turn, which may be earlier than when it was queued.)
pub async fn give_up_unserved<D: Dialect>(
    db: &D,
    served: &[String],
    due_before: DateTime<Utc>,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<u64> {
    let pick = format!(
        "SELECT id FROM task_queue
         WHERE {} AND scheduled_on <= $1 AND queued_on <= $1 AND task_handler_class NOT IN ($2)
         LIMIT $3{}",
        is::<D>(TaskState::Scheduled),
        D::SKIP_LOCKED
    );
    let pick = &pick;
    transaction(db, |tx| {
        Box::pin(async move {
            let ids = rows::ids(&db.rows(Some(&mut tx.tx), pick, args![due_before, served, limit]).await?)?;
            if ids.is_empty() {
                return Ok(0);
            }
            transitions::tasks::abandon(db, &mut tx.tx, &ids, now).await?;
            Ok(ids.len() as u64)
        })
    })
    .await
}

/// Take or renew the lease `name` for `holder` until `now + ttl`: true when `holder` has it
/// (it was free, expired, or already its own).
pub async fn try_lease<D: Dialect>(
    db: &D,
    name: &str,
    holder: &str,
    now: DateTime<Utc>,
    ttl: Duration,
) -> Result<bool> {
    // Another's and not expired: said by a read, without a write transaction (an overseer waiting
    // to take over tries twice a second; on SQLite a write transaction takes every writer's lock).
    let found = db.rows(None, "SELECT holder, expires_on FROM task_leases WHERE name = $1", args![name]).await?;
    if let Some(r) = found.first() {
        let theirs = r.text("holder")?.as_deref() != Some(holder);
        if theirs && r.time("expires_on")?.is_some_and(|until| until >= now) {
            return Ok(false);
        }
    }
    let until = now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::days(1));
    let taken = transaction(db, |tx| {
        Box::pin(async move {
            let take = "UPDATE task_leases SET holder = $2, expires_on = $3
                    WHERE name = $1 AND (holder = $2 OR expires_on < $4)";
            db.exec(Some(&mut tx.tx), take, args![name, holder, until, now]).await?;
            let found =
                db.rows(Some(&mut tx.tx), "SELECT holder FROM task_leases WHERE name = $1", args![name]).await?;
            let held = match found.first() {
                // Read back rather than counted: MySQL counts a renewal to the same time as no change.
                Some(r) => r.text("holder")?.as_deref() == Some(holder),
                None => {
                    let new = "INSERT INTO task_leases (name, holder, expires_on) VALUES ($1, $2, $3)";
                    db.exec(Some(&mut tx.tx), new, args![name, holder, until]).await?;
                    true
                }
            };
            Ok(held)
        })
    })
    .await;
    match taken {
        // Another overseer made the lease first (its transaction rolled back).
        Err(e) if e.is_unique_violation() => Ok(false),
        other => other,
    }
}

/// Hand the lease `name` back: it expires at `now` (the time leases are judged on) when
/// `holder` still holds it. The row stays: the next holder takes it as an expired one, with no
/// race to insert it. True when it was `holder`'s.
pub async fn release_lease<D: Dialect>(db: &D, name: &str, holder: &str, now: DateTime<Utc>) -> Result<bool> {
    let expire = "UPDATE task_leases SET expires_on = $3 WHERE name = $1 AND holder = $2";
    Ok(db.exec(None, expire, args![name, holder, now]).await? > 0)
}
