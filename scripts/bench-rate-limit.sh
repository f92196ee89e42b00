#!/bin/bash
# The rate-limit figure of BENCHMARKS.md: two workers of 16 slots claim no-op tasks from one
# queue limited to RATE (with BURST) for SECS seconds on DATABASE_URL (an empty database); then
# the most starts in any window of one period and the rate over the first minute, from each
# run's start (the database's time the rate counted by).
#   scripts/bench-rate-limit.sh 5/1s 0 65 postgres://postgres@127.0.0.1:5432/ratebench
set -euo pipefail
RATE=$1 BURST=$2 SECS=$3 URL=$4
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/target/release/taskhost
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export TASKHOST_DATABASE_URL=$URL TASKHOST_PLUGINS=$dir/plugins
mkdir -p "$dir/plugins" && cp "$root/target/test-plugins/noop.wasm" "$dir/plugins/"
printf '[queues.rl]\nrate_limit = "%s"\nrate_burst = %s\n' "$RATE" "$BURST" > "$dir/th.toml"
"$bin" migrate > /dev/null
for _ in $(seq 2000); do echo '{"handler": "noop", "data": {}, "queue": "rl"}'; done > "$dir/many.jsonl"
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
starts = sorted(
    datetime.datetime.fromisoformat(r["started_on"].replace("Z", "+00:00"))
    for t in tasks for r in t["runs"] if r.get("started_on")
)
s = [(t - starts[0]).total_seconds() for t in starts]
most, j = 0, 0
for i in range(len(s)):
    while j < len(s) and s[j] < s[i] + period:
        j += 1
    most = max(most, j - i)
minute = sum(1 for x in s if x < 60.0)
gaps = [b - a for a, b in zip(s, s[1:])]
print(f"{len(s)} starts over {s[-1]:.1f} s; most in any window of one period: {most}; "
      f"first minute: {minute} ({minute / 60:.3f}/s); gaps {min(gaps) * 1000:.1f} - {max(gaps) * 1000:.1f} ms")
PY
