-- MySQL's `taskhost_add` procedures made again with fixes (mysql-only/0048); MariaDB's are as 0041
-- and 0046 made them.
DO 0;
