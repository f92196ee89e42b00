//! The flow-control limits kept in `task_run_limits`: one row per limited queue or handler
//! (`queue:NAME`, `handler:NAME`), set from the operator's file at a worker's start
//! ([`LimitSetBy::File`]) or live ([`LimitSetBy::Operator`]: `taskhost limits set`, the API),
//! read by every worker at least once a second and, locked, by each claim they touch.

use chrono::{DateTime, Utc};

use super::super::dialect::{transaction, Dialect};
use super::super::plumbing::Cells;
use super::super::sql::args;
use super::super::transitions::{is, is_any};
use super::super::types::{LimitEdit, LimitInfo, LimitSetBy, LimitWritten};
use super::relay::Change;
use crate::error::{Error, Result};
use crate::model::{Limit, LimitScope, OnSuccess, Rate, RunLimits, TaskState};

/// The columns a limit is read from.
pub(super) const LIMIT_COLUMNS: &str = "name, max_running, rate_count, rate_period_us, rate_burst, next_on, \
     max_running_per_key, weight, rate_per_key_count, rate_per_key_period_us, rate_per_key_burst, fuel_per_turn, on_success";

/// A limit's row as read: its name, its limits, its rate's pace mark.
pub(super) struct LimitRow {
    pub name: String,
    pub limit: Limit,
    pub next_on: Option<DateTime<Utc>>,
}

impl LimitRow {
    pub fn read(r: &impl Cells) -> Result<LimitRow> {
        let name = r.text("name")?.unwrap_or_default();
        let corrupt = |reason: String| Error::CorruptRow { table: "task_run_limits", reason };
        let max_running =
            r.int("max_running")?.map(|n| u32::try_from(n).map_err(|_| corrupt(format!("{name}: max_running {n}"))));
        let rate = |prefix: &str| -> Result<Option<Rate>> {
            let (count, us) = (r.int(&format!("{prefix}_count"))?, r.int(&format!("{prefix}_period_us"))?);
            let (Some(count), Some(us)) = (count, us) else { return Ok(None) };
            let burst = r.int(&format!("{prefix}_burst"))?.unwrap_or(0);
            let rate = (u32::try_from(count), u64::try_from(us), u32::try_from(burst));
            let (Ok(count), Ok(us), Ok(burst)) = rate else {
                return Err(corrupt(format!("{name}: {prefix} {count} per {us} µs, burst {burst}")));
            };
            let period = std::time::Duration::from_micros(us);
            Ok(Some(Rate { count, period, burst }.checked().map_err(|e| corrupt(format!("{name}: {e}")))?))
        };
        let count = |column: &str, check: fn(i64) -> std::result::Result<u32, String>| -> Result<Option<u32>> {
            r.int(column)?.map(|n| check(n).map_err(|e| corrupt(format!("{name}: {e}")))).transpose()
        };
        let limit = Limit {
            max_running: max_running.transpose()?,
            rate: rate("rate")?,
            max_running_per_key: count("max_running_per_key", Limit::max_running)?,
            rate_per_key: rate("rate_per_key")?,
            weight: count("weight", Limit::weight)?,
            fuel_per_turn: r
                .int("fuel_per_turn")?
                .map(|n| Limit::fuel_per_turn(i128::from(n)).map_err(|e| corrupt(format!("{name}: {e}"))))
                .transpose()?,
            on_success: match r.text("on_success")? {
                Some(word) => OnSuccess::parse(&word).map_err(|e| corrupt(format!("{name}: {e}")))?,
                None => OnSuccess::Keep,
            },
        };
        Ok(LimitRow { limit, next_on: r.time("next_on")?, name })
    }
}

/// A row read, or None (said in the log) when it cannot be: a row written by hand must not stop
/// every claim. (`taskhost limits clear` takes it out.)
fn readable(r: &impl Cells) -> Option<LimitRow> {
    LimitRow::read(r).map_err(|e| tracing::warn!("a flow-control limit is left out: {e}")).ok()
}

