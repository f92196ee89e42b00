//! Dependencies: a task added `after` others waits until each of them has succeeded.
//!
//! A task with dependencies is added `waiting` (outside the claim's index: waiting costs the
//! claims nothing), counting in `waiting_for` those it still waits for; `task_deps` holds one row
//! a dependency, `met` once it no longer holds the task back. The count lives on the waiting
//! task's row so that two dependencies succeeding at once, in two transactions, take turns on
//! that row's lock and the second sees the first's decrement: a count of `task_deps` rows read
//! by each could miss the other's uncommitted success, and the task would wait for ever.
//!
//! When a dependency ends badly (dead or cancelled), the tasks waiting for it are cancelled with
//! the reason ([`DEPENDENCY_FAILED`]), and those waiting for them in turn; a task added with
//! `run_anyway` counts such an end as met instead.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::super::dialect::Dialect;
use super::super::plumbing::{Cells, ConnOf, TxOf};
use super::super::rows;
use super::super::sql::{args, Arg, SCHEDULED, WAITING};
use super::{from, Set, Why};
use crate::error::{Error, Result};
use crate::model::{codes, Dependency, DependencyResults, NewTask, TaskId, TaskState, Transition};

/// Why a waiting task was cancelled: a task it runs after ended badly.
pub const DEPENDENCY_FAILED: &str = "a task it runs after is dead or cancelled";

/// Make the task just added as `t` (id `task`) wait for the tasks `t` runs after that have not
/// succeeded yet, or refuse it: a dependency that does not exist, or (unless it runs anyway) one
/// dead or cancelled already. The dependencies are locked first, so none ends between this read
/// and the rows written here: its end then finds them.
pub(crate) async fn wait<D: Dialect + ?Sized>(conn: &mut ConnOf<D>, task: TaskId, t: &NewTask) -> Result<()> {
    if t.after.is_empty() {
        return Ok(());
    }
    let sql =
        format!("SELECT id, last_status, gave_up_on FROM task_queue WHERE id IN ($1) ORDER BY id{}", D::FOR_UPDATE);
    let mut after = t.after.clone();
    after.sort_unstable();
    after.dedup();
    let mut state = HashMap::with_capacity(after.len());
    for r in &D::rows_on(conn, &sql, args![&after]).await? {
        state.insert(rows::id(r, "id")?, rows::task_state(r)?);
    }
    let refuse = |reason: String| Err(Error::Invalid { what: "after", reason });
    // One not there may have been deleted by its success (`ends`): that one has succeeded.
    let missing: Vec<TaskId> = after.iter().copied().filter(|id| !state.contains_key(id)).collect();
    let mut deleted = Vec::new();
    if !missing.is_empty() {
        for id in super::ends::ended_on::<D>(conn, &missing).await? {
            state.insert(id, TaskState::Succeeded);
            deleted.push(id);
        }
    }
    let (mut met, mut unmet) = (Vec::new(), Vec::new());
    for &id in &after {
        match state.get(&id) {
            None => return refuse(format!("there is no task {id}")),
            Some(TaskState::Succeeded) => met.push(id),
            Some(s @ (TaskState::Dead | TaskState::Cancelled)) if !t.run_anyway => {
                return refuse(format!("task {id} is {s}, so this task would never run (unless it runs anyway)"));
            }
            Some(TaskState::Dead | TaskState::Cancelled) => met.push(id),
            Some(_) => unmet.push(id),
        }
    }
    let rows = "INSERT INTO task_deps (task_id, after_id, met) SELECT $1, id, $3 FROM task_queue WHERE id IN ($2)";
    for (list, flag) in [(&met, 1i64), (&unmet, 0)] {
        if !list.is_empty() {
            D::exec_on(conn, rows, args![task, list, flag]).await?;
        }
    }
    // Those deleted by their success too, met: a join is told of each part (`results_of`).
    for chunk in deleted.chunks(500) {
        let values: Vec<String> = (0..chunk.len()).map(|i| format!("($1, ${}, 1)", i + 2)).collect();
        let sql = format!("INSERT INTO task_deps (task_id, after_id, met) VALUES {}", values.join(", "));
        let bound: Vec<Arg> = std::iter::once(Arg::from(task)).chain(chunk.iter().map(|&id| Arg::from(id))).collect();
        D::exec_on(conn, &sql, &bound).await?;
    }
    // Those not ended yet are kept when they succeed: this task's run may read their results.
    if !unmet.is_empty() {
        super::ends::keep_on::<D>(conn, &unmet).await?;
        let sql =
            format!("UPDATE task_queue SET last_status = {WAITING}, waiting_for = $2, run_anyway = $3 WHERE id = $1");
        D::exec_on(conn, &sql, args![task, unmet.len() as i64, i64::from(t.run_anyway)]).await?;
    }
    Ok(())
}

