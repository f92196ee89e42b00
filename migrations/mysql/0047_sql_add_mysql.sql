-- MySQL's `taskhost_add` procedures (mysql-only/0047): MariaDB has had its own since 0029, as
-- 0041 and 0046 last made them.
DO 0;
