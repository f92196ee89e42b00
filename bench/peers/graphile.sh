#!/usr/bin/env bash
# Graphile Worker against taskhost, on the same fresh PostgreSQL database, interleaved.
#
# NOT run by CI: it installs graphile-worker from npm, needs a PostgreSQL server and a release
# build of taskhost, and takes minutes. Run it by hand from anywhere:
#
#   bash bench/peers/graphile.sh
#
# What it does:
#   1. installs graphile-worker (pinned, PEERS_GRAPHILE_VERSION) into target/peers/graphile;
#   2. creates a fresh database (PEERS_DB) on the server of PEERS_PG_ADMIN_URL, dropped at exit;
#   3. PEERS_REPS times, each configuration, graphile then taskhost on that database:
#        "1 process"   graphile: 1 worker process;  taskhost: --processes 0 (drain in bench's process)
#        "2 processes" graphile: 2 worker processes; taskhost: --processes 2
#        (taskhost at --concurrency 1024 --claim-batch 256 in both), then
#        "defaults"    taskhost alone with its default worker settings, --processes 0
#      each with PEERS_JOBS no-op jobs: bulk add jobs/s, drain jobs/s, worker CPU µs a job;
#   4. prints the machine, the versions and a markdown table with taskhost / graphile ratios.
#
# Graphile's side (graphile-run.js) reproduces the "batching" configuration of graphile-worker's
# own perfTest (perfTest/graphile.config.js: concurrentJobs 24, maxPoolSize 25, localQueue size
# 500 with refetchDelay 10 ms, completeJobBatchDelay 0, failJobBatchDelay 0; NO_LOG_SUCCESS=1)
# and queues jobs as its perfTest/init.js does (one graphile_worker.add_jobs call). Its drain is
# timed from run() in already started node processes until the jobs table is empty. It empties
# graphile's jobs table before and after each run; taskhost's bench removes its own tasks.
#
# Env:
#   PEERS_PG_ADMIN_URL      a database URL on the server, used to create/drop PEERS_DB
#                           (default postgres://postgres@127.0.0.1:5432/test)
#   PEERS_DB                the benchmark's database, created fresh (default peers_bench)
#   PEERS_JOBS              jobs per run (default 50000)
#   PEERS_REPS              repetitions (default 3)
#   PEERS_GRAPHILE_VERSION  graphile-worker from npm (default 0.17.3; 0.18 needs node >= 22.18)
#   TASKHOST                taskhost binary (default <repo>/target/release/taskhost; not built
#                           here: without it the taskhost rows are skipped)
# Results (one JSON line a run) and the runs' logs go to target/peers/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/peers
ADMIN_URL=${PEERS_PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/test}
DB=${PEERS_DB:-peers_bench}
JOBS=${PEERS_JOBS:-50000}
REPS=${PEERS_REPS:-3}
GRAPHILE_VERSION=${PEERS_GRAPHILE_VERSION:-0.17.3}
TASKHOST=${TASKHOST:-$ROOT/target/release/taskhost}
GRAPHILE_DIR=$ROOT/target/peers/graphile
OUT=$ROOT/target/peers
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS=$OUT/graphile-$STAMP.jsonl
LOG=$OUT/graphile-$STAMP.log

# The database name goes into SQL unquoted: keep it a plain identifier.
[[ $DB =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "PEERS_DB must be a plain lower-case identifier" >&2; exit 2; }
[[ $JOBS =~ ^[1-9][0-9]*$ && $REPS =~ ^[1-9][0-9]*$ ]] || { echo "PEERS_JOBS and PEERS_REPS must be positive integers" >&2; exit 2; }
for tool in psql node npm; do
  command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 2; }
done

