#!/bin/bash
# The rate-limit figure of BENCHMARKS.md: two workers of 16 slots claim no-op tasks from one
# queue limited to RATE (with BURST) for SECS seconds on DATABASE_URL (an empty database); then
# the most starts in any window of one period and the rate over the first minute, from each
# run's start (the database's time the rate counted by). With KEYS, the tasks are spread over
# that many keys and the queue's rate is per key (rate_limit_per_key): the figures are each key's.
#   scripts/bench-rate-limit.sh 5/1s 0 65 postgres://postgres@127.0.0.1:5432/ratebench [KEYS]
set -euo pipefail
RATE=$1 BURST=$2 SECS=$3 URL=$4 KEYS=${5:-0}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/target/release/taskhost
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export TASKHOST_DATABASE_URL=$URL TASKHOST_PLUGINS=$dir/plugins
mkdir -p "$dir/plugins" && cp "$root/target/test-plugins/noop.wasm" "$dir/plugins/"
per_key=$([ "$KEYS" -gt 0 ] && echo _per_key || true)
printf '[queues.rl]\nrate_limit%s = "%s"\nrate_burst%s = %s\n' "$per_key" "$RATE" "$per_key" "$BURST" > "$dir/th.toml"
"$bin" migrate > /dev/null
for i in $(seq 2000); do
  key=$([ "$KEYS" -gt 0 ] && echo ", \"key\": \"k$((i % KEYS))\"" || true)
  echo "{\"handler\": \"noop\", \"data\": {}, \"queue\": \"rl\"$key}"
done > "$dir/many.jsonl"
"$bin" add --many "$dir/many.jsonl" > /dev/null
"$bin" --config "$dir/th.toml" worker --concurrency 16 --queues rl > "$dir/w1.log" 2>&1 & one=$!
"$bin" --config "$dir/th.toml" worker --concurrency 16 --queues rl > "$dir/w2.log" 2>&1 & two=$!
sleep "$SECS"
kill -TERM "$one" "$two"
wait "$one" "$two" || true
"$bin" list --queue rl --status success --limit 100000 --json > "$dir/done.json"
python3 - "$dir/done.json" "$RATE" <<'PY'
import json, sys, datetime, re
tasks = json.load(open(sys.argv[1]))
count, period = sys.argv[2].split("/")
units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
num, unit = re.fullmatch(r"(\d*)([a-z]+)", period).groups()
period = float(num or 1) * units[unit]
by_key = {}
for t in tasks:
    for r in t["runs"]:
        if r.get("started_on"):
            start = datetime.datetime.fromisoformat(r["started_on"].replace("Z", "+00:00"))
            by_key.setdefault((t.get("task") or {}).get("key") or "-", []).append(start)
for key, starts in sorted(by_key.items()):
    starts.sort()
    s = [(t - starts[0]).total_seconds() for t in starts]
    most, j = 0, 0
    for i in range(len(s)):
        while j < len(s) and s[j] < s[i] + period:
            j += 1
        most = max(most, j - i)
    minute = sum(1 for x in s if x < 60.0)
    gaps = [b - a for a, b in zip(s, s[1:])]
    print(f"{key}: {len(s)} starts over {s[-1]:.1f} s; most in any window of one period: {most}; "
          f"first minute: {minute} ({minute / 60:.3f}/s); gaps {min(gaps) * 1000:.1f} - {max(gaps) * 1000:.1f} ms")
PY
