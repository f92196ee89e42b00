#!/usr/bin/env bash
# Waiting requests through `taskhost serve` (issue 50): the CPU 1,000 idle waiters cost `serve`,
# and how soon after a task's end its waiting request is answered: with 1,000 waiting while tasks end
# at 100 a second (by bare requests, then through the Python client's AsyncClient), and through bursts of
# 1,000, 100 and 1 ends at once.
#
#   bash bench/wait.sh [DATABASE_URL]     (default: a new SQLite file)
#
# Needs a release build (target/release/taskhost, or TASKHOST_BIN) and the test plugins (noop). A PostgreSQL or
# MySQL URL must name an empty database. Prints one JSON line per measure.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup wait "${1:-}"
# Its JSON log says when it answered each wait at its task's end (the server's side of the latency).
"$bin" --database-url "$url" --plugins "$dir/plugins" --log warn,taskhost::api::tasks=debug --log-format json \
  serve --listen "127.0.0.1:$port" 2> "$dir/serve.log" &
serve=$!
wait_up $serve "http://127.0.0.1:$port" "$dir/serve.log"
[ -n "${SKIP_IDLE:-}" ] || python3 bench/wait-latency.py idle "http://127.0.0.1:$port" "$serve" 1000 20
"$bin" --database-url "$url" --plugins "$dir/plugins" --log warn,taskhost::runner::writer=debug --log-format json \
  worker --concurrency 64 --poll-interval 20ms 2> "$dir/worker.log" &
export SERVE_LOG="$dir/serve.log" WORKER_LOG="$dir/worker.log"
python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 1000 10
# The same through the Python client's AsyncClient, as an asyncio application waits.
WAIT_THROUGH=client python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 1000 10
python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 1000
python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 100
python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 1
