-- MySQL (not MariaDB) runs this file in place of mysql/0019_dependencies.sql: the CHECK named by
-- mysql-only/0008 is made again by name (MySQL keeps a redefined column's old CHECK).
ALTER TABLE task_queue DROP CHECK task_queue_last_status;
ALTER TABLE task_queue ADD CONSTRAINT task_queue_last_status
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
