#!/usr/bin/env bash
# What `[tasks] sql_add_handlers = "deployed"` adds to a task queued in SQL (docs/clients.md): on
# each database, one client, each statement its own transaction, a plain INSERT of the row and
# `taskhost_add` without the check, then `taskhost_add` with it (the handler deployed: a release
# row for `noop`), twice, in one sitting. PostgreSQL: pgbench; MariaDB and MySQL: mariadb-slap;
# SQLite: Python's sqlite3 (bench/sql-add-deployed-sqlite.py).
# Usage: bash bench/sql-add-deployed.sh [SECONDS]   (needs target/release/taskhost: cargo build --release)
source "$(dirname "$0")/sql-add-common.sh"
: > "$work/any.toml"
printf '[tasks]\nsql_add_handlers = "deployed"\n' > "$work/deployed.toml"
# `taskhost migrate` with each file: the check made, or dropped.
check() { $bin --config "$work/$1.toml" --database-url "$2" migrate > /dev/null; }

echo "== PostgreSQL ($secs s each, pgbench, 1 client)"
url=postgres://postgres@127.0.0.1:5432/taskhost_bench_sql
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS taskhost_bench_sql" -c "CREATE DATABASE taskhost_bench_sql"
check any "$url"
psql -h 127.0.0.1 -U postgres -q taskhost_bench_sql -c "INSERT INTO task_handler_releases (handler, digest, released_on, released_by, action) VALUES ('noop', 'bench', now(), 'bench', 'deploy')"
echo "SELECT taskhost_add('noop', '{\"n\": 1}');" > "$work/add.sql"
echo "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) VALUES (now(), now(), 'noop', '{\"n\": 1}');" > "$work/insert.sql"
for rep in 1 2; do
    for what in insert add add-checked; do
        case $what in add-checked) check deployed "$url" ;; *) check any "$url" ;; esac
        f=${what%-checked}
        lat=$(pg_ms "$work/$f.sql" taskhost_bench_sql)
        echo "rep $rep  $what: $lat ms a statement"
    done
done
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE taskhost_bench_sql"

for server in MariaDB:3306 MySQL:3310; do
    name=${server%:*} port=${server#*:}
    url="mysql://taskhost@127.0.0.1:$port/taskhost_bench_sql"
    echo "== $name (20,000 statements each, mariadb-slap, 1 client)"
    mysql -h 127.0.0.1 -P "$port" -u taskhost -e "DROP DATABASE IF EXISTS taskhost_bench_sql; CREATE DATABASE taskhost_bench_sql"
    check any "$url"
    mysql -h 127.0.0.1 -P "$port" -u taskhost taskhost_bench_sql -e "INSERT INTO task_handler_releases (handler, digest, released_on, released_by, action) VALUES ('noop', 'bench', UTC_TIMESTAMP(6), 'bench', 'deploy')"
    for rep in 1 2; do
        for what in insert add add-with-options add-checked add-with-options-checked; do
            case $what in *-checked) check deployed "$url" ;; *) check any "$url" ;; esac
            case $what in
            insert) q="INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'noop', '{\"n\": 1}')" ;;
            add | add-checked) q="CALL taskhost_add('noop', '{\"n\": 1}', NULL)" ;;
            *) q="CALL taskhost_add('noop', '{\"n\": 1}', '{\"queue\": \"mail\", \"priority\": 1}')" ;;
            esac
            echo "rep $rep  $what: $(slap_ms "$port" taskhost_bench_sql "$q") ms a statement"
        done
    done
    mysql -h 127.0.0.1 -P "$port" -u taskhost -e "DROP DATABASE taskhost_bench_sql"
done

echo "== SQLite (a file here, Python's sqlite3)"
url="sqlite://$work/bench.db"
check any "$url"
for rep in 1 2; do
    for what in insert add add-checked; do
        case $what in add-checked) check deployed "$url" ;; *) check any "$url" ;; esac
        python3 bench/sql-add-deployed-sqlite.py "$work/bench.db" "${what%-checked}" "$what" "$rep"
    done
done
