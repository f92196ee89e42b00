#!/usr/bin/env bash
# What a task queued in SQL (`taskhost_add`, docs/clients.md) costs against a plain INSERT of the
# same row, on each database, one client, each statement its own transaction, alternated twice.
#   PostgreSQL: pgbench (the servers of `make services`), MariaDB and MySQL: mariadb-slap and PyMySQL,
#   SQLite: Python's sqlite3 (a file on this disk; each add committed, then 20,000 in one transaction;
#   bench/sql-add-sqlite.py), and SQLite alone from C (bench/sql-add-sqlite.c: time and SQLite's steps a call).
# Usage: bash bench/sql-add.sh [SECONDS]   (needs target/release/taskhost: cargo build --release)
source "$(dirname "$0")/sql-add-common.sh"

echo "== PostgreSQL ($secs s each, pgbench, 1 client)"
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS taskhost_bench_sql" -c "CREATE DATABASE taskhost_bench_sql"
$bin --database-url postgres://postgres@127.0.0.1:5432/taskhost_bench_sql migrate >/dev/null
echo "SELECT taskhost_add('noop', '{\"n\": 1}');" > "$work/add.sql"
echo "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) VALUES (now(), now(), 'noop', '{\"n\": 1}');" > "$work/insert.sql"
for rep in 1 2; do
    for what in insert add; do
        lat=$(pg_ms "$work/$what.sql" taskhost_bench_sql)
        echo "rep $rep  $what: $lat ms a statement"
    done
done
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE taskhost_bench_sql"

# A call without options, with plain ones (0032, 0037) or with a time to run at or a unique key
# (0038) takes a short path of the procedure; `after`, `version`, `run_anyway`, the whole one.
# Each call beside a plain INSERT of its row, with mariadb-slap (a bare C client), then from PyMySQL.
# MariaDB: `make services`' server (3306); MySQL: scripts/mysql-server.sh's (3310).
drivers=target/tools/sql-drivers
[ -d "$drivers/pymysql" ] || python3 -m pip install --quiet --disable-pip-version-check --target "$drivers" PyMySQL
for server in MariaDB:3306 MySQL:3310; do
    name=${server%:*} port=${server#*:}
    echo "== $name (20,000 statements each, mariadb-slap, 1 client)"
    mysql -h 127.0.0.1 -P "$port" -u taskhost -e "DROP DATABASE IF EXISTS taskhost_bench_sql; CREATE DATABASE taskhost_bench_sql"
    $bin --database-url "mysql://taskhost@127.0.0.1:$port/taskhost_bench_sql" migrate >/dev/null
    for rep in 1 2; do
        for what in insert add add-with-options insert-unique add-unique add-run-at add-after; do
            case $what in
            insert) q="INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'noop', '{\"n\": 1}')" ;;
            add) q="CALL taskhost_add('noop', '{\"n\": 1}', NULL)" ;;
            add-with-options) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"queue\": \"mail\", \"priority\": 1}')" ;;
            insert-unique) q="INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, unique_key, active_unique_key) VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'noop', '{\"n\": 1}', @u := UUID(), @u)" ;;
            add-unique) q="CALL taskhost_add('noop', '{\"n\": 1}', CONCAT('{\"unique_key\": \"', UUID(), '\"}'))" ;;
            add-run-at) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"run_at\": \"2030-01-01T00:00:00Z\"}')" ;;
            # (Its task and one dependency: a plain INSERT of its rows would be two.)
            *) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"after\": [1]}')" ;;
            esac
            echo "rep $rep  $what: $(slap_ms "$port" taskhost_bench_sql "$q") ms a statement"
        done
    done
    echo "== $name from Python's PyMySQL (3,000 statements each)"
    python3 bench/sql-add-pymysql.py "$drivers" taskhost_bench_sql "$port"
    mysql -h 127.0.0.1 -P "$port" -u taskhost -e "DROP DATABASE taskhost_bench_sql"
done

echo "== SQLite (a file here, Python's sqlite3)"
$bin --database-url "sqlite://$work/bench.db" migrate >/dev/null
python3 bench/sql-add-sqlite.py "$work/bench.db"
echo "== SQLite, the connection's temp_store = memory (BENCHMARKS.md, session 84: no longer differs)"
$bin --database-url "sqlite://$work/bench-memory.db" migrate >/dev/null
SQLITE_TEMP_STORE=memory python3 bench/sql-add-sqlite.py "$work/bench-memory.db"
echo "== SQLite itself, no driver (bench/sql-add-sqlite.c: 20 rounds of 1,000 in one transaction, two copies)"
if [ ! -e /usr/include/sqlite3.h ]; then
    if [ "$(id -u)" = 0 ]; then apt-get install -y -qq libsqlite3-dev >/dev/null; else sudo apt-get install -y -qq libsqlite3-dev >/dev/null; fi
fi
cc -O2 -o target/sql-add-sqlite bench/sql-add-sqlite.c -lsqlite3
$bin --database-url "sqlite://$work/bench-fresh.db" migrate >/dev/null
for kind in none unique after; do
    target/sql-add-sqlite "$kind" 20 1000 "$work/bench-fresh.db" "$work/bench-fresh.db"
done
