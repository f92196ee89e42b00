-- MySQL (not MariaDB) runs this file in place of mysql/0029_sql_add.sql: its column and index, not
-- MariaDB's `taskhost_add` procedure (MySQL has none yet: docs/databases.md).
ALTER TABLE task_queue
    ADD COLUMN arriving BIGINT AS (CASE WHEN last_status = 'waiting' AND waiting_for < 0 THEN 1 END) VIRTUAL,
    ADD INDEX task_queue_arriving (arriving);
