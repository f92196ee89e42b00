#!/bin/bash
# The fair-shares figure of BENCHMARKS.md: customer A queues N no-op tasks (10,000 unless
# given), two workers of 16 slots start on them, and a second later customer B queues 10, in one
# queue on DATABASE_URL (an empty database). MODE `keyed` gives A's tasks --key a and B's --key
# b; `plain` gives none. Prints when B's last task ended after B queued it, and A's throughput
# over its drain.
#   scripts/bench-fair.sh keyed postgres://postgres@127.0.0.1:5432/fairbench 100000
set -euo pipefail
MODE=$1 URL=$2 N=${3:-10000}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/target/release/taskhost
dir=$(mktemp -d)
trap 'kill -TERM $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
export TASKHOST_DATABASE_URL=$URL TASKHOST_PLUGINS=$dir/plugins
mkdir -p "$dir/plugins" && cp "$root/target/test-plugins/noop.wasm" "$dir/plugins/"
"$bin" migrate > /dev/null
# Written by Python: a shell loop of 300,000 lines takes minutes.
tasks() {
    python3 -c 'import json, sys
n, key = int(sys.argv[1]), sys.argv[2]
for i in range(1, n + 1):
    t = {"handler": "noop", "data": {"i": i}, "queue": "fair"}
    if key != "-":
        t["key"] = key
    print(json.dumps(t))' "$1" "$([ "$MODE" = keyed ] && echo "$2" || echo -)"
}
tasks "$N" a > "$dir/a.jsonl"
tasks 10 b > "$dir/b.jsonl"
"$bin" add --many "$dir/a.jsonl" > /dev/null
"$bin" worker --concurrency 16 --queues fair > "$dir/w1.log" 2>&1 &
"$bin" worker --concurrency 16 --queues fair > "$dir/w2.log" 2>&1 &
sleep 1
"$bin" add --many "$dir/b.jsonl" > /dev/null
# Until the queue is drained (a second's poll: the figure is read from the tasks' own times).
until "$bin" queues --json | python3 -c 'import json,sys; q=[x for x in json.load(sys.stdin) if x["name"]=="fair"]; sys.exit(0 if not q or q[0]["due"]+q[0]["running"]+q[0]["later"]==0 else 1)'; do
    sleep 1
done
"$bin" list --queue fair --status success --limit 1000000 --json > "$dir/done.json"
python3 - "$dir/done.json" "$MODE" "$N" <<'PY'
import json, sys, datetime
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
tasks = [dict(x["task"], runs=x["runs"]) for x in json.load(open(sys.argv[1]))]
# A fresh database: A's tasks are ids 1 to N, B's the next 10.
n = int(sys.argv[3])
a = [x for x in tasks if x["id"] <= n]
b = [x for x in tasks if x["id"] > n]
b_queued = min(t(x["queued_on"]) for x in b)
b_done = max(t(x["runs"][-1]["finished_on"]) for x in b)
a_start = min(t(x["runs"][0]["started_on"]) for x in a)
a_end = max(t(x["runs"][-1]["finished_on"]) for x in a)
span = (a_end - a_start).total_seconds()
print(f"{sys.argv[2]}: B's 10 done {(b_done - b_queued).total_seconds():.3f} s after B queued them; "
      f"A's {len(a)} in {span:.2f} s ({len(a) / span:.0f}/s)")
PY
