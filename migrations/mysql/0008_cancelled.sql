-- A new status, `cancelled`, for runs and tasks. MariaDB names a column's CHECK after the column
-- and replaces it when the column is redefined. (task_queue_done, on (last_status, finished_on),
-- already serves cancelled tasks.)
ALTER TABLE task_queue MODIFY last_status VARCHAR(16) NOT NULL DEFAULT 'scheduled'
    CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled'));
ALTER TABLE task_runs MODIFY status VARCHAR(16) NOT NULL DEFAULT 'scheduled'
    CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled'));
