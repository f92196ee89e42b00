-- Snooze (issue 47): a run may end `snoozed`, neither a success nor a failure; its task is
-- scheduled again and counts its snoozes (`[tasks] max_snoozes` bounds them). MariaDB replaces a
-- column's CHECK when the column is redefined (as in 0008).
ALTER TABLE task_queue ADD COLUMN snoozes bigint NOT NULL DEFAULT 0;
ALTER TABLE task_runs MODIFY status VARCHAR(16) NOT NULL DEFAULT 'scheduled'
    CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled', 'snoozed'));
