#!/usr/bin/env bash
# Calls one after another through the Python clients, their connections kept and not (issue 50):
# `bench/client-calls.py` against a `serve` on a new SQLite file (or DATABASE_URL, an empty
# database), no worker.
#
#   bash bench/client-calls.sh [DATABASE_URL]
#
# Needs a release build (target/release/taskhost, or TASKHOST_BIN) and the test plugins (noop).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup client-calls "${1:-}"
th serve --listen "127.0.0.1:$port" 2> "$dir/serve.log" &
serve=$!
wait_up $serve "http://127.0.0.1:$port" "$dir/serve.log"
python3 bench/client-calls.py "http://127.0.0.1:$port" noop "${CALLS:-1000}" "${REPS:-3}"
