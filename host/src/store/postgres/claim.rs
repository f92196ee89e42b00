//! PostgreSQL's claim: one statement, on connections of its own (see `PostgresDb::claims`).

use super::*;

impl PostgresDb {
    /// One claim statement: up to `limit` due runs, marked running for the runner; in `tx`
    /// when given, and of the tasks `only` when given (the limited claim holds them locked).
    pub(super) async fn claim_some(
        &self,
        tx: Option<&mut Tx<Postgres>>,
        req: &ClaimRequest<'_>,
        limit: u32,
        only: Option<&[TaskId]>,
    ) -> Result<Vec<ClaimedRun>> {
        let sql = claim_sql(req.queues.len() == 1, only.is_some());
        let mut q = sqlx::query(&sql)
            .bind(req.now)
            .bind(&req.queues[0])
            .bind(limit as i64)
            .bind(req.queues)
            .bind(req.runner)
            .bind(req.default_timeout.as_secs().min(3_153_600_000) as i64)
            .bind(req.handlers);
        if let Some(ids) = only {
            q = q.bind(ids);
        }
        let rows = match tx {
            Some(tx) => q.fetch_all(&mut *tx.tx).await?,
            None => q.fetch_all(&self.claims).await?,
        };
        let mut runs_of = std::collections::HashMap::with_capacity(rows.len());
        if let Some(first) = rows.first() {
            // Found once, as `read_all` does: the columns sit alike in every row.
            let (id, run, attempt) =
                (Col::found(first, "id"), Col::found(first, "started_id"), Col::found(first, "attempt"));
            for r in &rows {
                if let (Some(task), Some(run), Some(attempt)) = (r.int(id)?, r.int(run)?, r.int(attempt)?) {
                    runs_of.insert(task, (run, attempt));
                }
            }
        }
        transitions::claimed_runs(req, ClaimedTask::read_all(&rows, req.now)?, runs_of)
    }
}

/// The claim statement: `$1` now, `$2` the queue (`one_queue`) or `$4` the queues, `$3` the
/// limit, `$5` the runner, `$6` the default timeout in seconds, `$7` the handlers or NULL, `$8`
/// the tasks to claim among (`of_these`).
fn claim_sql(one_queue: bool, of_these: bool) -> String {
    // Its own statement (not `$8 IS NULL OR …`): the plan is generic, and must stay the
    // fast one for the claims without it.
    let only_cond = if of_these { "AND id = ANY($8)" } else { "" };
    // One statement, so one round trip and atomic without an explicit transaction. Every row
    // is reached by a unique key (primary keys), whose selectivity the planner knows without
    // statistics; on a queue they are always stale.
    let scheduled = transitions::is::<PostgresDb>(TaskState::Scheduled);
    let not_paused = transitions::NOT_PAUSED;
    let run_digest = transitions::RUN_DIGEST;
    let timeout = "$1 + make_interval(secs => least(coalesce(run_timeout, $6), 3153600000))";
    // Each task's run is made here, on the task's row (see `store::transitions`).
    let claimed = transitions::claimed_task("nextval('task_runs_id_seq')", "$5", "$1", timeout);
    // Its runner's row, shared-locked and only while it is running: a claim that reaches the
    // server after an overseer timed the runner out (a retransmission after a partition)
    // claims nothing, and one before makes the time-out wait for it and then see its runs.
    // A queue's first due tasks, in claim order, each locked as it is read: one locked by
    // another claim is skipped and the scan goes on, and one changed meanwhile is seen again as
    // it is now, every condition checked again.
    let first_due = |queue: &str| {
        format!(
            "SELECT id, priority, scheduled_on FROM task_queue
             WHERE {scheduled} AND queue = {queue} AND scheduled_on <= $1 AND {not_paused}
               AND ($7::text[] IS NULL OR task_handler_class = ANY($7)) {only_cond}
               AND EXISTS (SELECT 1 FROM me)
             ORDER BY priority, scheduled_on, id
             LIMIT $3
             FOR UPDATE SKIP LOCKED"
        )
    };
    // One queue: an equality, so the claim index yields rows already in claim order. Several:
    // each queue's first due tasks so (a seek each), then the first of them all; with `queue =
    // ANY($4)` the planner sorted every due task of the queues instead (105 ms a claim against
    // 0.5 ms, three queues holding 200,000). The rows locked and not taken (at most the limit
    // a queue) are free again when the statement ends; a claim beside it meanwhile skips them.
    let picked = if one_queue {
        first_due("$2")
    } else {
        format!(
            "SELECT t.id FROM unnest($4::text[]) AS qn (name) CROSS JOIN LATERAL ({}) t
             ORDER BY t.priority, t.scheduled_on, t.id LIMIT $3",
            first_due("qn.name")
        )
    };
    format!(
        "WITH me AS (SELECT id FROM task_runners WHERE id = $5 AND status = {RUNNER_RUNNING} FOR SHARE),
         picked AS ({picked}),
         q AS (
             UPDATE task_queue SET {claimed} WHERE id = ANY(ARRAY(SELECT id FROM picked))
             RETURNING {CLAIM_COLUMNS}, run_id AS started_id, run_attempt AS attempt, {run_digest}
         )
         SELECT * FROM q"
    )
}
