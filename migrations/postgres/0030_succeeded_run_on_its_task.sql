-- A task's run that succeeded stays on its task's row, not in task_runs (issue 51): the success
-- writes the run's outcome there with the task's status, in one row written, where it used to insert
-- a run row too (a fifth of the WAL a task, and its index entries). run_duration_ms is set exactly
-- while the row holds such a run; a replay writes it to task_runs before the task runs again.
-- Its status is the task's (succeeded), its end the task's finished_on, its results run_results.
-- Tasks that succeeded before this migration keep their run rows (run_duration_ms NULL).
ALTER TABLE task_queue
    ADD COLUMN run_duration_ms BIGINT,
    ADD COLUMN run_digest TEXT,
    ADD COLUMN run_fuel_used BIGINT,
    ADD COLUMN run_logs TEXT;
