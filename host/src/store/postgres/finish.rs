//! PostgreSQL's success path: a batch of runs that succeeded, and their tasks, in one statement.

use super::*;

/// Write runs that succeed, and their tasks, in one statement. The tasks' guard is written
/// `(…) IS TRUE` (the same for a status never NULL) so that it does not match the partial index
/// of running tasks (nor does progress's): the planner estimates that index at a row or so (its statistics see few
/// running among many finished tasks) and, planned with it, scanned every running task for each
/// run of the batch (20 ms a batch of 250 with 300 running and a million tasks kept; 7 ms by the
/// primary key).
pub(super) async fn finish_successes(conn: &mut PgConnection, ok: &[&RunOutcome]) -> Result<Vec<Ended>> {
    let task = transitions::Set::of(Transition::Succeed, "t.f");
    let from = transitions::from::<PostgresDb>(Transition::Succeed);
    // Each run's row is made here, from its task's (see `store::transitions`).
    let sql = format!(
        "WITH q AS (
             UPDATE task_queue q SET {task}
             FROM UNNEST($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[], $5::text[], $6::bigint[],
                         $7::text[], $8::bigint[]) AS t(id, f, res, ms, dg, fu, lg, task)
             WHERE q.id = t.task AND q.run_id = t.id AND (q.{from}) IS TRUE
             RETURNING q.id, q.run_id, q.run_attempt, q.run_runner_id, q.run_started_on, q.run_timeout_on,
                       q.task_handler_class, q.queue, t.f, t.res, t.ms, t.dg, t.fu, t.lg
         ),
         r AS (
             INSERT INTO task_runs ({RUN_COLUMNS}, status, finished_on, results, percents_completed, duration_ms,
                 component_digest, fuel_used, logs)
             SELECT {RUN_FROM_TASK}, {SUCCESS}, q.f, q.res, 100, q.ms, q.dg, q.fu, q.lg FROM q
         )
         SELECT run_id AS id, run_runner_id AS task_runner_id, run_started_on AS started_on, task_handler_class,
             queue
         FROM q"
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
