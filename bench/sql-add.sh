#!/usr/bin/env bash
# What a task queued in SQL (`taskhost_add`, docs/clients.md) costs against a plain INSERT of the
# same row, on each database, one client: each statement its own transaction, then many in one.
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
# Then 200 in one transaction (rolled back), as an application queueing many at once.
for what in insert add; do
    { echo "BEGIN;"; for _ in $(seq 200); do cat "$work/$what.sql"; done; echo "ROLLBACK;"; } > "$work/$what-200.sql"
done
for rep in 1 2; do
    for what in insert add; do
        lat=$(pg_ms "$work/$what.sql" taskhost_bench_sql)
        echo "rep $rep  $what: $lat ms a statement"
    done
    for what in insert add; do
        lat=$(pg_ms "$work/$what-200.sql" taskhost_bench_sql)
        lat=$(python3 -c "print(round($lat / 200, 4))")
        echo "rep $rep  $what, 200 in one transaction: $lat ms a statement"
    done
done
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE taskhost_bench_sql"

# A call without options, with plain ones (0032, 0037) or with a time to run at or a unique key
# (0038) takes a short path of the procedure, as does `after` one task within a transaction (0050:
# PyMySQL's many in one, below); `after` otherwise, `version`, `run_anyway`, the whole one.
# Each call beside a plain INSERT of its row, with mariadb-slap (a bare C client), then from PyMySQL.
# MariaDB: `make services`' server (3306); MySQL: scripts/mysql-server.sh's (3310).
drivers=target/tools/sql-drivers
[ -d "$drivers/pymysql" ] || python3 -m pip install --quiet --disable-pip-version-check --target "$drivers" PyMySQL
for server in MariaDB:3306 MySQL:3310; do
    name=${server%:*} port=${server#*:}
    echo "== $name (mariadb-slap, 1 client, each statement its own transaction: 4 rounds of 5,000 each, alternated, every other round reversed)"
    mysql -h 127.0.0.1 -P "$port" -u taskhost -e "DROP DATABASE IF EXISTS taskhost_bench_sql; CREATE DATABASE taskhost_bench_sql"
    $bin --database-url "mysql://taskhost@127.0.0.1:$port/taskhost_bench_sql" migrate >/dev/null
    kinds="insert add add-with-options add-key add-run-at insert-unique add-unique add-after"
    for round in 1 2 3 4; do
        # (In reverse order every other round, so that no kind always follows the same one.)
        order=$kinds
        [ $((round % 2)) = 1 ] || order=$(tr ' ' '\n' <<< "$kinds" | tac | tr '\n' ' ')
        for what in $order; do
            case $what in
            insert) q="INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'noop', '{\"n\": 1}')" ;;
            add) q="CALL taskhost_add('noop', '{\"n\": 1}', NULL)" ;;
            add-with-options) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"queue\": \"mail\", \"priority\": 1}')" ;;
            add-key) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"key\": \"tenant-1\"}')" ;;
            add-run-at) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"run_at\": \"2030-01-01T00:00:00Z\"}')" ;;
            insert-unique) q="INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, unique_key, active_unique_key) VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'noop', '{\"n\": 1}', @u := UUID(), @u)" ;;
            add-unique) q="CALL taskhost_add('noop', '{\"n\": 1}', CONCAT('{\"unique_key\": \"', UUID(), '\"}'))" ;;
            # (Its task and one dependency: against PyMySQL's INSERTs of both in one transaction, below.)
            *) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"after\": [1]}')" ;;
            esac
            ms=$(slap_ms "$port" taskhost_bench_sql "$q" 5000)
            echo "$round $what $ms"
        done
    done > "$work/slap.txt"
    # Each call against the INSERTs of its rows in the same round: the machine drifts by a third over
    # minutes, and each commit waits for the disk, whose time moves more.
    python3 - "$work/slap.txt" <<'PY'
import collections, statistics, sys
ms = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, what, v = line.split()
    ms[what][r] = float(v)
against = {"add": "insert", "add-with-options": "insert", "add-key": "insert", "add-run-at": "insert",
           "add-unique": "insert-unique"}
for what, rounds in ms.items():
    line = f"  {what}: {min(rounds.values()):.3f} - {max(rounds.values()):.3f} ms a statement"
    if what in against:
        r = [rounds[k] / ms[against[what]][k] for k in rounds]
        line += f", {min(r):.2f} - {max(r):.2f}x its INSERTs (median {statistics.median(r):.2f})"
    print(line)
PY
    echo "== $name from Python's PyMySQL (each call its own transaction, then 1,000 in one; 4 rounds alternated)"
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
