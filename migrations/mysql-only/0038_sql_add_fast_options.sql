-- MySQL (not MariaDB) runs this file in place of mysql/0038_sql_add_fast_options.sql, which makes MariaDB's
-- `taskhost_add` procedures again: MySQL has none yet (docs/databases.md).
DO 0;
