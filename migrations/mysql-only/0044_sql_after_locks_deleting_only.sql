-- MySQL (not MariaDB) runs this file in place of mysql/0044_sql_after_locks_deleting_only.sql, which makes MariaDB's
-- `taskhost_add` procedures again: MySQL has none yet (docs/databases.md).
DO 0;
