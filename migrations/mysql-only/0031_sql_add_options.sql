-- MySQL (not MariaDB) runs this file in place of mysql/0031_sql_add_options.sql, which makes MariaDB's
-- `taskhost_add` procedures again: MySQL has none yet (docs/databases.md).
DO 0;
