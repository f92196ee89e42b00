-- A running run lives on its task's row, not in task_runs: the claim writes it there with the
-- task's status (one row written, not a task updated and a run inserted), and the run row is
-- inserted once, when the run ends, with everything it ended with. The run_* columns mean
-- something only while last_status is 'running', except run_attempt: the attempt of the task's
-- latest run (0 before its first), which the next claim counts on from.
ALTER TABLE task_queue ADD COLUMN run_id INTEGER;
ALTER TABLE task_queue ADD COLUMN run_attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_queue ADD COLUMN run_runner_id INTEGER;
ALTER TABLE task_queue ADD COLUMN run_started_on TEXT;
ALTER TABLE task_queue ADD COLUMN run_timeout_on TEXT;
ALTER TABLE task_queue ADD COLUMN run_percent INTEGER;
ALTER TABLE task_queue ADD COLUMN run_results TEXT;
UPDATE task_queue SET run_attempt = r.last
FROM (SELECT task_queue_id, max(attempt) AS last FROM task_runs GROUP BY task_queue_id) r
WHERE r.task_queue_id = task_queue.id;
-- Runs running under an earlier version move onto their tasks, with their ids: their workers
-- finish them by id.
UPDATE task_queue SET run_id = r.id, run_runner_id = r.task_runner_id, run_started_on = r.started_on,
    run_timeout_on = r.timeout_on, run_percent = r.percents_completed, run_results = r.results
FROM task_runs r
WHERE r.task_queue_id = task_queue.id AND r.status = 'running' AND task_queue.last_status = 'running';
-- Run ids come from this counter (a claim takes a block of them in its write transaction).
CREATE TABLE task_counters (name TEXT PRIMARY KEY, v INTEGER NOT NULL);
INSERT INTO task_counters (name, v) SELECT 'task_runs', coalesce(max(id), 0) FROM task_runs;
-- Past every id handed out, those of runs rotation deleted too.
UPDATE task_counters SET v = max(v, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'task_runs'), 0));
DELETE FROM task_runs WHERE status = 'running';
DROP INDEX IF EXISTS task_runs_running;
