-- MySQL (not MariaDB) runs this file in place of mysql/0041_sql_add_names_unpadded.sql, which makes MariaDB's
-- `taskhost_add` procedures again: MySQL has none yet (docs/databases.md).
DO 0;
