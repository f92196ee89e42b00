-- A running run lives on its task's row, not in task_runs: the claim writes it there with the
-- task's status (one row written, not a task updated and a run inserted), and the run row is
-- inserted once, when the run ends, with everything it ended with. The run_* columns mean
-- something only while last_status is 'running', except run_attempt: the attempt of the task's
-- latest run (0 before its first), which the next claim counts on from.
ALTER TABLE task_queue
    ADD COLUMN run_id BIGINT NULL,
    ADD COLUMN run_attempt BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN run_runner_id BIGINT NULL,
    ADD COLUMN run_started_on DATETIME(6) NULL,
    ADD COLUMN run_timeout_on DATETIME(6) NULL,
    ADD COLUMN run_percent BIGINT NULL,
    ADD COLUMN run_results LONGTEXT NULL;
UPDATE task_queue q JOIN (SELECT task_queue_id, max(attempt) AS last FROM task_runs GROUP BY task_queue_id) r
    ON r.task_queue_id = q.id
SET q.run_attempt = r.last;
-- Runs running under an earlier version move onto their tasks, with their ids: their workers
-- finish them by id.
UPDATE task_queue q JOIN task_runs r ON r.task_queue_id = q.id AND r.status = 'running'
SET q.run_id = r.id, q.run_runner_id = r.task_runner_id, q.run_started_on = r.started_on,
    q.run_timeout_on = r.timeout_on, q.run_percent = r.percents_completed, q.run_results = r.results
WHERE q.last_status = 'running';
-- Run ids come from this counter (a claim takes a block of them in its transaction).
CREATE TABLE task_counters (name VARCHAR(64) NOT NULL PRIMARY KEY, v BIGINT NOT NULL)
    ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
-- Past every id handed out, those of runs rotation deleted too.
INSERT INTO task_counters (name, v)
SELECT 'task_runs', GREATEST(
    (SELECT coalesce(max(id), 0) FROM task_runs),
    (SELECT coalesce(max(AUTO_INCREMENT), 1) - 1 FROM information_schema.TABLES
     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_runs'));
DELETE FROM task_runs WHERE status = 'running';
ALTER TABLE task_runs DROP INDEX task_runs_running, DROP COLUMN running_timeout_on;