/// These tasks succeeded at `at`: those waiting for them count them met, and the ones that wait
/// for nothing more are due (at `at`, or later if they were added to run later).
pub async fn succeeded<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], at: DateTime<Utc>) -> Result<()> {
    let waiting = mark_met(db, tx, tasks).await?;
    release(db, tx, &waiting, at).await
}

/// These tasks ended badly (dead or cancelled) at `at`: the tasks waiting for them are cancelled,
/// and theirs in turn, except those added to run anyway, which count them met.
pub async fn ended_badly<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId], at: DateTime<Utc>) -> Result<()> {
    let mut ended: Vec<TaskId> = tasks.to_vec();
    // Each round cancels tasks that were waiting, which wait no more: it ends.
    while !ended.is_empty() {
        let sql = format!(
            "SELECT d.task_id AS id, q.run_anyway FROM task_deps d JOIN task_queue q ON q.id = d.task_id
             WHERE d.after_id IN ($1) AND d.met = 0 AND q.last_status = {WAITING} ORDER BY d.task_id{}",
            D::FOR_UPDATE
        );
        // Those that run anyway count the end as met, below, as a success would.
        let mut doomed = Vec::new();
        for r in &db.rows(Some(&mut *tx), &sql, args![&ended]).await? {
            if rows::id(r, "run_anyway")? == 0 {
                doomed.push(rows::id(r, "id")?);
            }
        }
        doomed.dedup();
        let waiting = mark_met(db, tx, &ended).await?;
        let waiting: BTreeMap<TaskId, i64> = waiting.into_iter().filter(|(id, _)| !doomed.contains(id)).collect();
        release(db, tx, &waiting, at).await?;
        let why = Why { code: codes::DEPENDENCY_FAILED, message: DEPENDENCY_FAILED };
        super::tasks::cancel_as(db, tx, &doomed, at, Transition::DependencyFailed, why).await?;
        ended = doomed;
    }
    Ok(())
}

/// These tasks were replayed (scheduled again from an end): the tasks still waiting for them
/// wait for their new end. A success or (run anyway) a bad end counted met before no longer
/// holds: the replay may end otherwise, and a task that runs after it runs after that end.
/// (A task already released, scheduled or further, is not held back again.) The waiting tasks
/// are locked after the replayed ones, as [`ended_badly`] locks them after the ended ones: an
/// add locking both in id order meanwhile may deadlock with it, and is retried as a deadlock is.
pub async fn replayed<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId]) -> Result<()> {
    // Only those this replay scheduled: a task listed that was not final is not one.
    let sql = format!(
        "SELECT d.task_id AS id, d.after_id FROM task_deps d JOIN task_queue q ON q.id = d.task_id
             JOIN task_queue a ON a.id = d.after_id
         WHERE d.after_id IN ($1) AND d.met = 1 AND q.last_status = {WAITING} AND a.last_status = {SCHEDULED}
         ORDER BY d.task_id{}",
        D::FOR_UPDATE
    );
    let (mut counts, mut named): (BTreeMap<TaskId, i64>, Vec<TaskId>) = (BTreeMap::new(), Vec::new());
    for r in &db.rows(Some(&mut *tx), &sql, args![tasks]).await? {
        *counts.entry(rows::id(r, "id")?).or_default() += 1;
        named.push(rows::id(r, "after_id")?);
    }
    if counts.is_empty() {
        return Ok(());
    }
    let waiting: Vec<TaskId> = counts.keys().copied().collect();
    let unmet = "UPDATE task_deps SET met = 0 WHERE after_id IN ($1) AND task_id IN ($2) AND met = 1";
    db.exec(Some(&mut *tx), unmet, args![&named, &waiting]).await?;
    count_waiting(db, tx, &counts, 1).await?;
    // Kept when it succeeds again: a dependent's run may read its results.
    named.sort_unstable();
    named.dedup();
    super::ends::keep::<D>(db, Some(&mut *tx), &named, false).await?;
    Ok(())
}

/// Move each waiting task's count of what it waits for by its number in `counts`, times `sign`
/// (-1: met; 1: waited for again): one statement for the tasks of each number.
async fn count_waiting<D: Dialect>(db: &D, tx: &mut TxOf<D>, counts: &BTreeMap<TaskId, i64>, sign: i64) -> Result<()> {
    let mut by_count: BTreeMap<i64, Vec<TaskId>> = BTreeMap::new();
    for (&task, &n) in counts {
        by_count.entry(n * sign).or_default().push(task);
    }
    let sql =
        format!("UPDATE task_queue SET waiting_for = waiting_for + $2 WHERE id IN ($1) AND last_status = {WAITING}");
    for (n, tasks) in &by_count {
        db.exec(Some(&mut *tx), &sql, args![tasks, *n]).await?;
    }
    Ok(())
}

