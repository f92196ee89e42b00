#!/usr/bin/env bash
# Calls one after another through the Python clients, their connections kept and not (issue 50):
# `bench/client-calls.py` against a `serve` on a new SQLite file (or DATABASE_URL, an empty
# database), no worker.
#
#   bash bench/client-calls.sh [DATABASE_URL]
#
# DELAY_MS=1: through bench/delay-proxy.py, a server about 2 ms away. CALLS (1000) and REPS (3).
# Needs a release build (target/release/taskhost, or TASKHOST_BIN) and the test plugins (noop).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup client-calls "${1:-}"
# ("$bin" itself in the background, not through `th`: the trap kills the jobs, a function's shell
# would leave its child.)
"$bin" --database-url "$url" --plugins "$dir/plugins" serve --listen "127.0.0.1:$port" 2> "$dir/serve.log" &
serve=$!
wait_up $serve "http://127.0.0.1:$port" "$dir/serve.log"
target=$port
if [ -n "${DELAY_MS:-}" ]; then
  target=$((port + 1))
  python3 bench/delay-proxy.py "$target" "$port" "$(python3 -c "print(${DELAY_MS} / 1000)")" &
  until curl -sf "http://127.0.0.1:$target/api/v1/health" > /dev/null; do sleep 0.1; done
fi
python3 bench/client-calls.py "http://127.0.0.1:$target" noop "${CALLS:-1000}" "${REPS:-3}"
