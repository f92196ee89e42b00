#!/usr/bin/env bash
# The database servers of the tests that stop their server (host/tests/it/restarts.rs: chaos,
# workers surviving restarts): a PostgreSQL cluster and a MariaDB instance apart from the shared
# ones, so the rest of the suite runs beside those tests. scripts/test-services.sh installs the
# packages and calls `start all`; the tests call `stop` and `start` on one server.
#
#   own-servers.sh start|stop|restart postgres|mysql|all
#
#   PostgreSQL: cluster `restarts`, port 5433: postgres://postgres@127.0.0.1:5433/test
#   MariaDB:    datadir /var/lib/mysql-restarts, port 3307: mysql://taskhost@127.0.0.1:3307/test
set -euo pipefail

action=${1:?start, stop or restart}
which=${2:?postgres, mysql or all}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
as_postgres() { if [ "$(id -u)" = 0 ]; then su postgres -c "$1"; else sudo -u postgres sh -c "$1"; fi; }

PG_PORT=5433
MY_PORT=3307
MY_DATA=/var/lib/mysql-restarts
MY_SOCKET=/run/mysqld/restarts.sock
MY_PID=/run/mysqld/restarts.pid

wait_for() { # what, command...
    local what=$1; shift
    for _ in $(seq 1 300); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    echo "error: $what did not come up within 60 s" >&2
    return 1
}

pg_start() {
    local ver
    ver=$(ls /etc/postgresql | sort -V | tail -n 1)
    if [ ! -d "/etc/postgresql/$ver/restarts" ]; then
        $SUDO pg_createcluster --port "$PG_PORT" "$ver" restarts >/dev/null
        # Local TCP connections without a password: a throwaway test server.
        $SUDO sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)(scram-sha-256|md5)/\1trust/' \
            "/etc/postgresql/$ver/restarts/pg_hba.conf"
    fi
    pg_isready -q -h 127.0.0.1 -p "$PG_PORT" || $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" restarts start
    wait_for "PostgreSQL (restarts)" pg_isready -q -h 127.0.0.1 -p "$PG_PORT"
    as_postgres "psql -p $PG_PORT -qtAc \"SELECT 1 FROM pg_database WHERE datname = 'test'\"" | grep -q 1 \
        || as_postgres "createdb -p $PG_PORT test"
}

pg_stop() {
    local ver
    ver=$(ls /etc/postgresql | sort -V | tail -n 1)
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" restarts stop -m fast
}

my_running() { pgrep -f "mariadbd .*--datadir=$MY_DATA( |$)" >/dev/null; }

my_launch() {
    # By its pid file: the shared server runs the same program.
    $SUDO start-stop-daemon --start --oknodo --background --pidfile "$MY_PID" --exec /usr/sbin/mariadbd -- \
        --user=mysql --datadir="$MY_DATA" --port="$MY_PORT" --socket="$MY_SOCKET" --pid-file="$MY_PID" \
        --bind-address=127.0.0.1 --log-error="$MY_DATA/error.log" >/dev/null 2>&1
    # Until it answers, or for as long as it runs (crash recovery after a killed run), up to 120 s.
    for i in $(seq 1 600); do
        mariadb-admin --socket="$MY_SOCKET" ping >/dev/null 2>&1 && return 0
        [ "$i" -gt 25 ] && ! my_running && return 1
        sleep 0.2
    done
    return 1
}

my_start() {
    $SUDO mkdir -p /run/mysqld
    $SUDO chown mysql:mysql /run/mysqld
    if [ ! -d "$MY_DATA/mysql" ]; then
        $SUDO mariadb-install-db --user=mysql --datadir="$MY_DATA" --auth-root-authentication-method=socket \
            --skip-test-db >/dev/null
    fi
    if ! mariadb-admin --socket="$MY_SOCKET" ping >/dev/null 2>&1; then
        # A server of this data directory that does not answer (its socket removed, or left stopped
        # by a killed run) holds the directory's locks: a new one would wait on them, so it goes.
        if my_running; then
            $SUDO pkill -f "mariadbd .*--datadir=$MY_DATA( |$)" || true
            $SUDO pkill -CONT -f "mariadbd .*--datadir=$MY_DATA( |$)" || true
            for _ in $(seq 1 150); do my_running || break; sleep 0.2; done
            $SUDO pkill -9 -f "mariadbd .*--datadir=$MY_DATA( |$)" || true
        fi
        if ! my_launch; then
            echo "MariaDB (restarts) did not come up; its log ($MY_DATA/error.log) ends:" >&2
            $SUDO tail -n 8 "$MY_DATA/error.log" >&2 || true
            # A throwaway server: a data directory it cannot start from is set aside and made anew.
            $SUDO pkill -9 -f "mariadbd .*--datadir=$MY_DATA( |$)" || true
            $SUDO rm -rf "$MY_DATA.broken" && $SUDO mv "$MY_DATA" "$MY_DATA.broken"
            echo "MariaDB (restarts): starting from a new data directory ($MY_DATA.broken kept)" >&2
            $SUDO mariadb-install-db --user=mysql --datadir="$MY_DATA" --auth-root-authentication-method=socket \
                --skip-test-db >/dev/null
            my_launch || { echo "error: MariaDB (restarts) did not come up" >&2; $SUDO tail -n 8 "$MY_DATA/error.log" >&2; exit 1; }
        fi
    fi
    $SUDO mariadb --socket="$MY_SOCKET" -e "CREATE DATABASE IF NOT EXISTS test;
        CREATE USER IF NOT EXISTS 'taskhost'@'127.0.0.1';
        GRANT ALL PRIVILEGES ON *.* TO 'taskhost'@'127.0.0.1';"
}

my_stop() {
    $SUDO mariadb-admin --socket="$MY_SOCKET" shutdown
}

for db in postgres mysql; do
    [ "$which" = all ] || [ "$which" = "$db" ] || continue
    case $db in postgres) short=pg ;; mysql) short=my ;; esac
    case $action in
        start) "${short}_start" ;;
        stop) "${short}_stop" ;;
        restart) "${short}_stop"; "${short}_start" ;;
        *) echo "error: unknown action $action (start, stop or restart)" >&2; exit 2 ;;
    esac
done