/// Mark the rows of the tasks waiting for `tasks` met; how many each waiting task counted.
async fn mark_met<D: Dialect>(db: &D, tx: &mut TxOf<D>, tasks: &[TaskId]) -> Result<BTreeMap<TaskId, i64>> {
    if tasks.is_empty() {
        return Ok(BTreeMap::new());
    }
    // A locking read: it sees rows committed since this transaction began (MySQL's plain reads
    // would not), such as a dependent's added while this task's run was ending.
    let sql = format!("SELECT task_id AS id FROM task_deps WHERE after_id IN ($1) AND met = 0{}", D::FOR_UPDATE);
    let mut counts: BTreeMap<TaskId, i64> = BTreeMap::new();
    for r in &db.rows(Some(&mut *tx), &sql, args![tasks]).await? {
        *counts.entry(rows::id(r, "id")?).or_default() += 1;
    }
    if !counts.is_empty() {
        db.exec(Some(&mut *tx), "UPDATE task_deps SET met = 1 WHERE after_id IN ($1) AND met = 0", args![tasks])
            .await?;
    }
    Ok(counts)
}

/// Count `met` dependencies off each waiting task, and make due those that wait for none more.
async fn release<D: Dialect>(db: &D, tx: &mut TxOf<D>, met: &BTreeMap<TaskId, i64>, at: DateTime<Utc>) -> Result<()> {
    if met.is_empty() {
        return Ok(());
    }
    count_waiting(db, tx, met, -1).await?;
    let t = Transition::Ready;
    // Due now, or when it was added to run if that is later.
    let due = "CASE WHEN scheduled_on > $2 THEN scheduled_on ELSE $2 END";
    let ready =
        format!("UPDATE task_queue SET {} WHERE id IN ($1) AND {} AND waiting_for <= 0", Set::of(t, due), from::<D>(t));
    let ids: Vec<TaskId> = met.keys().copied().collect();
    if db.exec(Some(&mut *tx), &ready, args![&ids, at]).await? > 0 {
        db.notify_tasks(tx).await?;
    }
    Ok(())
}

/// The tasks `task` runs after, with each one's state, in id order: one deleted by its success
/// as succeeded; one deleted finished since (rotated, or by `delete-finished`) is not listed.
pub async fn of<D: Dialect>(db: &D, task: TaskId) -> Result<Vec<Dependency>> {
    Ok(of_each(db, &[task]).await?.remove(&task).unwrap_or_default())
}

/// [`of`] for each of `tasks`.
pub async fn of_each<D: Dialect>(db: &D, tasks: &[TaskId]) -> Result<HashMap<TaskId, Vec<Dependency>>> {
    let sql = "SELECT d.task_id, d.after_id AS id, q.id AS present, q.last_status, q.gave_up_on
               FROM task_deps d LEFT JOIN task_queue q ON q.id = d.after_id
               WHERE d.task_id IN ($1) ORDER BY d.task_id, d.after_id";
    let found = db.rows(None, sql, args![tasks]).await?;
    let deleted = super::ends::deleted(db, None, &gone(&found)?).await?;
    let mut out: HashMap<TaskId, Vec<Dependency>> = HashMap::new();
    for r in &found {
        let id = rows::id(r, "id")?;
        let state = match r.int("present")? {
            Some(_) => rows::task_state(r)?,
            None if deleted.contains_key(&id) => TaskState::Succeeded,
            None => continue,
        };
        out.entry(rows::id(r, "task_id")?).or_default().push(Dependency { id, state });
    }
    Ok(out)
}

/// Of dependencies read with `task_queue` left-joined (`id`, and `present` its task's id there),
/// those whose task is gone.
fn gone(found: &[impl Cells]) -> Result<Vec<TaskId>> {
    let mut out = Vec::new();
    for r in found {
        if r.int("present")?.is_none() {
            out.push(rows::id(r, "id")?);
        }
    }
    Ok(out)
}

/// The dependencies [`results_of`] read, without their results yet.
struct Listed {
    /// Each, in id order.
    out: Vec<DependencyResults>,
    /// Each one's last run, with the size of its results, where known from its row.
    last: HashMap<TaskId, (i64, usize)>,
    /// Those whose last run is kept on their row.
    on_row: HashSet<TaskId>,
}

