-- MySQL (not MariaDB) runs this file in place of mysql/0032_sql_add_fast.sql, which makes MariaDB's
-- `taskhost_add` procedures again: MySQL has none yet (docs/databases.md).
DO 0;
