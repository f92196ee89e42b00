#!/bin/bash
# The keys-weighed-by-fuel figure of BENCHMARKS.md: in one queue on DATABASE_URL (an empty
# database), key a's tasks count the words of 200 KB, key b's of 20 KB (about a tenth of the
# fuel). One task of each runs first (the keys' averages), then NA of a's and NB of b's are
# queued at once and two workers of 16 slots drain them. MODE `weighed` sets the queue's
# fuel_per_turn to 1,000,000; `counted` leaves turns counted by tasks. Prints, over the time
# until the first key's backlog is done, each key's runs and the fuel they burnt.
#   scripts/bench-fuel.sh weighed postgres://postgres@127.0.0.1:5432/fuelbench 300 3000
set -euo pipefail
MODE=$1 URL=$2 NA=${3:-300} NB=${4:-3000}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/target/release/taskhost
dir=$(mktemp -d)
trap 'kill -TERM $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
export TASKHOST_DATABASE_URL=$URL TASKHOST_PLUGINS=$dir/plugins
mkdir -p "$dir/plugins" && cp "$root/target/test-plugins/word-count.wasm" "$dir/plugins/"
"$bin" migrate > /dev/null
if [ "$MODE" = weighed ]; then
    "$bin" limits set queue:metered --fuel-per-turn 1000000 > /dev/null
fi
# Written by Python: a's text is 200 KB, b's 20 KB, the same words.
tasks() {
    python3 -c 'import json, sys
n, key, words = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
text = "lorem ipsum dolor sit amet\n" * words
for i in range(n):
    print(json.dumps({"handler": "word-count", "data": {"text": text}, "queue": "metered", "key": key}))' "$@"
}
tasks 1 a 8000 > "$dir/warm.jsonl"
tasks 1 b 800 >> "$dir/warm.jsonl"
"$bin" add --many "$dir/warm.jsonl" > /dev/null
"$bin" worker --drain --queues metered > "$dir/warm.log" 2>&1
tasks "$NA" a 8000 > "$dir/a.jsonl"
tasks "$NB" b 800 > "$dir/b.jsonl"
"$bin" add --many "$dir/a.jsonl" > /dev/null
"$bin" add --many "$dir/b.jsonl" > /dev/null
"$bin" queues --keys --queue metered
"$bin" worker --concurrency 16 --queues metered --drain > "$dir/w1.log" 2>&1 &
"$bin" worker --concurrency 16 --queues metered --drain > "$dir/w2.log" 2>&1 &
wait
"$bin" list --queue metered --status success --limit 1000000 --json > "$dir/done.json"
python3 - "$dir/done.json" "$MODE" <<'PY'
import json, sys, datetime
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
# The backlog's runs: the two warm-up tasks are ids 1 and 2.
runs = [(x["task"]["key"], r) for x in json.load(open(sys.argv[1])) if x["task"]["id"] > 2 for r in x["runs"]]
start = min(t(r["started_on"]) for _, r in runs)
ends = {k: max(t(r["finished_on"]) for key, r in runs if key == k) for k in ("a", "b")}
first = min(ends.values())
span = (first - start).total_seconds()
print(f"{sys.argv[2]}: the first backlog done after {span:.2f} s (a: {(ends['a'] - start).total_seconds():.2f} s, "
      f"b: {(ends['b'] - start).total_seconds():.2f} s); until then:")
fuel = {}
for k in ("a", "b"):
    mine = [r for key, r in runs if key == k and t(r["finished_on"]) <= first]
    fuel[k] = sum(r["fuel_used"] or 0 for r in mine)
    print(f"  {k}: {len(mine)} runs, {fuel[k] / 1e9:.2f} G fuel")
print(f"  a's share of the fuel: {fuel['a'] / (fuel['a'] + fuel['b']):.0%}")
PY
