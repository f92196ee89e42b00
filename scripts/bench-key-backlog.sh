#!/usr/bin/env bash
# What an idle worker's claims cost the database while every key with due tasks is out of room
# (issue 48): one key's backlog of N due tasks in a queue under `rate_limit_per_key = "1/1h"`
# (and a cap per key of 1,000, which binds nothing but keeps idle workers at the 50 ms poll, as
# a cap per key does on every database). The first run takes the key's one start; then one
# worker of 16 slots polls for SECS seconds, finding nothing it may take. MODE `capped`: a cap
# per key of 1 and no rate instead, the key's first run (the `probe` plugin) sleeping meanwhile.
#
#   scripts/bench-key-backlog.sh BIN URL [N=100000] [SECS=20] [MODE=paced|capped]
#
# URL: postgres://…, mysql://… or sqlite:///path (a new file). Prints the CPU the database
# server's processes used meanwhile (PostgreSQL: the postmaster's children; MariaDB: mariadbd)
# and the worker's own, in ms a second; the worker's is SQLite's whole cost.
set -euo pipefail
bin=$1 url=$2 n=${3:-100000} secs=${4:-20} mode=${5:-paced}
cd "$(dirname "$0")/.."
plugins=$(mktemp -d)
trap 'kill "${worker:-}" 2>/dev/null && wait "$worker" 2>/dev/null; rm -rf "$plugins"' EXIT
cp target/wasm32-wasip2/release/noop.wasm target/test-plugins/probe.wasm "$plugins/"
th() { "$bin" --database-url "$url" --plugins "$plugins" --log warn "$@"; }
th migrate > /dev/null
if [ "$mode" = capped ]; then
  th limits set queue:kb --max-running-per-key 1 > /dev/null
  handler=probe data='{"sleep_ms": 600000}' ran=running
else
  th limits set queue:kb --max-running-per-key 1000 --rate-per-key 1/1h > /dev/null
  handler=noop data='{}' ran=succeeded
fi
python3 -c "
import json, sys
for i in range($n):
    sys.stdout.write(json.dumps({'handler': '$handler', 'queue': 'kb', 'key': 'a', 'data': $data}) + '\n')
" | th add --many - > /dev/null

# CPU ticks (1/100 s) of the server's processes, or 0 for SQLite.
server_ticks() {
  local pids=""
  case $url in
    postgres*) pids=$(pgrep -P "$(head -1 "$(psql "$url" -Atc 'SHOW data_directory')/postmaster.pid")" || true) ;;
    mysql*) pids=$(cat "$(mysql_of "$url" -Ne 'SELECT @@pid_file')") ;;
  esac
  local sum=0 p
  for p in $pids; do
    if [ -r "/proc/$p/stat" ]; then
      sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    fi
  done
  echo $sum
}
# The mysql client on a mysql://user[:password]@host:port/db URL.
mysql_of() {
  python3 - "$@" <<'PY'
import os, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
args = ["mysql", "-h", u.hostname, "-P", str(u.port or 3306), "-u", u.username or "root", u.path.lstrip("/")]
if u.password:
    args.insert(1, "-p" + u.password)
os.execvp("mysql", args + sys.argv[2:])
PY
}
ticks_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }

"$bin" --database-url "$url" --plugins "$plugins" --log warn worker --queues kb --concurrency 16 > /dev/null 2>&1 &
worker=$!
# The key's one start done (capped: its one run under way): then nothing more fits.
deadline=$((SECONDS + 60))
until th list --queue kb --state $ran 2>/dev/null | grep $handler > /dev/null; do
  [ $SECONDS -lt $deadline ] || { echo "no run finished within 60 s" >&2; exit 1; }
  sleep 0.2
done
s0=$(server_ticks) w0=$(ticks_of $worker)
sleep "$secs"
s1=$(server_ticks) w1=$(ticks_of $worker)
echo "backlog $n, $secs s idle: server $(( (s1 - s0) * 10 / secs )) ms/s, worker $(( (w1 - w0) * 10 / secs )) ms/s"