/// Every limit set (of `scope`, or of every one), with who set it, what it holds now.
pub async fn list<D: Dialect>(db: &D, now: DateTime<Utc>, of: Option<LimitScope>) -> Result<Vec<LimitInfo>> {
    let sql = format!("SELECT {LIMIT_COLUMNS}, set_by, updated_on FROM task_run_limits ORDER BY name");
    let mut out = Vec::new();
    for r in &db.rows(None, &sql, &[]).await? {
        let Some(row) = readable(r) else { continue };
        let Ok((scope, target)) = LimitScope::parse_name(&row.name) else { continue };
        if !row.limit.is_some() || of.is_some_and(|of| of != scope) {
            continue; // (without limits: a lock row of an older host)
        }
        let mut info = LimitInfo {
            scope,
            target: target.to_string(),
            max_running: row.limit.max_running,
            rate: row.limit.rate.map(|r| r.per_period()),
            rate_burst: row.limit.rate.map(|r| r.burst),
            max_running_per_key: row.limit.max_running_per_key,
            rate_per_key: row.limit.rate_per_key.map(|r| r.per_period()),
            rate_burst_per_key: row.limit.rate_per_key.map(|r| r.burst),
            fuel_per_turn: row.limit.fuel_per_turn,
            on_success: row.limit.on_success,
            weight: row.limit.weight,
            set_by: r.text("set_by")?.as_deref().and_then(LimitSetBy::parse),
            updated_on: r.time("updated_on")?,
            running: 0,
            due: 0,
            held_back: 0,
        };
        (info.running, info.due) = load(db, info.scope, &info.target, now).await?;
        info.held_back = held_back(db, &info, &row, now).await?;
        out.push(info);
    }
    Ok(out)
}

/// The due tasks `info`'s limit holds back now: beyond its room (its cap less its runs in flight,
/// the starts its rate allows now), or beyond its keys' rooms under a queue's cap and rate per
/// key.
async fn held_back<D: Dialect>(db: &D, info: &LimitInfo, row: &LimitRow, now: DateTime<Utc>) -> Result<u64> {
    if info.scope == LimitScope::Key {
        return Ok(0);
    }
    let mut room = info.due;
    if let Some(max) = row.limit.max_running {
        room = room.min(u64::from(max).saturating_sub(info.running));
    }
    if let Some(rate) = row.limit.rate {
        let ask = u32::try_from(info.due).unwrap_or(u32::MAX);
        room = room.min(u64::from(rate.grant(row.next_on, now, ask).granted));
    }
    let mut held = info.due - room;
    if info.scope == LimitScope::Queue && row.limit.is_per_key() {
        held = held.max(super::keys::held_per_key(db, &info.target, &row.limit, now).await?);
    }
    // Counted by another statement: a task added between the two is not held back beyond due.
    Ok(held.min(info.due))
}

/// The runs in flight under a limit, and the due tasks it may hold back (of queues not paused).
async fn load<D: Dialect>(db: &D, scope: LimitScope, target: &str, now: DateTime<Utc>) -> Result<(u64, u64)> {
    let column = match scope {
        LimitScope::Queue => "queue",
        LimitScope::Handler => "task_handler_class",
        LimitScope::Key => "share_key",
    };
    let sql = format!(
        "SELECT count(CASE WHEN {} THEN 1 END) AS running,
                count(CASE WHEN {} AND scheduled_on <= $2 AND {} THEN 1 END) AS due
         FROM task_queue WHERE {column} = $1 AND {}",
        is::<D>(TaskState::Running),
        is::<D>(TaskState::Scheduled),
        super::super::transitions::NOT_PAUSED,
        is_any::<D>(&[TaskState::Scheduled, TaskState::Running])
    );
    let found = db.rows(None, &sql, args![target, now]).await?;
    let count = |col: &str| -> Result<u64> {
        Ok(found.first().map(|r| r.int(col)).transpose()?.flatten().unwrap_or(0).max(0) as u64)
    };
    Ok((count("running")?, count("due")?))
}

