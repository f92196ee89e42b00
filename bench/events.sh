#!/usr/bin/env bash
# The event stream's reader beside a queue drained at full speed (issue 50): one worker drains the same
# tasks with no stream open and with EVENTS_STREAMS streams open on `taskhost serve`, alternated; for each
# drain, its rate, the CPU `serve` spent over it, what the streams were told, and the CPU their readers
# (curl and awk, on this machine too) spent.
#
#   bash bench/events.sh [DATABASE_URL]     (default: a new SQLite file)
#
# EVENTS_TASKS (50000) noop tasks a drain, EVENTS_STREAMS (10), EVENTS_REPS (2) pairs. Needs a release build
# (target/release/taskhost, or TASKHOST_BIN) and the test plugins (noop). A PostgreSQL or MySQL URL must name an
# empty database. Prints one JSON line per drain.
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=${EVENTS_TASKS:-50000} streams=${EVENTS_STREAMS:-10} reps=${EVENTS_REPS:-2}
. bench/lib.sh
bench_setup events "${1:-}"
seq "$tasks" | sed 's/.*/{"handler": "noop", "data": {"i": &}}/' > "$dir/tasks.jsonl"
base="http://127.0.0.1:$port"
"$bin" --database-url "$url" --plugins "$dir/plugins" --log warn serve --listen "127.0.0.1:$port" > /dev/null 2> "$dir/serve.log" &
serve=$!
wait_up $serve "$base" "$dir/serve.log"
# utime + stime of a process, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
for rep in $(seq "$reps"); do
  for open in 0 "$streams"; do
    th add --many - < "$dir/tasks.jsonl" > /dev/null
    readers=()
    if [ "$open" -gt 0 ]; then
      # Each stream read by curl, its events counted by awk (cheap beside the drain: a reader in Python
      # took a core of this machine's two); `times` says what the two spent.
      for i in $(seq "$open"); do
        ( curl -sN "$base/api/v1/events" | awk '/^event: task/ {t++} /"reason":"burst"/ {b++} /"reason":"behind"/ {h++}
            END {print t + 0, b + 0, h + 0}' || true; times ) > "$dir/told.$i" 2>&1 &
        readers+=($!)
      done
      until curl -s "$base/metrics" | grep -qx "taskhost_api_event_streams $open"; do sleep 0.05; done
    fi
    before=$(ticks $serve)
    start=$(date +%s%N)
    th --log warn worker --drain --no-overseer 2>> "$dir/worker.log"
    end=$(date +%s%N)
    after=$(ticks $serve)
    told='{}'
    if [ "$open" -gt 0 ]; then
      # What the streams are told of the drain's last look comes within the reader's tick (200 ms).
      sleep 0.5
      pkill -f "curl -sN $base/api/v1/events" || true
      wait "${readers[@]}" || true
      told=$(awk 'FNR == 1 {t += $1; b += $2; h += $3}
                  FNR == 3 {split($1, u, /[ms]/); split($2, s, /[ms]/); cpu += u[1] * 60 + u[2] + s[1] * 60 + s[2]}
                  END {printf "{\"told\": %d, \"lagged_burst\": %d, \"lagged_behind\": %d, \"readers_cpu_ms\": %d}", t, b, h, cpu * 1000}' \
               "$dir"/told.*)
      rm -f "$dir"/told.*
    fi
    python3 - "$rep" "$open" "$tasks" "$start" "$end" "$before" "$after" "$hz" "$told" <<'PY'
import json, sys
rep, open_, n, start, end, before, after, hz, told = sys.argv[1:]
secs = (int(end) - int(start)) / 1e9
cpu_ms = (int(after) - int(before)) * 1000 / int(hz)
print(json.dumps({"rep": int(rep), "streams": int(open_), "tasks": int(n), "drain_s": round(secs, 2),
                  "drain_per_s": round(int(n) / secs), "serve_cpu_ms": round(cpu_ms),
                  "serve_cpu_us_per_task": round(cpu_ms * 1000 / int(n), 1), **json.loads(told)}))
PY
  done
done
