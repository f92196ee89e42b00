#!/usr/bin/env bash
# MySQL for the tests, on a machine whose Debian has none (Debian 12 ships MariaDB only).
#
#   scripts/mysql-server.sh start   # port 3310, database `test`, user taskhost, no password
#   (as root: scripts/test-services.sh runs it with sudo when it is not)
#   scripts/mysql-server.sh stop
#
# Debian unstable builds MySQL (9.7 in 2026-12); its binaries need a newer C library than Debian
# 12's, so nothing is installed: the server's packages and their libraries are unpacked into
# $MYSQL_HOME (not the system's directories) and `mysqld` runs under that directory's own loader.
# apt resolves the libraries each time the directory is made, so unstable's changes are followed.
set -euo pipefail

MYSQL_HOME=${MYSQL_HOME:-/var/cache/taskhost-mysql}
PORT=${MYSQL_TEST_PORT:-3310}
# The mirror this machine's apt already uses for Debian's main archive.
MIRROR=${DEBIAN_MIRROR:-$( (cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true) |
    grep -oE '(^URIs:|^deb) +https?://[^ ]+/debian$|^deb +https?://[^ ]+/debian ' | grep -oE 'https?://[^ ]+' | head -1)}
ROOT=$MYSQL_HOME/root
DATA=$MYSQL_HOME/data
SOCK=$MYSQL_HOME/mysqld.sock
LIBS=$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu
run() { "$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$LIBS" "$@"; }
client() { mariadb -h 127.0.0.1 -P "$PORT" "$@"; }

unpack() {
    [ -x "$ROOT/usr/sbin/mysqld" ] && return 0
    local apt="$MYSQL_HOME/apt"
    mkdir -p "$apt/etc" "$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
    echo "deb [trusted=yes] $MIRROR sid main" > "$apt/etc/sources.list"
    local o=(-o "Dir::Etc::sourcelist=$apt/etc/sources.list" -o Dir::Etc::sourceparts=/dev/null
        -o "Dir::State=$apt/state" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
    apt-get "${o[@]}" -qq update
    # The server, its client tools and every library they need; not perl (the scripts' only).
    local pkgs
    pkgs=$(apt-cache "${o[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances mysql-server-core mysql-client-core \
        | grep -vE '^ |^<' | grep -vE '^perl' | sort -u)
    (cd "$apt/debs" && apt-get "${o[@]}" -qq download $pkgs)
    mkdir -p "$ROOT"
    for f in "$apt"/debs/*.deb; do dpkg -x "$f" "$ROOT"; done
    rm -rf "$apt"
}

start() {
    unpack
    if ! client -u root -e 'SELECT 1' >/dev/null 2>&1; then
        if [ ! -d "$DATA/mysql" ]; then
            rm -rf "$DATA"
            run "$ROOT/usr/sbin/mysqld" --no-defaults --initialize-insecure --user=root --datadir="$DATA" \
                --basedir="$ROOT/usr" --lc-messages-dir="$ROOT/usr/share/mysql" >/dev/null 2>&1
        fi
        # MariaDB's default packet limit (16 MiB), which the packet tests are written for; no binary
        # log (MySQL's default keeps one: over a GB each test run, kept 30 days).
        nohup "$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$LIBS" \
            "$ROOT/usr/sbin/mysqld" --no-defaults --user=root --datadir="$DATA" --basedir="$ROOT/usr" \
            --lc-messages-dir="$ROOT/usr/share/mysql" --port="$PORT" --bind-address=127.0.0.1 \
            --socket="$SOCK" --mysqlx=OFF --secure-file-priv= --max-allowed-packet=16M --disable-log-bin \
            --log-error="$MYSQL_HOME/error.log" >/dev/null 2>&1 &
        for _ in $(seq 300); do client -u root -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
        if ! client -u root -e 'SELECT 1' >/dev/null 2>&1; then
            echo "MySQL did not start on port $PORT within 30 s; its log ($MYSQL_HOME/error.log) ends:" >&2
            tail -n 5 "$MYSQL_HOME/error.log" >&2 || true
            exit 1
        fi
    fi
    client -u root -e "CREATE DATABASE IF NOT EXISTS test;
        CREATE USER IF NOT EXISTS 'taskhost'@'%';
        GRANT ALL PRIVILEGES ON *.* TO 'taskhost'@'%' WITH GRANT OPTION;"
    echo "MySQL $(client -u root -N -e 'SELECT VERSION()') is up: mysql://taskhost@127.0.0.1:$PORT/test"
}

stop() {
    client -u root -e 'SHUTDOWN' >/dev/null 2>&1 || true
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
