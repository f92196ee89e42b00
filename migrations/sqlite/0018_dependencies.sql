-- Dependencies (issue 47): a task queued `after` others is `waiting` until each has succeeded,
-- counting those it still waits for (`waiting_for`); `task_deps` holds what it runs after and
-- which of them has succeeded (`met`). A waiting task is outside the claim's index, so waiting
-- costs the claims nothing. SQLite cannot change a CHECK constraint, so `task_queue` is rebuilt
-- as in 0008: the same columns, the new status allowed, every index created again.

CREATE TABLE task_queue_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    queued_on          TEXT    NOT NULL,
    queued_by_id       TEXT,
    scheduled_on       TEXT    NOT NULL,
    task_handler_class TEXT    NOT NULL,
    task_data          TEXT    NOT NULL,
    last_status        TEXT    NOT NULL DEFAULT 'scheduled'
                       CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled',
                                              'waiting')),
    max_retries        INTEGER NOT NULL DEFAULT 5,
    task_runs_failed   INTEGER NOT NULL DEFAULT 0,
    queue              TEXT    NOT NULL DEFAULT 'default',
    priority           INTEGER NOT NULL DEFAULT 0,
    unique_key         TEXT,
    active_unique_key  TEXT,
    run_timeout        INTEGER,
    backoff_base_ms    INTEGER,
    backoff_max_ms     INTEGER,
    finished_on        TEXT,
    gave_up_on         TEXT,
    run_id             INTEGER,
    run_attempt        INTEGER NOT NULL DEFAULT 0,
    run_runner_id      INTEGER,
    run_started_on     TEXT,
    run_timeout_on     TEXT,
    run_percent        INTEGER,
    run_results        TEXT,
    snoozes            INTEGER NOT NULL DEFAULT 0,
    parent_id          INTEGER,
    depth              INTEGER NOT NULL DEFAULT 0,
    waiting_for        INTEGER NOT NULL DEFAULT 0,
    run_anyway         INTEGER NOT NULL DEFAULT 0
);
INSERT INTO task_queue_new
    SELECT id, queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, last_status, max_retries,
           task_runs_failed, queue, priority, unique_key, active_unique_key, run_timeout, backoff_base_ms,
           backoff_max_ms, finished_on, gave_up_on, run_id, run_attempt, run_runner_id, run_started_on,
           run_timeout_on, run_percent, run_results, snoozes, parent_id, depth, 0, 0
    FROM task_queue;
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'task_queue_new', seq FROM sqlite_sequence WHERE name = 'task_queue'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'task_queue_new');
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'task_queue'))
    WHERE name = 'task_queue_new';
DROP TABLE task_queue;
ALTER TABLE task_queue_new RENAME TO task_queue;
CREATE INDEX task_queue_claim ON task_queue (queue, priority, scheduled_on, id)
    WHERE last_status = 'scheduled';
CREATE INDEX task_queue_failed ON task_queue (scheduled_on)
    WHERE last_status IN ('error', 'timeout') AND gave_up_on IS NULL;
CREATE INDEX task_queue_done ON task_queue (finished_on) WHERE last_status IN ('success', 'cancelled');
CREATE UNIQUE INDEX task_queue_active_unique ON task_queue (active_unique_key)
    WHERE active_unique_key IS NOT NULL;
CREATE INDEX task_queue_running ON task_queue (queue, task_handler_class) WHERE last_status = 'running';
CREATE INDEX task_queue_parent ON task_queue (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE task_deps (
    task_id  INTEGER NOT NULL,
    after_id INTEGER NOT NULL,
    met      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, after_id)
);
CREATE INDEX task_deps_after ON task_deps (after_id);
