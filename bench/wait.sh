#!/usr/bin/env bash
# Waiting requests through `taskhost serve` (issue 50): the CPU 1,000 idle waiters cost `serve`,
# and how soon after a task's end its waiting request is answered, with 1,000 waiting.
#
#   bash bench/wait.sh [DATABASE_URL]     (default: a new SQLite file)
#
# Needs a release build (target/release/taskhost, or TASKHOST_BIN) and the test plugins (noop). A PostgreSQL or
# MySQL URL must name an empty database. Prints one JSON line per measure.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TASKHOST_BIN:-target/release/taskhost}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
url=${1:-sqlite://$dir/wait.db}
mkdir -p "$dir/plugins"
cp target/test-plugins/noop.wasm "$dir/plugins/"
th() { "$bin" --database-url "$url" --plugins "$dir/plugins" "$@"; }
th migrate > /dev/null
port=$((20000 + RANDOM % 20000))
# Its JSON log says when it answered each wait at its task's end (the server's side of the latency).
"$bin" --database-url "$url" --plugins "$dir/plugins" --log warn,taskhost::api::tasks=debug --log-format json \
  serve --listen "127.0.0.1:$port" 2> "$dir/serve.log" &
serve=$!
until curl -sf "http://127.0.0.1:$port/api/v1/health" > /dev/null; do
  kill -0 $serve || { cat "$dir/serve.log"; exit 1; }
  sleep 0.1
done
[ -n "${SKIP_IDLE:-}" ] || python3 bench/wait-latency.py idle "http://127.0.0.1:$port" "$serve" 1000 20
"$bin" --database-url "$url" --plugins "$dir/plugins" --log warn,taskhost::runner::writer=debug --log-format json \
  worker --concurrency 64 --poll-interval 20ms 2> "$dir/worker.log" &
export SERVE_LOG="$dir/serve.log" WORKER_LOG="$dir/worker.log"
python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 1000
python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 100
python3 bench/wait-latency.py ends "http://127.0.0.1:$port" 1
