-- A new status, `cancelled`, for runs and tasks; rotation deletes cancelled tasks by age as it
-- does successful ones, so the index of finished tasks covers both.
ALTER TABLE task_queue DROP CONSTRAINT task_queue_last_status_check,
    ADD CONSTRAINT task_queue_last_status_check
        CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled'));
ALTER TABLE task_runs DROP CONSTRAINT task_runs_status_check,
    ADD CONSTRAINT task_runs_status_check
        CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled'));
DROP INDEX task_queue_done;
CREATE INDEX task_queue_done ON task_queue (finished_on) WHERE last_status IN ('success', 'cancelled');
