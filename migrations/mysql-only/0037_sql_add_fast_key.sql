-- MySQL (not MariaDB) runs this file in place of mysql/0037_sql_add_fast_key.sql, which makes MariaDB's
-- `taskhost_add` procedures again: MySQL has none yet (docs/databases.md).
DO 0;