/// The limits in force, as a worker applies them.
pub async fn in_force<D: Dialect>(db: &D) -> Result<RunLimits> {
    let sql = format!("SELECT {LIMIT_COLUMNS} FROM task_run_limits");
    let mut limits = RunLimits::default();
    for r in &db.rows(None, &sql, &[]).await? {
        let Some(row) = readable(r) else { continue };
        if let Ok((scope, target)) = LimitScope::parse_name(&row.name) {
            limits.set(scope, target, row.limit);
        }
    }
    Ok(limits)
}

/// Write the limit on `target` of `scope` as `edit` says (nothing left limited: take it out),
/// in one transaction that holds its row: two changes at once both apply, one after the other.
/// The file's limits do not overwrite one an operator set (`kept`). A changed rate moves its pace
/// mark no further ahead than one of its paces, so a rate raised live applies at once.
pub async fn set<D: Dialect>(
    db: &D,
    scope: LimitScope,
    target: &str,
    edit: LimitEdit<'_>,
    by: LimitSetBy,
    now: DateTime<Utc>,
) -> Result<LimitWritten> {
    let name = scope.name(target);
    let name = name.as_str();
    if edit != LimitEdit::Set(Limit::default()) {
        // Made before the transaction: a unique violation inside one would end it on PostgreSQL.
        insert(db, name).await?;
    }
    let edit = &edit;
    transaction(db, |tx| {
        Box::pin(async move {
            let sql = format!("SELECT {LIMIT_COLUMNS}, set_by FROM task_run_limits WHERE name = $1{}", D::FOR_UPDATE);
            let held = db.rows(Some(&mut tx.tx), &sql, args![name]).await?;
            let none = || LimitRow { name: name.to_string(), limit: Limit::default(), next_on: None };
            let (before, mark, set_by) = match held.first() {
                Some(r) => match LimitRow::read(r) {
                    Ok(row) => (row, true, r.text("set_by")?),
                    // A row that cannot be read (written by hand) is written over whole.
                    Err(_) if matches!(edit, LimitEdit::Set(_)) => (none(), true, None),
                    Err(e) => return Err(e),
                },
                None => (none(), false, None),
            };
            let kept = by == LimitSetBy::File && set_by.as_deref() == Some(LimitSetBy::Operator.as_str());
            let after = match edit {
                _ if kept => return Ok(LimitWritten { before: before.limit, now: before.limit, kept }),
                LimitEdit::Set(limit) => *limit,
                LimitEdit::Change(change) => {
                    let mut limit = before.limit;
                    change.apply(&mut limit).map_err(|e| Error::invalid("limit", e))?;
                    limit
                }
            };
            after.check_for(scope).map_err(|e| Error::invalid("limit", e))?;
            // Idle workers claim again as it commits (PostgreSQL's NOTIFY; elsewhere they poll):
            // a rate raised live, or a limit taken out, applies at once, not at their next poll.
            // (A key's weight and a file's limit written unchanged wake nobody.)
            if after != before.limit && scope != LimitScope::Key {
                db.notify_tasks(&mut tx.tx).await?;
            }
            // A key's tasks queued already are laid again by its weight, or its queue's fuel per
            // turn, now (the overseer's `key-fuel`), not only those added from now on.
            if let Some(change) = Change::of(scope, target, &before.limit, &after) {
                super::relay::ask::<D>(db, &mut tx.tx, change).await?;
            }
            if !after.is_some() {
                db.exec(Some(&mut tx.tx), "DELETE FROM task_run_limits WHERE name = $1", args![name]).await?;
                return Ok(LimitWritten { before: before.limit, now: after, kept });
            }
            if !mark {
                // Taken out between the insert and this transaction: made again.
                db.exec(Some(&mut tx.tx), "INSERT INTO task_run_limits (name) VALUES ($1)", args![name]).await?;
            }
            let next_on = mark_after(&before, after.rate, now);
            write_row(db, &mut tx.tx, name, &after, next_on, by, now).await?;
            if let (LimitScope::Queue, Some(new)) = (scope, after.rate_per_key) {
                if before.limit.rate_per_key != Some(new) {
                    bring_back_key_marks(db, &mut tx.tx, target, new, now).await?;
                }
            }
            Ok(LimitWritten { before: before.limit, now: after, kept })
        })
    })
    .await
}

