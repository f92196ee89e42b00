# Sourced by bench/sql-add.sh and bench/sql-add-deployed.sh: the repository's root as the working
# directory, `secs` (the script's first argument, 10 by default: seconds a PostgreSQL measure
# runs), `bin` (the taskhost binary), a scratch directory `work` removed at exit, and each client's
# measure: `pg_ms FILE DATABASE` (ms a statement of FILE by pgbench, one client, `secs` seconds)
# and `slap_ms PORT DATABASE QUERY [N]` (ms a statement over N, 20,000 by default, by mariadb-slap, one client).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
secs=${1:-10}
bin=target/release/taskhost
pgbench=$(ls /usr/lib/postgresql/*/bin/pgbench | tail -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# (Each fails the script, saying what its client said, when that printed no figure.)
pg_ms() {
    local out
    out=$($pgbench -h 127.0.0.1 -U postgres -n -c 1 -T "$secs" -f "$1" "$2" 2>&1) || true
    awk '/latency average/ {print $4; found = 1} END {exit !found}' <<< "$out" ||
        { echo "pgbench printed no latency for $1: $out" >&2; exit 1; }
}

slap_ms() {
    local s out n=${4:-20000}
    out=$(mariadb-slap -h 127.0.0.1 -P "$1" -u taskhost --create-schema="$2" --concurrency=1 \
        --number-of-queries="$n" --query="$3" 2>&1) || true
    s=$(awk '/Average number of seconds/ {print $9}' <<< "$out")
    [ -n "$s" ] || { echo "mariadb-slap printed no time for $3: $out" >&2; exit 1; }
    python3 -c "print(round($s / $n * 1000, 4))"
}
