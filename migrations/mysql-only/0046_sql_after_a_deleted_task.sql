-- MySQL (not MariaDB) runs this file in place of mysql/0046_sql_after_a_deleted_task.sql, which
-- makes MariaDB's `taskhost_add_checked` procedure again: MySQL has none yet (docs/databases.md).
DO 0;
