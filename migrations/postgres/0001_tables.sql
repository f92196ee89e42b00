-- taskhost on PostgreSQL: the same tables, columns, statuses and indexes as on SQLite.
-- Integers are BIGINT throughout so every backend decodes the same Rust types.

CREATE TABLE task_runners (
    id            BIGSERIAL PRIMARY KEY,
    process_id    BIGINT      NOT NULL,
    host_name     TEXT        NOT NULL,
    started_on    TIMESTAMPTZ NOT NULL,
    finished_on   TIMESTAMPTZ,
    status        TEXT        NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'success', 'timeout')),
    heartbeat_on  TIMESTAMPTZ NOT NULL
);
CREATE INDEX task_runners_live ON task_runners (status, heartbeat_on);

CREATE TABLE task_queue (
    id                 BIGSERIAL PRIMARY KEY,
    queued_on          TIMESTAMPTZ NOT NULL,
    queued_by_id       TEXT,
    scheduled_on       TIMESTAMPTZ NOT NULL,
    task_handler_class TEXT        NOT NULL,
    task_data          TEXT        NOT NULL,
    last_status        TEXT        NOT NULL DEFAULT 'scheduled'
                       CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout')),
    max_retries        BIGINT      NOT NULL DEFAULT 5,
    task_runs_failed   BIGINT      NOT NULL DEFAULT 0,
    queue              TEXT        NOT NULL DEFAULT 'default',
    priority           BIGINT      NOT NULL DEFAULT 0,
    unique_key         TEXT,
    active_unique_key  TEXT UNIQUE,
    run_timeout        BIGINT,
    backoff_base_ms    BIGINT,
    backoff_max_ms     BIGINT,
    finished_on        TIMESTAMPTZ,
    gave_up_on         TIMESTAMPTZ
);
CREATE INDEX task_queue_claim ON task_queue (queue, priority, scheduled_on, id)
    WHERE last_status = 'scheduled';
CREATE INDEX task_queue_failed ON task_queue (scheduled_on)
    WHERE last_status IN ('error', 'timeout') AND gave_up_on IS NULL;
CREATE INDEX task_queue_done ON task_queue (finished_on) WHERE last_status = 'success';

CREATE TABLE task_runs (
    id                 BIGSERIAL PRIMARY KEY,
    task_queue_id      BIGINT      NOT NULL REFERENCES task_queue (id),
    attempt            BIGINT      NOT NULL,
    created_on         TIMESTAMPTZ NOT NULL,
    started_on         TIMESTAMPTZ,
    percents_completed BIGINT      NOT NULL DEFAULT 0,
    finished_on        TIMESTAMPTZ,
    results            TEXT,
    status             TEXT        NOT NULL DEFAULT 'scheduled'
                       CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout')),
    error_code         TEXT,
    error_message      TEXT,
    task_runner_id     BIGINT REFERENCES task_runners (id),
    timeout_on         TIMESTAMPTZ,
    duration_ms        BIGINT,
    component_digest   TEXT,
    fuel_used          BIGINT,
    logs               TEXT
);
CREATE INDEX task_runs_task ON task_runs (task_queue_id);
CREATE INDEX task_runs_running ON task_runs (task_runner_id, timeout_on) WHERE status = 'running';
