#!/usr/bin/env bash
# Start the database servers the tests use, installing what is missing (Debian), and wait until
# they answer. Idempotent: servers already running are left as they are.
#
#   PostgreSQL: database `test`, user postgres, no password from 127.0.0.1 (see below for MariaDB)
#               TASKHOST_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test
set -euo pipefail

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
as_postgres() { if [ "$(id -u)" = 0 ]; then su postgres -c "$1"; else sudo -u postgres sh -c "$1"; fi; }

apt_install() {
    $SUDO apt-get install -y -q "$@" >/dev/null 2>&1 || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "$@" >/dev/null; }
}

wait_for() { # what, command...
    local what=$1; shift
    for _ in $(seq 1 300); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    echo "error: $what did not come up within 60 s" >&2
    return 1
}

# --- faketime: worker processes with their clocks set apart (host/tests/it/clocks.rs) -------
command -v faketime >/dev/null || apt_install faketime
# --- ip and iptables: workers in network namespaces, partitions (host/tests/it/chaos/) ---
command -v ip >/dev/null || apt_install iproute2
command -v iptables >/dev/null || apt_install iptables
# --- pgrep and pkill: a restart server left by a killed run is stopped (scripts/own-servers.sh) ---
command -v pgrep >/dev/null || apt_install procps
# --- the sqlite3 shell: tasks queued in SQL from it (host/tests/it/sql_add.rs) ---------------
command -v sqlite3 >/dev/null || apt_install sqlite3
# --- openssl: the clients' TLS stand-in makes its self-signed certificate (host/tests/clients/client_py.py) ---
command -v openssl >/dev/null || apt_install openssl

# --- PgBouncer: PostgreSQL behind a connection pooler (host/tests/it/pooler.rs starts its own) ---
[ -x /usr/sbin/pgbouncer ] || apt_install pgbouncer

# --- PostgreSQL ----------------------------------------------------------------------------
command -v pg_ctlcluster >/dev/null || apt_install postgresql
ver=$(ls /etc/postgresql | sort -V | tail -n 1)
hba=/etc/postgresql/$ver/main/pg_hba.conf
# Local TCP connections without a password: this is a throwaway test server.
if grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+(scram-sha-256|md5)' "$hba"; then
    $SUDO sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)(scram-sha-256|md5)/\1trust/' "$hba"
    reload=1
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" main start
elif [ "${reload:-0}" = 1 ]; then
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" main reload
fi
wait_for "PostgreSQL" pg_isready -q -h 127.0.0.1 -p 5432
as_postgres "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname = 'test'\"" | grep -q 1 || as_postgres "createdb test"
wait_for "PostgreSQL database test" psql -qtAc "SELECT 1" "postgres://postgres@127.0.0.1:5432/test"
echo "PostgreSQL $ver is up: postgres://postgres@127.0.0.1:5432/test"

# --- MariaDB -------------------------------------------------------------------------------
#   database `test`, user taskhost, no password from 127.0.0.1
#   TASKHOST_TEST_MYSQL=mysql://taskhost@127.0.0.1:3306/test
[ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
if ! mariadb-admin ping >/dev/null 2>&1; then
    $SUDO mkdir -p /run/mysqld
    $SUDO chown mysql:mysql /run/mysqld
    # By its pid file (Debian's configuration names it): the restart tests' server runs the same
    # program, and --exec alone would take that one for this one.
    $SUDO start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid \
        --exec /usr/sbin/mariadbd -- --user=mysql
fi
wait_for "MariaDB" mariadb-admin ping
$SUDO mariadb -e "CREATE DATABASE IF NOT EXISTS test;
    CREATE USER IF NOT EXISTS 'taskhost'@'127.0.0.1';
    CREATE USER IF NOT EXISTS 'taskhost'@'localhost';
    GRANT ALL PRIVILEGES ON *.* TO 'taskhost'@'127.0.0.1' WITH GRANT OPTION;
    GRANT ALL PRIVILEGES ON *.* TO 'taskhost'@'localhost' WITH GRANT OPTION;"
wait_for "MariaDB database test" mariadb -h 127.0.0.1 -u taskhost test -e "SELECT 1"
echo "MariaDB $(mariadb -N -e 'SELECT VERSION()' 2>/dev/null) is up: mysql://taskhost@127.0.0.1:3306/test"

# --- MySQL --------------------------------------------------------------------------------
#   database `test`, user taskhost, no password; Debian 12 has no MySQL: scripts/mysql-server.sh
#   unpacks Debian unstable's beside the system and runs it (`make test` runs the MySQL tests again
#   against it with TASKHOST_TEST_MYSQL=mysql://taskhost@127.0.0.1:3310/test); as root, as the
#   other servers run (its files are under /var/cache)
$SUDO bash "$(dirname "$0")/mysql-server.sh" start

# --- the servers of the tests that stop theirs (scripts/own-servers.sh) -------------------
bash "$(dirname "$0")/own-servers.sh" start all
echo "PostgreSQL and MariaDB for the restart tests are up: ports 5433 and 3307"

# --- leftovers ------------------------------------------------------------------------------
# Tests drop the schemas and databases they make (t_ and 16 hex digits); a test run that was
# killed leaves its own behind: dropped here, before the next run.
for port in 5432 5433; do
    url="postgres://postgres@127.0.0.1:$port/test"
    for s in $(psql -qtAc "SELECT nspname FROM pg_namespace WHERE nspname ~ '^t_[0-9a-f]{16}$'" "$url"); do
        psql -qc "SET client_min_messages = warning; DROP SCHEMA $s CASCADE" "$url" >/dev/null
    done
done
for port in 3306 3307 3310; do
    for d in $(mariadb -h 127.0.0.1 -P $port -u taskhost -N -e "SHOW DATABASES" | grep -E '^t_[0-9a-f]{16}$'); do
        mariadb -h 127.0.0.1 -P $port -u taskhost -e "DROP DATABASE $d"
    done
done
