-- Dependencies (issue 47): a task queued `after` others is `waiting` until each has succeeded,
-- counting those it still waits for (`waiting_for`); `task_deps` holds what it runs after and
-- which of them has succeeded (`met`). A waiting task is outside the claim's index, so waiting
-- costs the claims nothing.
ALTER TABLE task_queue DROP CONSTRAINT task_queue_last_status_check,
    ADD CONSTRAINT task_queue_last_status_check
        CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled', 'waiting')),
    ADD COLUMN waiting_for bigint NOT NULL DEFAULT 0,
    ADD COLUMN run_anyway bigint NOT NULL DEFAULT 0;
CREATE TABLE task_deps (
    task_id  bigint NOT NULL,
    after_id bigint NOT NULL,
    met      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, after_id)
);
CREATE INDEX task_deps_after ON task_deps (after_id);