/// The rows of dependencies read (`task_queue` left-joined), listed: one gone listed when its
/// success deleted it (`deleted`: its handler), else left out.
fn listed(found: &[impl Cells], deleted: &BTreeMap<TaskId, String>) -> Result<Listed> {
    let mut l = Listed { out: Vec::new(), last: HashMap::new(), on_row: HashSet::new() };
    for r in found {
        let id = rows::id(r, "id")?;
        if r.int("present")?.is_none() {
            if let Some(handler) = deleted.get(&id).cloned() {
                l.out.push(DependencyResults { id, handler, succeeded: true, results: None, results_left_out: false });
                // No run to read (a run of no results): none is looked for in `task_runs`.
                l.last.insert(id, (0, 0));
            }
            continue;
        }
        // A run that succeeded kept on its task's row (see `store::transitions`), from there.
        if rows::is_kept(r)? {
            let run = rows::id(r, "run_id")?;
            l.last.insert(id, (run, usize::try_from(r.int("bytes")?.unwrap_or(0)).unwrap_or(usize::MAX)));
            l.on_row.insert(id);
        }
        l.out.push(DependencyResults {
            id,
            handler: r.text("task_handler_class")?.unwrap_or_default(),
            succeeded: rows::task_state(r)? == TaskState::Succeeded,
            results: None,
            results_left_out: false,
        });
    }
    Ok(l)
}

/// The tasks `task` runs after, in id order, each with its last run's results while those fit
/// in `max_bytes` in all (past it they are left out, so a join over many tasks costs the reader
/// at most that). One deleted by its success is listed as succeeded, without results (none are
/// kept); one deleted finished since (rotated, or by `delete-finished`) is not listed.
pub async fn results_of<D: Dialect>(db: &D, task: TaskId, max_bytes: usize) -> Result<Vec<DependencyResults>> {
    let sql = "SELECT d.after_id AS id, q.id AS present, q.task_handler_class, q.last_status, q.gave_up_on,
                   q.run_id, q.run_duration_ms, octet_length(q.run_results) AS bytes
               FROM task_deps d LEFT JOIN task_queue q ON q.id = d.after_id
               WHERE d.task_id = $1 ORDER BY d.after_id";
    let found = db.rows(None, sql, args![task]).await?;
    let deleted = super::ends::deleted(db, None, &gone(&found)?).await?;
    let Listed { mut out, mut last, on_row } = listed(&found, &deleted)?;
    // The others' from `task_runs`, by plain lookups in lists (no correlated subquery: a planner
    // without statistics, on fresh tables, ran one as a scan a row).
    let ids: Vec<TaskId> = out.iter().map(|d| d.id).filter(|id| !last.contains_key(id)).collect();
    // One row a dependency, however many runs it had (a task may run thousands of times).
    let mut newest: Vec<i64> = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let sql = "SELECT MAX(id) AS id FROM task_runs WHERE task_queue_id IN ($1) GROUP BY task_queue_id";
        for r in &db.rows(None, sql, args![chunk]).await? {
            newest.push(rows::id(r, "id")?);
        }
    }
    for chunk in newest.chunks(1000) {
        let sql = "SELECT id, task_queue_id, octet_length(results) AS bytes FROM task_runs WHERE id IN ($1)";
        for r in &db.rows(None, sql, args![chunk]).await? {
            let bytes = usize::try_from(r.int("bytes")?.unwrap_or(0)).unwrap_or(usize::MAX);
            last.insert(rows::id(r, "task_queue_id")?, (rows::id(r, "id")?, bytes));
        }
    }
    // Sizes first: a result is read only once it is known to fit.
    let (mut runs, mut left) = (HashMap::new(), max_bytes);
    for (i, d) in out.iter_mut().enumerate() {
        match last.get(&d.id) {
            Some(&(run, bytes)) if bytes > 0 && bytes <= left => {
                left -= bytes;
                runs.insert(run, i);
            }
            Some(&(_, bytes)) if bytes > 0 => d.results_left_out = true,
            _ => {}
        }
    }
    // Those kept by task id from the tasks' rows (their runs' ids are not indexed there), then the
    // others by run id from `task_runs`, with any no longer on its row (replayed meanwhile: the
    // replay wrote it there).
    let kept: Vec<TaskId> =
        runs.values().filter_map(|&i| out.get(i).map(|d| d.id)).filter(|t| on_row.contains(t)).collect();
    let mut unread: HashSet<i64> = runs.keys().copied().collect();
    let reads = [
        "SELECT run_id AS id, run_results AS results FROM task_queue WHERE id IN ($1)",
        "SELECT id, results FROM task_runs WHERE id IN ($1)",
    ];
    for (step, sql) in reads.into_iter().enumerate() {
        let ids: Vec<i64> = match step {
            0 => kept.clone(),
            _ => unread.iter().copied().collect(),
        };
        for chunk in ids.chunks(1000) {
            for r in &db.rows(None, sql, args![chunk]).await? {
                let run = rows::id(r, "id")?;
                if let Some(d) = runs.get(&run).filter(|_| unread.remove(&run)).and_then(|&i| out.get_mut(i)) {
                    d.results = r.text("results")?;
                }
            }
        }
    }
    Ok(out)
}
