-- Snooze (issue 47): a run may end `snoozed`, neither a success nor a failure; its task is
-- scheduled again and counts its snoozes (`[tasks] max_snoozes` bounds them). SQLite cannot
-- change a CHECK constraint, so the runs table is rebuilt as in 0012: the same columns, the new
-- status allowed, its counter carried over, its index created again.

ALTER TABLE task_queue ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;

CREATE TABLE task_runs_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    task_queue_id      INTEGER NOT NULL,
    attempt            INTEGER NOT NULL,
    created_on         TEXT    NOT NULL,
    started_on         TEXT,
    percents_completed INTEGER NOT NULL DEFAULT 0,
    finished_on        TEXT,
    results            TEXT,
    status             TEXT    NOT NULL DEFAULT 'scheduled'
                       CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled',
                                         'snoozed')),
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
ALTER TABLE task_runs_new RENAME TO task_runs;
CREATE INDEX task_runs_task ON task_runs (task_queue_id);
