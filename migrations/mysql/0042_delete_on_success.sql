-- A queue may delete its tasks that succeed (issue 51, `limits set queue:NAME --on-success delete`):
-- the success deletes the task's row, and the ends of the tasks a batch deletes are written in
-- bulk to `task_ends`, one row a queue and handler: when the batch ended, the tasks' ids as text
-- (`12,15,16`), their count, least and greatest (its key) and sum. The event stream, the counts and
-- a later `after` read them; rotated as finished tasks are. Only a task nothing will read again is
-- deleted: `keep_row` is set on one a wait, a dependent or a signal names, and a task with a unique
-- key, a failed or snoozed run, or children is kept (`store::transitions::ends`).
ALTER TABLE task_run_limits ADD COLUMN on_success VARCHAR(16) NULL;
ALTER TABLE task_queue ADD COLUMN keep_row BIGINT NULL;
CREATE TABLE task_ends (
    max_id             BIGINT NOT NULL PRIMARY KEY,
    finished_on        DATETIME(6) NOT NULL,
    queue              VARCHAR(255) NOT NULL,
    task_handler_class VARCHAR(255) NOT NULL,
    n                  BIGINT NOT NULL,
    min_id             BIGINT NOT NULL,
    ids_sum            BIGINT NOT NULL,
    ids                LONGTEXT NOT NULL,
    KEY task_ends_finished (finished_on)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
