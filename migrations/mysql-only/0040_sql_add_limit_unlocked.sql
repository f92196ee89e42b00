-- MySQL (not MariaDB) runs this file in place of mysql/0040_sql_add_limit_unlocked.sql, which makes MariaDB's
-- `taskhost_add` procedures again: MySQL has none yet (docs/databases.md).
DO 0;
