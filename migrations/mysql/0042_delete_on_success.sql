-- A queue may delete its tasks that succeed (issue 51, `limits set queue:NAME --on-success delete`):
-- the success deletes the task's row and writes a narrow row of `task_ends` instead (its id,
-- when it ended, its queue, handler and attempt), which the event stream, the counts and a later
-- `after` read; rotated as finished tasks are. Only a task nothing will read again is deleted:
-- `keep_row` is set on one a wait, a dependent or a signal names, and a task with a unique key, a
-- failed or snoozed run, or children is kept (`store::transitions::ends`).
ALTER TABLE task_run_limits ADD COLUMN on_success VARCHAR(16) NULL;
ALTER TABLE task_queue ADD COLUMN keep_row BIGINT NULL;
CREATE TABLE task_ends (
    id                 BIGINT NOT NULL PRIMARY KEY,
    finished_on        DATETIME(6) NOT NULL,
    queue              VARCHAR(255) NOT NULL,
    task_handler_class VARCHAR(255) NOT NULL,
    run_attempt        BIGINT NOT NULL,
    KEY task_ends_finished (finished_on)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
