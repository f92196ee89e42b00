#!/usr/bin/env bash
# Worker processes draining one PostgreSQL queue, for issue 51: does a second process's cost come
# from the claims meeting (both on one queue) or from the process itself (each on a queue of its
# own)? Each run: a fresh database, TASKS no-op tasks queued in SQL (`taskhost_add`), vacuumed and
# checkpointed, then `taskhost worker --drain` processes timed from their start to the last exit,
# and the server's CPU over the drain (the postgres processes', and the postmaster's children
# that ended) from /proc, so the server must run on this machine as the user postgres.
#
#   bash bench/pg-workers.sh [ROUNDS]     (modes alternated ROUNDS times, default 3)
#
# Modes: one (one process), shared (two on one queue), split (two, each on a queue of its own).
# PG_ADMIN (postgres://postgres@127.0.0.1:5432), TASKS (50000), CONCURRENCY (1024), CLAIM_BATCH
# (256) and MODES ("one shared split") change it. Needs a release build (target/release/taskhost).
# Prints a line a run: mode, tasks/s, server CPU µs a task.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TASKHOST_BIN:-target/release/taskhost}
admin=${PG_ADMIN:-postgres://postgres@127.0.0.1:5432}
tasks=${TASKS:-50000}
db=taskhost_pg_workers
url="$admin/$db"
dir=$(mktemp -d)
trap 'rm -rf "$dir"; psql "$admin/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true' EXIT
mkdir -p "$dir/plugins"
cp host/src/bench/noop.wasm "$dir/plugins/noop.wasm"
hz=$(getconf CLK_TCK)
postmaster=$(pgrep -o -u postgres postgres)

# The server's CPU so far, in ticks: the live postgres processes', and the postmaster's children
# that ended (a worker's connections end with it).
server_cpu() {
    local total=0 p u s cu cs
    for p in $(pgrep -u postgres); do
        read -r u s cu cs < <(awk '{print $14, $15, $16, $17}' "/proc/$p/stat" 2>/dev/null || echo "0 0 0 0")
        total=$((total + u + s))
        [ "$p" = "$postmaster" ] && total=$((total + cu + cs))
    done
    echo "$total"
}

run() {
    local mode=$1 second=a pids=()
    [ "$mode" = split ] && second=b
    psql "$admin/postgres" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null 2>&1
    "$bin" --database-url "$url" migrate >/dev/null
    psql "$url" -qc "SELECT count(taskhost_add('noop', '{}', queue => 'a')) FROM generate_series(1, $((tasks / 2)))" \
        -c "SELECT count(taskhost_add('noop', '{}', queue => '$second')) FROM generate_series(1, $((tasks - tasks / 2)))" \
        -c "VACUUM ANALYZE task_queue" -c "CHECKPOINT" >/dev/null
    local c0 t0 c1 t1
    c0=$(server_cpu); t0=$(date +%s.%N)
    for queue in a $([ "$mode" = one ] || echo "$second"); do
        "$bin" --database-url "$url" --plugins "$dir/plugins" worker --drain --queues "$queue" \
            --concurrency "${CONCURRENCY:-1024}" --claim-batch "${CLAIM_BATCH:-256}" >/dev/null 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"
    t1=$(date +%s.%N); c1=$(server_cpu)
    local left
    left=$(psql "$url" -Atc "SELECT count(*) FROM task_queue WHERE last_status <> 'success'")
    [ "$left" = 0 ] || { echo "$mode: $left tasks not drained" >&2; exit 1; }
    python3 -c "print('$mode', 'tasks/s %.0f' % ($tasks / ($t1 - $t0)), 'server µs/task %.1f' % (($c1 - $c0) / $hz * 1e6 / $tasks))"
}

for _ in $(seq "${1:-3}"); do
    for mode in ${MODES:-one shared split}; do run "$mode"; done
done
