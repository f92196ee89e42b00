-- A running run lives on its task's row, not in task_runs: the claim writes it there with the
-- task's status (one row written, not a task updated and a run inserted), and the run row is
-- inserted once, when the run ends, with everything it ended with. The run_* columns mean
-- something only while last_status is 'running', except run_attempt: the attempt of the task's
-- latest run (0 before its first), which the next claim counts on from.
ALTER TABLE task_queue
    ADD COLUMN run_id BIGINT,
    ADD COLUMN run_attempt BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN run_runner_id BIGINT,
    ADD COLUMN run_started_on TIMESTAMPTZ,
    ADD COLUMN run_timeout_on TIMESTAMPTZ,
    ADD COLUMN run_percent BIGINT,
    ADD COLUMN run_results TEXT;
UPDATE task_queue q SET run_attempt = r.last
FROM (SELECT task_queue_id, max(attempt) AS last FROM task_runs GROUP BY task_queue_id) r
WHERE r.task_queue_id = q.id;
-- Runs running under an earlier version move onto their tasks, with their ids: their workers
-- finish them by id.
UPDATE task_queue q SET run_id = r.id, run_runner_id = r.task_runner_id, run_started_on = r.started_on,
    run_timeout_on = r.timeout_on, run_percent = r.percents_completed, run_results = r.results
FROM task_runs r
WHERE r.task_queue_id = q.id AND r.status = 'running' AND q.last_status = 'running';
DELETE FROM task_runs WHERE status = 'running';
DROP INDEX task_runs_running;
-- Run ids come from task_runs' own sequence here (nextval in the claim); the counter table is
-- SQLite's and MySQL's source of them, kept on every database for one schema.
CREATE TABLE task_counters (name TEXT PRIMARY KEY, v BIGINT NOT NULL);
