//! PostgreSQL's success path: a batch of runs that succeeded, kept on their tasks' rows, in one statement.

use super::*;

/// Write runs that succeed on their tasks' rows, in one statement. The tasks' guard is written
/// `(…) IS TRUE` (the same for a status never NULL) so that it does not match the partial index
/// of running tasks (nor does progress's): the planner estimates that index at a row or so (its statistics see few
/// running among many finished tasks) and, planned with it, scanned every running task for each
/// run of the batch (20 ms a batch of 250 with 300 running and a million tasks kept; 7 ms by the
/// primary key).
pub(super) async fn finish_successes(conn: &mut PgConnection, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
    let task = transitions::Set::of(Transition::Succeed, "t.f");
    let kept = transitions::kept_run("", "t.res", "t.ms", "t.dg", "t.fu", "t.lg");
    let from = transitions::from::<PostgresDb>(Transition::Succeed);
    // Each run stays on its task's row (see `store::transitions`): no run row is written.
    let sql = format!(
        "UPDATE task_queue q SET {task}, {kept}
         FROM UNNEST($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[], $5::text[], $6::bigint[],
                     $7::text[], $8::bigint[]) AS t(id, f, res, ms, dg, fu, lg, task)
         WHERE q.id = t.task AND q.run_id = t.id AND (q.{from}) IS TRUE
         RETURNING q.run_id AS id, q.run_runner_id AS task_runner_id, q.run_started_on AS started_on,
             q.task_handler_class, q.queue"
    );
    let found = sqlx::query(&sql)
        .bind(ok.iter().map(|o| o.run_id).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.finished_on).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.results()).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.duration_ms).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.component_digest.clone()).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.fuel_used).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.logs.clone()).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.task_id).collect::<Vec<_>>())
        .fetch_all(&mut *conn)
        .await?;
    found.iter().map(Ended::read).collect()
}

/// Delete the tasks of these successes that may go and write their ends, a row a queue and
/// handler and span, in one statement (see `transitions::ends`); the runs so ended.
pub(super) async fn delete_successes(conn: &mut PgConnection, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
    let from = transitions::from::<PostgresDb>(Transition::Succeed);
    let (deletable, columns, span) =
        (transitions::ends::DELETABLE, transitions::ends::END_COLUMNS, transitions::ends::SPAN);
    let sql = format!(
        "WITH gone AS (
             DELETE FROM task_queue q USING UNNEST($1::bigint[], $2::bigint[], $3::timestamptz[]) AS t(task, run, f)
             WHERE q.id = t.task AND q.run_id = t.run AND (q.{from}) IS TRUE AND {deletable}
             RETURNING q.id AS task, t.f, q.queue, q.task_handler_class, q.run_id, q.run_runner_id,
                 q.run_started_on),
         ends AS (INSERT INTO task_ends ({columns})
                  SELECT max(task), max(f), queue, task_handler_class, count(*), min(task), sum(task),
                         string_agg(task::text, ',' ORDER BY task)
                  FROM gone GROUP BY queue, task_handler_class, task / {span})
         SELECT run_id AS id, run_runner_id AS task_runner_id, run_started_on AS started_on, task_handler_class, queue
         FROM gone"
    );
    let found = sqlx::query(&sql)
        .bind(ok.iter().map(|o| o.task_id).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.run_id).collect::<Vec<_>>())
        .bind(ok.iter().map(|o| o.finished_on).collect::<Vec<_>>())
        .fetch_all(&mut *conn)
        .await?;
    found.iter().map(Ended::read).collect()
}
