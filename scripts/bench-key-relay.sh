#!/usr/bin/env bash
# What the overseer's `key-fuel` costs (issue 48): one key's backlog of N due tasks queued before
# any of its runs ended, in a queue weighed by fuel (`fuel_per_turn`). One run of the key ends (a
# rate per key of 1/1h lets one start), its average then far from a turn a task, and one
# `taskhost overseer --once` lays the backlog's turns again: 1,000 tasks a transaction, 100,000
# a pass. A second `overseer --once`, with nothing to lay, is the baseline.
#
#   scripts/bench-key-relay.sh BIN URL [N=100000]
#
# URL: postgres://…, mysql://… or sqlite:///path (a new file). Prints the wall time of each pass
# and what the first said.
set -euo pipefail
bin=$1 url=$2 n=${3:-100000}
cd "$(dirname "$0")/.."
plugins=$(mktemp -d)
trap 'kill "${worker:-}" 2>/dev/null && wait "$worker" 2>/dev/null; rm -rf "$plugins"' EXIT
cp target/wasm32-wasip2/release/noop.wasm "$plugins/"
th() { "$bin" --database-url "$url" --plugins "$plugins" --log warn "$@"; }
th migrate > /dev/null
th limits set queue:kr --fuel-per-turn 1000000 --rate-per-key 1/1h > /dev/null
python3 -c "
import json, sys
for i in range($n):
    sys.stdout.write(json.dumps({'handler': 'noop', 'queue': 'kr', 'key': 'a', 'data': {'i': i}}) + '\n')
" | th add --many - > /dev/null

"$bin" --database-url "$url" --plugins "$plugins" --log warn worker --queues kr --no-overseer > /dev/null 2>&1 &
worker=$!
deadline=$((SECONDS + 60))
until th list --queue kr --state succeeded 2>/dev/null | grep noop > /dev/null; do
  [ $SECONDS -lt $deadline ] || { echo "no run finished within 60 s" >&2; exit 1; }
  sleep 0.2
done
kill -TERM $worker && wait $worker || true
worker=

pass() {
  local t0 t1 out
  t0=$(date +%s%N)
  out=$(th overseer --once | grep '^key-fuel')
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000000 )) ms: $out"
}
echo "backlog $n: first pass $(pass)"
echo "baseline: $(pass)"
