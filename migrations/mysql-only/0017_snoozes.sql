-- MySQL (not MariaDB) runs this file in place of mysql/0017_snoozes.sql: the CHECK named by
-- mysql-only/0008 is made again by name (MySQL keeps a redefined column's old CHECK).
ALTER TABLE task_queue ADD COLUMN snoozes bigint NOT NULL DEFAULT 0;
ALTER TABLE task_runs DROP CHECK task_runs_status;
ALTER TABLE task_runs ADD CONSTRAINT task_runs_status
    CHECK (status IN ('scheduled', 'running', 'success', 'error', 'timeout', 'cancelled', 'snoozed'));
