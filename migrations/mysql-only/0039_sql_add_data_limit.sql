-- MySQL (not MariaDB) runs this file in place of mysql/0039_sql_add_data_limit.sql: its limit's
-- row, not MariaDB's `taskhost_add` procedures (MySQL has none yet: docs/databases.md).
INSERT IGNORE INTO task_counters (name, v) VALUES ('max_data_bytes', 1048576);
