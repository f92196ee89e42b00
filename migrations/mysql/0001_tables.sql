-- taskhost on MySQL 8 / MariaDB 10.6+: the same tables, columns and statuses as on SQLite.
-- Times are DATETIME(6) in UTC. No partial indexes here: the status leads the composite ones.

CREATE TABLE task_runners (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    process_id    BIGINT       NOT NULL,
    host_name     VARCHAR(255) NOT NULL,
    started_on    DATETIME(6)  NOT NULL,
    finished_on   DATETIME(6)  NULL,
    status        VARCHAR(16)  NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'success', 'timeout')),
    heartbeat_on  DATETIME(6)  NOT NULL,
    KEY task_runners_live (status, heartbeat_on)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE task_queue (
    id                 BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queued_on          DATETIME(6)  NOT NULL,
    queued_by_id       VARCHAR(255) NULL,
    scheduled_on       DATETIME(6)  NOT NULL,
    task_handler_class VARCHAR(255) NOT NULL,
    task_data          LONGTEXT     NOT NULL,
    last_status        VARCHAR(16)  NOT NULL DEFAULT 'scheduled'
                       CHECK (last_status IN ('scheduled', 'running', 'success', 'error', 'timeout')),
    max_retries        BIGINT       NOT NULL DEFAULT 5,
    task_runs_failed   BIGINT       NOT NULL DEFAULT 0,
    queue              VARCHAR(255) NOT NULL DEFAULT 'default',
    priority           BIGINT       NOT NULL DEFAULT 0,
    unique_key         VARCHAR(255) NULL,
    active_unique_key  VARCHAR(255) NULL,
    run_timeout        BIGINT       NULL,
    backoff_base_ms    BIGINT       NULL,
    backoff_max_ms     BIGINT       NULL,
    finished_on        DATETIME(6)  NULL,
    gave_up_on         DATETIME(6)  NULL,
    UNIQUE KEY task_queue_active_unique_key (active_unique_key),
    KEY task_queue_claim (last_status, queue, priority, scheduled_on, id),
    KEY task_queue_failed (last_status, gave_up_on),
    KEY task_queue_done (last_status, finished_on)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE task_runs (
    id                 BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_queue_id      BIGINT       NOT NULL,
    attempt            BIGINT       NOT NULL,
    created_on         DATETIME(6)  NOT NULL,
    started_on         DATETIME(6)  NULL,
    percents_completed BIGINT       NOT NULL DEFAULT 0,
    finished_on        DATETIME(6)  NULL,
    results            LONGTEXT     NULL,
    status             VARCHAR(16)  NOT NULL DEFAULT 'scheduled'
                       CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout')),
    error_code         VARCHAR(255) NULL,
    error_message      TEXT         NULL,
    task_runner_id     BIGINT       NULL,
    timeout_on         DATETIME(6)  NULL,
    duration_ms        BIGINT       NULL,
    component_digest   VARCHAR(64)  NULL,
    fuel_used          BIGINT       NULL,
    logs               MEDIUMTEXT   NULL,
    KEY task_runs_task (task_queue_id, status),
    KEY task_runs_running (status, task_runner_id),
    KEY task_runs_timeout (status, timeout_on),
    CONSTRAINT task_runs_task_fk FOREIGN KEY (task_queue_id) REFERENCES task_queue (id),
    CONSTRAINT task_runs_runner_fk FOREIGN KEY (task_runner_id) REFERENCES task_runners (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
