-- A new status, `cancelled`, for runs and tasks; rotation deletes cancelled tasks by age as it
-- does successful ones, so the index of finished tasks covers both.
-- SQLite cannot change a CHECK constraint, so both tables are rebuilt as in 0004 (which says
-- how): the same columns, the new status allowed, every index created again.

CREATE TABLE task_queue_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    queued_on          TEXT    NOT NULL,
    queued_by_id       TEXT,
    scheduled_on       TEXT    NOT NULL,
    task_handler_class TEXT    NOT NULL,
    task_data          TEXT    NOT NULL,
    last_status        TEXT    NOT NULL DEFAULT 'scheduled'
                       CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled')),
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
    gave_up_on         TEXT
);
INSERT INTO task_queue_new
    SELECT id, queued_on, queued_by_id, scheduled_on, task_handler_class, task_data, last_status, max_retries,
           task_runs_failed, queue, priority, unique_key, active_unique_key, run_timeout, backoff_base_ms,
           backoff_max_ms, finished_on, gave_up_on
    FROM task_queue;
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'task_queue_new', seq FROM sqlite_sequence WHERE name = 'task_queue'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'task_queue_new');
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'task_queue'))
    WHERE name = 'task_queue_new';

CREATE TABLE task_runs_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    task_queue_id      INTEGER NOT NULL REFERENCES task_queue_new (id),
    attempt            INTEGER NOT NULL,
    created_on         TEXT    NOT NULL,
    started_on         TEXT,
    percents_completed INTEGER NOT NULL DEFAULT 0,
    finished_on        TEXT,
    results            TEXT,
    status             TEXT    NOT NULL DEFAULT 'scheduled'
                       CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled')),
    error_code         TEXT,
    error_message      TEXT,
    task_runner_id     INTEGER,
    timeout_on         TEXT,
    duration_ms        INTEGER,
    component_digest   TEXT,
    fuel_used          INTEGER,
    logs               TEXT
);
INSERT INTO task_runs_new
    SELECT id, task_queue_id, attempt, created_on, started_on, percents_completed, finished_on, results, status,
           error_code, error_message, task_runner_id, timeout_on, duration_ms, component_digest, fuel_used, logs
    FROM task_runs;
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'task_runs_new', seq FROM sqlite_sequence WHERE name = 'task_runs'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'task_runs_new');
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'task_runs'))
    WHERE name = 'task_runs_new';
DROP TABLE task_runs;
DROP TABLE task_queue;
ALTER TABLE task_queue_new RENAME TO task_queue;
ALTER TABLE task_runs_new RENAME TO task_runs;
CREATE INDEX task_queue_claim ON task_queue (queue, priority, scheduled_on, id)
    WHERE last_status = 'scheduled';
CREATE INDEX task_queue_failed ON task_queue (scheduled_on)
    WHERE last_status IN ('error', 'timeout') AND gave_up_on IS NULL;
CREATE INDEX task_queue_done ON task_queue (finished_on) WHERE last_status IN ('success', 'cancelled');
CREATE UNIQUE INDEX task_queue_active_unique ON task_queue (active_unique_key)
    WHERE active_unique_key IS NOT NULL;
CREATE INDEX task_runs_task ON task_runs (task_queue_id);
CREATE INDEX task_runs_running ON task_runs (task_runner_id, timeout_on) WHERE status = 'running';
CREATE UNIQUE INDEX task_runs_scheduled ON task_runs (task_queue_id) WHERE status = 'scheduled';
