-- Snooze (issue 47): a run may end `snoozed`, neither a success nor a failure; its task is
-- scheduled again and counts its snoozes (`[tasks] max_snoozes` bounds them).
ALTER TABLE task_queue ADD COLUMN snoozes bigint NOT NULL DEFAULT 0;
ALTER TABLE task_runs DROP CONSTRAINT task_runs_status_check,
    ADD CONSTRAINT task_runs_status_check
        CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled', 'snoozed'));
