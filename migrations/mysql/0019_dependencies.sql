-- Dependencies (issue 47): a task queued `after` others is `waiting` until each has succeeded,
-- counting those it still waits for (`waiting_for`); `task_deps` holds what it runs after and
-- which of them has succeeded (`met`). MariaDB replaces a column's CHECK when the column is
-- redefined (as in 0008).
ALTER TABLE task_queue MODIFY last_status VARCHAR(16) NOT NULL DEFAULT 'scheduled'
    CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled', 'waiting')),
    ADD COLUMN waiting_for bigint NOT NULL DEFAULT 0,
    ADD COLUMN run_anyway bigint NOT NULL DEFAULT 0;
CREATE TABLE task_deps (
    task_id  bigint NOT NULL,
    after_id bigint NOT NULL,
    met      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, after_id),
    INDEX task_deps_after (after_id)
) ENGINE=InnoDB;