/// Write `after` over the limit row `name`, set `by` at `now`, its pace mark `next_on`.
async fn write_row<D: Dialect>(
    db: &D,
    tx: &mut super::super::plumbing::TxOf<D>,
    name: &str,
    after: &Limit,
    next_on: Option<DateTime<Utc>>,
    by: LimitSetBy,
    now: DateTime<Utc>,
) -> Result<()> {
    let (count, period, burst) = rate_cells(after.rate);
    let per_key = rate_cells(after.rate_per_key);
    let sql = "UPDATE task_run_limits SET max_running = $2, rate_count = $3, rate_period_us = $4,
               rate_burst = $5, next_on = $6, set_by = $7, updated_on = $8, max_running_per_key = $9,
               weight = $10, rate_per_key_count = $11, rate_per_key_period_us = $12,
               rate_per_key_burst = $13, fuel_per_turn = $14, on_success = $15 WHERE name = $1";
    let values = args![
        name,
        after.max_running.map(i64::from),
        count,
        period,
        burst,
        next_on,
        by.as_str(),
        now,
        after.max_running_per_key.map(i64::from),
        after.weight.map(i64::from),
        per_key.0,
        per_key.1,
        per_key.2,
        after.fuel_per_turn.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
        (after.on_success != OnSuccess::Keep).then(|| after.on_success.as_str())
    ];
    db.exec(Some(tx), sql, values).await?;
    Ok(())
}

/// The pace mark of `before`'s rate changed to `new`: no further ahead than one pace of it.
fn mark_after(before: &LimitRow, new: Option<Rate>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match (new, before.limit.rate) {
        (Some(new), Some(old)) if new != old => {
            before.next_on.map(|m| m.min(now + chrono::TimeDelta::microseconds(new.interval_us())))
        }
        _ => before.next_on,
    }
}

/// A queue's rate per key changed to `new`: as the queue's own mark, its keys' marks no further
/// ahead than one pace of it.
async fn bring_back_key_marks<D: Dialect>(
    db: &D,
    tx: &mut super::super::plumbing::TxOf<D>,
    queue: &str,
    new: Rate,
    now: DateTime<Utc>,
) -> Result<()> {
    let most = now.timestamp_micros().saturating_add(new.interval_us());
    let sql = "UPDATE task_key_paces SET next_us = $2 WHERE queue = $1 AND next_us > $2";
    db.exec(Some(tx), sql, args![queue, most]).await?;
    Ok(())
}

/// A rate's cells: its count, its period in microseconds, its burst (0 without a rate).
fn rate_cells(rate: Option<Rate>) -> (Option<i64>, Option<i64>, i64) {
    let period = rate.map(|r| i64::try_from(r.period.as_micros()).unwrap_or(i64::MAX));
    (rate.map(|r| i64::from(r.count)), period, i64::from(rate.map_or(0, |r| r.burst)))
}

/// The row of `name`, made (a set beside it may have made it meanwhile).
async fn insert<D: Dialect>(db: &D, name: &str) -> Result<()> {
    match db.exec(None, "INSERT INTO task_run_limits (name) VALUES ($1)", args![name]).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_unique_violation() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Set each of the file's limits (those an operator set live are kept); the names kept.
pub async fn set_from_file<D: Dialect>(db: &D, limits: &RunLimits, now: DateTime<Utc>) -> Result<Vec<String>> {
    let mut kept = Vec::new();
    for scope in [LimitScope::Queue, LimitScope::Handler, LimitScope::Key] {
        for (target, limit) in limits.of(scope) {
            if set(db, scope, target, LimitEdit::Set(*limit), LimitSetBy::File, now).await?.kept {
                kept.push(scope.name(target));
            }
        }
    }
    Ok(kept)
}
