#!/usr/bin/env bash
# The memory `taskhost serve` takes while 16 clients each POST a 13 MiB task at once (issue 44):
# its resident set idle and its peak (VmHWM) after. By hand, not CI (BENCHMARKS.md).
#
#   bash bench/serve-bodies.sh [TASKHOST] [PLUGINS]     (default: target/release/taskhost, target/plugins)
set -euo pipefail
BIN=${1:-target/release/taskhost}
PLUGINS=${2:-target/plugins}
D=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$D"' EXIT
PORT=$((20000 + RANDOM % 10000))
mkdir -p "$D/plugins" && cp "$PLUGINS/echo.wasm" "$D/plugins/"
python3 -c 'import json; print(json.dumps({"handler": "echo", "data": {"blob": "x" * (13 << 20)}}))' > "$D/body.json"
"$BIN" --database-url "sqlite://$D/t.db" --plugins "$D/plugins" serve --listen "127.0.0.1:$PORT" 2>"$D/serve.log" &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/api/v1/queues" && break; sleep 0.1; done
rss() { awk '/VmRSS|VmHWM/ {printf "%s %d MiB  ", $1, $2 / 1024}' "/proc/$pid/status"; echo; }
echo -n "idle:  "; rss
clients=()
for _ in $(seq 16); do
    curl -s -o /dev/null -H 'content-type: application/json' --data-binary "@$D/body.json" \
        "http://127.0.0.1:$PORT/api/v1/tasks" & clients+=($!)
done
wait "${clients[@]}"
echo -n "after: "; rss
