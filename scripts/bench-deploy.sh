#!/bin/bash
# The deploy figures of BENCHMARKS.md, on DATABASE_URL (an empty database): deploying the 18 MB
# Python example (py-stats) as the handler `stats`, and again (unchanged); a worker with an empty
# plugins directory and an empty cache then compiles it and runs a task queued meanwhile (from
# the compile's end, by its log, to the run's start); a second version (the Rust no-op, compiled
# in a moment) switched to (from its compile's end to the start of a task queued at the deploy);
# and a rollback to the first, cached (from the rollback command's start to the start of a task
# queued after it); last, a deploy through `serve`'s API (the 19 MB py-noop, as a form, with
# curl, from the request's start to its answer). Times in milliseconds.
#   scripts/bench-deploy.sh postgres://postgres@127.0.0.1:5432/deploybench
set -euo pipefail
URL=$1
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/target/release/taskhost
dir=$(mktemp -d)
trap 'kill -TERM $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
export TASKHOST_DATABASE_URL=$URL TASKHOST_PLUGINS=$dir/plugins TASKHOST_CACHE_DIR=$dir/cache
mkdir -p "$dir/plugins" "$dir/cache" && chmod 700 "$dir/cache"
"$bin" migrate > /dev/null
ms() { date +%s%3N; }
# Milliseconds since the epoch of an RFC 3339 time.
epoch_ms() { python3 -c 'import sys, datetime; print(int(datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp() * 1000))' "$1"; }
# The start of task $1's last run, once it ended.
started() {
    while :; do
        local shown
        shown=$("$bin" show "$1" --json)
        if python3 -c 'import json, sys; t = json.loads(sys.argv[1]); sys.exit(0 if t["runs"] and t["runs"][-1]["finished_on"] else 1)' "$shown" 2> /dev/null; then
            epoch_ms "$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["runs"][-1]["started_on"])' "$shown")"
            return
        fi
        sleep 0.05
    done
}
# When the worker's log says version $1 (its first 12 digits) was ready.
ready() {
    local line="deployed version ready.*version=.\?$1"
    while ! grep -q "$line" "$dir/worker.log"; do sleep 0.05; done
    epoch_ms "$(grep "$line" "$dir/worker.log" | head -1 | cut -d' ' -f1)"
}
py=$root/target/test-plugins/py-stats.wasm
t0=$(ms); "$bin" deploy "$py" --name stats > /dev/null; t1=$(ms)
echo "deploy 18 MB: $((t1 - t0)) ms"
t0=$(ms); "$bin" deploy "$py" --name stats > /dev/null; t1=$(ms)
echo "deploy again (unchanged): $((t1 - t0)) ms"
v1=$(sha256sum "$py" | cut -c1-12)
"$bin" worker --concurrency 4 --log info > "$dir/worker.log" 2>&1 &
first=$("$bin" add stats --data '{"numbers": [1, 2, 3]}')
start=$(started "$first"); done_at=$(ready "$v1")
echo "first run after its compile's end: $((start - done_at)) ms"
noop=$root/target/test-plugins/noop.wasm
v2=$(sha256sum "$noop" | cut -c1-12)
"$bin" deploy "$noop" --name stats > /dev/null
second=$("$bin" add stats --data '{}')
start=$(started "$second"); done_at=$(ready "$v2")
echo "switch: first run of the new version after its compile's end: $((start - done_at)) ms"
t0=$(ms); "$bin" rollback stats > /dev/null
third=$("$bin" add stats --data '{"numbers": [4]}')
start=$(started "$third")
echo "rollback to a cached version: first run $((start - t0)) ms after the command started"
"$bin" show "$third" | grep component
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" > "$dir/serve.log" 2>&1 &
until curl -sf "http://127.0.0.1:$port/api/v1/health" > /dev/null; do sleep 0.05; done
pynoop=$root/target/test-plugins/py-noop.wasm
t0=$(ms)
curl -sSf -F "component=@$pynoop" "http://127.0.0.1:$port/api/v1/plugins/api-noop/versions" > "$dir/api.json"
t1=$(ms)
echo "deploy 19 MB through the API: $((t1 - t0)) ms ($(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["release"])' "$dir/api.json") release)"
