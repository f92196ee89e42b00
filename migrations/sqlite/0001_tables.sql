-- taskhost on SQLite: the three tables of the design.
-- Times are TEXT in UTC, 'YYYY-MM-DD HH:MM:SS.ffffff' (fixed width, so they sort as text).

CREATE TABLE task_runners (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    process_id    INTEGER NOT NULL,
    host_name     TEXT    NOT NULL,
    started_on    TEXT    NOT NULL,
    finished_on   TEXT,
    status        TEXT    NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'success', 'timeout')),
    heartbeat_on  TEXT    NOT NULL
);
CREATE INDEX task_runners_live ON task_runners (status, heartbeat_on);

CREATE TABLE task_queue (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    queued_on          TEXT    NOT NULL,
    queued_by_id       TEXT,
    -- When the next run is due: the requested time, then the retry time after a failure.
    scheduled_on       TEXT    NOT NULL,
    task_handler_class TEXT    NOT NULL,
    task_data          TEXT    NOT NULL,
    last_status        TEXT    NOT NULL DEFAULT 'scheduled'
                       CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout')),
    max_retries        INTEGER NOT NULL DEFAULT 5,
    task_runs_failed   INTEGER NOT NULL DEFAULT 0,
    queue              TEXT    NOT NULL DEFAULT 'default',
    priority           INTEGER NOT NULL DEFAULT 0,
    unique_key         TEXT,
    -- unique_key while the task is unfinished, NULL after: uniqueness "while not finished"
    -- without a partial unique index (MySQL has none).
    active_unique_key  TEXT UNIQUE,
    run_timeout        INTEGER,           -- seconds; NULL = the system-wide default
    backoff_base_ms    INTEGER,
    backoff_max_ms     INTEGER,
    finished_on        TEXT,              -- set on success or when given up
    gave_up_on         TEXT               -- set when it will not be retried: a dead letter
);
-- Claiming: due scheduled tasks of a queue in priority, then FIFO order.
CREATE INDEX task_queue_claim ON task_queue (queue, priority, scheduled_on, id)
    WHERE last_status = 'scheduled';
-- Failed tasks waiting for their retry run.
CREATE INDEX task_queue_failed ON task_queue (scheduled_on)
    WHERE last_status IN ('error', 'timeout') AND gave_up_on IS NULL;
-- Rotation: successful tasks by age.
CREATE INDEX task_queue_done ON task_queue (finished_on) WHERE last_status = 'success';

CREATE TABLE task_runs (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    task_queue_id      INTEGER NOT NULL REFERENCES task_queue (id),
    attempt            INTEGER NOT NULL,
    created_on         TEXT    NOT NULL,
    started_on         TEXT,
    percents_completed INTEGER NOT NULL DEFAULT 0,
    finished_on        TEXT,
    results            TEXT,
    status             TEXT    NOT NULL DEFAULT 'scheduled'
                       CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout')),
    error_code         TEXT,
    error_message      TEXT,
    task_runner_id     INTEGER REFERENCES task_runners (id),
    timeout_on         TEXT,              -- started_on + the task's run timeout
    duration_ms        INTEGER,
    component_digest   TEXT,              -- sha256 of the component that ran
    fuel_used          INTEGER,
    logs               TEXT
);
-- Indexes are few on purpose: every status change rewrites the entries of indexes on it.
CREATE INDEX task_runs_task ON task_runs (task_queue_id);
-- Running runs only (a small set): by runner for liveness, scanned for run timeouts.
CREATE INDEX task_runs_running ON task_runs (task_runner_id, timeout_on) WHERE status = 'running';
