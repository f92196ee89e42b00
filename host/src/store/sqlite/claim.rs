//! SQLite's claim: one statement in the write turn, the run ids from the counter.

use super::*;

/// The claim inside `tx`; of the tasks `only` when given (the limited claim holds them locked).
pub(super) async fn claim_in(
    db: &SqliteDb,
    tx: &mut Tx<Sqlite>,
    req: &ClaimRequest<'_>,
    only: Option<&[TaskId]>,
) -> Result<Vec<ClaimedRun>> {
    let now = req.now;
    let handler_cond = if req.handlers.is_some() { "AND task_handler_class IN ($4)" } else { "" };
    let only_cond = if only.is_some() { "AND id IN ($5)" } else { "" };
    let scheduled = transitions::is::<SqliteDb>(TaskState::Scheduled);
    let not_paused = transitions::NOT_PAUSED;
    // Run ids follow the counter, in claim order; the counter is moved past them after (this
    // transaction is the only writer). A task's own timeout is added to the claim's time, whose
    // fraction of a second strftime would cut to milliseconds: it is carried over from `$1`.
    let timeout = "CASE WHEN task_queue.run_timeout IS NULL THEN $8
                   ELSE strftime('%Y-%m-%d %H:%M:%S', $1, '+' || min(task_queue.run_timeout, 3153600000) || ' seconds')
                        || substr($1, 20) END";
    let claimed = transitions::claimed_task("$7 + picked.n", "$6", "$1", timeout);
    let first_due = |queue: &str| {
        format!(
            "SELECT id, priority, scheduled_on FROM task_queue
             WHERE {scheduled} AND {queue} AND scheduled_on <= $1 AND {not_paused} {handler_cond} {only_cond}
             ORDER BY priority, scheduled_on, id LIMIT $3"
        )
    };
    // One queue: an equality the claim index seeks on, in claim order. A few: each queue's
    // first due tasks so (`$9` on), then the first of them all; `queue IN (…)` sorted every due
    // task of the queues instead (52 ms a claim against 0.1 ms, three queues holding 200,000),
    // as it still does past `UNION_MOST` queues (SQLite allows 500 terms in a compound select).
    const UNION_MOST: usize = 100;
    let candidates = match req.queues.len() {
        1 => first_due("queue = $2"),
        n if n <= UNION_MOST => {
            let each = (0..n).map(|i| format!("SELECT * FROM ({})", first_due(&format!("queue = ${}", 9 + i))));
            each.collect::<Vec<_>>().join(" UNION ALL ")
        }
        _ => first_due("queue IN ($2)"),
    };
    let pick = format!(
        "WITH picked AS (
             SELECT id, row_number() OVER (ORDER BY priority, scheduled_on, id) AS n FROM ({candidates})
             ORDER BY priority, scheduled_on, id LIMIT $3)
         UPDATE task_queue SET {claimed}
         FROM picked WHERE task_queue.id = picked.id
           AND EXISTS (SELECT 1 FROM task_runners WHERE id = $6 AND status = {RUNNER_RUNNING})
         RETURNING {CLAIM_COLUMNS}, run_id, run_attempt, {}",
        transitions::RUN_DIGEST
    );
    let last = last_run_id(db, tx).await?;
    let queues = if req.queues.len() == 1 { Arg::from(&req.queues[0]) } else { Arg::Texts(req.queues) };
    let mut args = vec![
        Arg::Time(now),
        queues,
        Arg::from(req.limit),
        Arg::Texts(req.handlers.unwrap_or_default()),
        Arg::Ints(only.unwrap_or_default()),
        Arg::from(req.runner),
        Arg::from(last),
        Arg::Time(crate::store::rows::claimed::timeout_on(now, None, req.default_timeout)),
    ];
    if (2..=UNION_MOST).contains(&req.queues.len()) {
        args.extend(req.queues.iter().map(Arg::from));
    }
    let found = db.rows(Some(&mut *tx), &pick, &args).await?;
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let mut started = std::collections::HashMap::with_capacity(found.len());
    // Found once, as `read_all` does: the columns sit alike in every row.
    let (id, run, attempt) =
        (Col::found(&found[0], "id"), Col::found(&found[0], "run_id"), Col::found(&found[0], "run_attempt"));
    for r in &found {
        let (task, run, attempt) = (crate::store::rows::id(r, id)?, crate::store::rows::id(r, run)?, r.int(attempt)?);
        started.insert(task, (run, attempt.unwrap_or(1)));
    }
    db.take_run_ids(tx, found.len()).await?;
    transitions::claimed_runs(req, ClaimedTask::read_all(&found, now)?, started)
}

/// The run counter's value: the newest run id given out.
async fn last_run_id(db: &SqliteDb, tx: &mut Tx<Sqlite>) -> Result<i64> {
    let last = "SELECT v FROM task_counters WHERE name = 'task_runs'";
    match db.rows(Some(&mut *tx), last, &[]).await?.first() {
        Some(r) => crate::store::rows::id(r, "v"),
        None => Err(Error::CorruptRow { table: "task_counters", reason: "no task_runs counter".into() }),
    }
}