# The benchmark's URL: the admin URL with its database replaced (query string kept).
base=${ADMIN_URL%%\?*}
query=${ADMIN_URL:${#base}}
rest=${base#*://}
if [[ $rest == */* ]]; then server=${base%/*}; else server=$base; fi
URL=$server/$DB$query

mkdir -p "$OUT"
: >"$RESULTS"
: >"$LOG"

# graphile-worker, pinned, in a gitignored directory of its own: no global install, no lockfile
# in the repo. Reinstalled only when the version differs.
installed=$(node -p "try { require('$GRAPHILE_DIR/node_modules/graphile-worker/package.json').version } catch { '' }")
if [[ $installed != "$GRAPHILE_VERSION" ]]; then
  echo "installing graphile-worker@$GRAPHILE_VERSION into $GRAPHILE_DIR" >&2
  mkdir -p "$GRAPHILE_DIR"
  echo '{ "name": "taskhost-peers-graphile", "private": true }' >"$GRAPHILE_DIR/package.json"
  (cd "$GRAPHILE_DIR" && npm install --no-audit --no-fund --save-exact "graphile-worker@$GRAPHILE_VERSION" >&2)
fi

# A fresh database, so both queues start from empty tables on the same server; dropped however
# the script ends (WITH (FORCE): a worker killed by Ctrl-C may still hold a connection).
psql() { PGOPTIONS="-c client_min_messages=warning" command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
cleanup() {
  psql "$ADMIN_URL" -c "drop database if exists $DB with (force)" >/dev/null 2>&1 ||
    echo "could not drop database $DB" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM
psql "$ADMIN_URL" -c "drop database if exists $DB with (force)" -c "create database $DB"

have_taskhost=1
if [[ ! -x $TASKHOST ]]; then
  have_taskhost=0
  echo "NOTE: $TASKHOST is not an executable (build it with cargo build --release); the taskhost rows are skipped." >&2
fi

# One graphile run; its JSON line tagged with the configuration into the results. Its stderr
# (worker logs, "Found 999!") goes to the log; on failure the log's tail is shown.
graphile() { # config label rep processes
  local json
  if ! json=$(node "$HERE/graphile-run.js" --url "$URL" --jobs "$JOBS" --processes "$4" 2>>"$LOG"); then
    echo "graphile run failed ($2, rep $3); the log's tail:" >&2
    tail -n 20 "$LOG" >&2
    exit 1
  fi
  printf '{"config":"%s","label":"%s","rep":%d,"side":"graphile","result":%s}\n' "$1" "$2" "$3" "$json" >>"$RESULTS"
  echo "  graphile  $2: $json" >&2
}

# One taskhost run: `taskhost bench --json` prints one JSON object (the last line starting with
# "{"); it removes its own tasks afterwards. Extra arguments are its worker settings.
taskhost() { # config label rep with processes [bench args...]
  local config=$1 label=$2 rep=$3 with=$4 processes=$5 json
  shift 5
  if ((!have_taskhost)); then
    echo "  taskhost  $label: skipped ($TASKHOST not built)" >&2
    return 0
  fi
  if ! json=$(cd "$ROOT" && "$TASKHOST" --database-url "$URL" bench --tasks "$JOBS" --processes "$processes" \
    --latency-runs 200 --json "$@" 2>>"$LOG" | grep '^{' | tail -n 1); then
    echo "taskhost run failed ($label, rep $rep); the log's tail:" >&2
    tail -n 20 "$LOG" >&2
    exit 1
  fi
  printf '{"config":"%s","label":"%s","rep":%d,"with":"%s","side":"taskhost","result":%s}\n' \
    "$config" "$label" "$rep" "$with" "$json" >>"$RESULTS"
  echo "  taskhost  $label: $json" >&2
}

echo "peers bench: $JOBS no-op jobs a run, $REPS repetitions, database $DB" >&2
for ((r = 1; r <= REPS; r++)); do
  echo "repetition $r/$REPS" >&2
  # Interleaved, graphile first then taskhost, so a slow moment of the machine hits both.
  graphile p1 "1 process" "$r" 1
  taskhost p1 "1 process" "$r" "" 0 --concurrency 1024 --claim-batch 256
  graphile p2 "2 processes" "$r" 2
  taskhost p2 "2 processes" "$r" "" 2 --concurrency 1024 --claim-batch 256
  # taskhost with its defaults (what a user gets without tuning), against graphile's 1-process
  # figure of this repetition.
  taskhost defaults "taskhost defaults, 1 process" "$r" p1 0
done

# The setting, then the table.
gw_version=$(node -p "require('$GRAPHILE_DIR/node_modules/graphile-worker/package.json').version")
th_version=$( ((have_taskhost)) && "$TASKHOST" --version 2>/dev/null || echo "not built")
echo
echo "## Graphile Worker vs taskhost, $JOBS no-op jobs a run, $REPS repetitions"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, Linux $(uname -r)"
echo "- PostgreSQL $(psql "$URL" -Atc 'show server_version') (same server for both, database $DB)"
echo "- graphile-worker $gw_version (node $(node --version)): perfTest batching config, concurrency 24 a process"
echo "- taskhost: $th_version ($TASKHOST)"
echo
node "$HERE/table.js" "$RESULTS"
echo
echo "Results: $RESULTS; logs: $LOG"
