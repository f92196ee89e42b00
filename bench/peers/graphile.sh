#!/usr/bin/env bash
# Graphile Worker against taskhost, on the same fresh PostgreSQL database, interleaved.
#
# NOT run by CI: it installs graphile-worker from npm, needs a PostgreSQL server and a release
# build of taskhost, and takes minutes. Run it by hand from anywhere:
#
#   bash bench/peers/graphile.sh
#
# What it does:
#   1. installs each graphile-worker of PEERS_GRAPHILE_VERSIONS into target/peers/graphile-VERSION
#      (and Node.js 22 from npm into target/peers/node22 when a version needs it and `node` is older);
#   2. creates a fresh database (PEERS_DB) on the server of PEERS_PG_ADMIN_URL, dropped at exit;
#   3. PEERS_REPS times, each configuration, each graphile version then taskhost on that database
#      (graphile's schema dropped when the version changes):
#        "1 process"   graphile: 1 worker process;  taskhost: --processes 0 (drain in bench's process)
#        "2 processes" graphile: 2 worker processes; taskhost: --processes 2
#        (taskhost at --concurrency 1024 --claim-batch 256 in both: PEERS_TASKHOST_CONCURRENCY and
#        PEERS_TASKHOST_CLAIM_BATCH change them), then
#        "defaults"    taskhost alone with its default worker settings, --processes 0
#        "p1del", "p2del" taskhost alone as "1 process" and "2 processes" with its queue deleting
#                      its successes (--on-success delete), as Graphile deletes its jobs
#      each with PEERS_JOBS no-op jobs: bulk add jobs/s, drain jobs/s, worker CPU µs a job, and the
#      database server's work over the whole run (bulk add, drain, clean-up) a job: its CPU (the
#      postmaster's processes, those that ended included, from /proc: only when the server runs on
#      this machine and /proc shows its processes) and the WAL it wrote;
#   4. prints the machine, the versions and markdown tables with taskhost / graphile ratios, and
#      when the server loads pg_stat_statements (shared_preload_libraries), each run's costliest
#      statements into target/peers/graphile-STAMP-statements.md.
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
#   PEERS_GRAPHILE_VERSIONS graphile-worker versions from npm, by spaces (default "0.17.3 0.18.0";
#                           PEERS_GRAPHILE_VERSION, one version, is read too)
#   PEERS_TASKHOST_CONCURRENCY, PEERS_TASKHOST_CLAIM_BATCH
#                           taskhost's --concurrency (1024) and --claim-batch (256) in the runs above
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
read -r -a VERSIONS <<<"${PEERS_GRAPHILE_VERSIONS:-${PEERS_GRAPHILE_VERSION:-0.17.3 0.18.0}}"
TASKHOST=${TASKHOST:-$ROOT/target/release/taskhost}
TH_CONCURRENCY=${PEERS_TASKHOST_CONCURRENCY:-1024}
TH_CLAIM_BATCH=${PEERS_TASKHOST_CLAIM_BATCH:-256}
OUT=$ROOT/target/peers
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RESULTS=$OUT/graphile-$STAMP.jsonl
LOG=$OUT/graphile-$STAMP.log
STATEMENTS=$OUT/graphile-$STAMP-statements.md

# The database name goes into SQL unquoted: keep it a plain identifier.
[[ $DB =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "PEERS_DB must be a plain lower-case identifier" >&2; exit 2; }
[[ $JOBS =~ ^[1-9][0-9]*$ && $REPS =~ ^[1-9][0-9]*$ ]] || { echo "PEERS_JOBS and PEERS_REPS must be positive integers" >&2; exit 2; }
for v in "${VERSIONS[@]}"; do
  [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "graphile-worker version '$v' is not X.Y.Z" >&2; exit 2; }
done
((${#VERSIONS[@]})) || { echo "PEERS_GRAPHILE_VERSIONS names no version" >&2; exit 2; }
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

# graphile-worker, pinned, in a gitignored directory of its own a version: no global install, no
# lockfile in the repo. Installed once a version. 0.18 needs Node.js >= 22.18: when `node` is older,
# Node.js 22 from npm (its package holds the binary) runs that version.
install_graphile() { # version
  local dir=$OUT/graphile-$1 installed
  installed=$(node -p "try { JSON.parse(require('fs').readFileSync('$dir/node_modules/graphile-worker/package.json')).version } catch { '' }")
  if [[ $installed != "$1" ]]; then
    echo "installing graphile-worker@$1 into $dir" >&2
    mkdir -p "$dir"
    echo '{ "name": "taskhost-peers-graphile", "private": true }' >"$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund --save-exact "graphile-worker@$1" >&2)
  fi
}
declare -A NODE
node_for() { # version: the node binary to run it with
  local major minor
  IFS=. read -r major minor _ <<<"$1"
  if ((major == 0 && minor < 18)) || node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 18) ? 0 : 1)'; then
    command -v node
    return
  fi
  if [[ ! -x $OUT/node22/node_modules/.bin/node ]]; then
    echo "installing Node.js 22 from npm into $OUT/node22 (graphile-worker $1 needs >= 22.18)" >&2
    mkdir -p "$OUT/node22"
    echo '{ "name": "taskhost-peers-node", "private": true }' >"$OUT/node22/package.json"
    (cd "$OUT/node22" && npm install --no-audit --no-fund --save-exact node@22 >&2)
  fi
  echo "$OUT/node22/node_modules/.bin/node"
}
for v in "${VERSIONS[@]}"; do
  install_graphile "$v"
  NODE[$v]=$(node_for "$v")
done

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

# The server's work, read before and after each run. The postmaster: the parent of a backend,
# found once (the server is not restarted during the bench); none when /proc does not show it.
CLK_TCK=$(getconf CLK_TCK)
POSTMASTER=$(printf '%s\n' "select pg_backend_pid() as pid \\gset" "\\setenv PID :pid" \
  "\\! awk '/^PPid:/ {print \$2}' /proc/\$PID/status 2>/dev/null" | psql -At "$URL" || true)
[[ $POSTMASTER =~ ^[0-9]+$ && -r /proc/$POSTMASTER/stat ]] || POSTMASTER=
[[ -n $POSTMASTER ]] || echo "NOTE: the server's processes are not on this machine: its CPU is not measured." >&2
# pg_stat_statements, when the server loads it: each run's costliest statements.
STAT_STATEMENTS=0
if [[ $(psql "$URL" -Atc "show shared_preload_libraries") == *pg_stat_statements* ]]; then
  psql "$URL" -c "create extension if not exists pg_stat_statements" && STAT_STATEMENTS=1
  echo "# Statements a run, costliest first ($JOBS jobs a run)" >"$STATEMENTS"
else
  echo "NOTE: the server does not load pg_stat_statements (shared_preload_libraries): no statements' table." >&2
fi

# Whether none of the postmaster's processes serves the benchmark's database or is ending (a zombie):
# a backend read between the list of processes and its end would be counted neither alive nor reaped.
server_quiet() {
  local c state
  for c in $(pgrep -P "$POSTMASTER"); do
    state=$(sed 's/^.*) //' "/proc/$c/stat" 2>/dev/null | cut -d' ' -f1) || continue
    [[ $state == Z ]] && return 1
    tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null | grep -q " $DB " && return 1
  done
  return 0
}

# The server's CPU so far in clock ticks: the postmaster's, its live processes', and those of the
# processes it reaped (cutime, cstime: a backend's CPU when its connection closed), once the last
# run's connections are gone (at most 30 s). Empty without it.
server_ticks() {
  [[ -n $POSTMASTER ]] || return 0
  local deadline=$((SECONDS + 30))
  until server_quiet; do
    ((SECONDS < deadline)) || { echo "NOTE: the server's processes did not settle: this run's CPU is rough" >&2; break; }
    sleep 0.05
  done
  # Fields after "pid (comm) ": $12 utime, $13 stime, $14 cutime, $15 cstime.
  { cat "/proc/$POSTMASTER/stat"; for c in $(pgrep -P "$POSTMASTER"); do cat "/proc/$c/stat" 2>/dev/null; done; } |
    awk 'NR == 1 { sub(/^.*\) /, ""); s += $12 + $13 + $14 + $15; next } { sub(/^.*\) /, ""); s += $12 + $13 } END { print s }'
}
wal_bytes() { psql "$URL" -Atc "select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"; }
# Before a run: the previous run's dead rows vacuumed and a checkpoint (so that neither an autovacuum
# nor a checkpoint of what the last run left lands in this run's figures, and each run starts with
# the same full-page writes ahead), then the ticks and the WAL read and the statements' counts reset.
SERVER0=
server_start() {
  psql "$URL" -c "vacuum" >/dev/null
  psql "$URL" -c "checkpoint" >/dev/null 2>&1 || true # a superuser's (or pg_checkpoint's)
  ((STAT_STATEMENTS)) && psql "$URL" -Atc "select pg_stat_statements_reset()" >/dev/null
  SERVER0="$(server_ticks) $(wal_bytes)"
}
# After it: {"cpu_us_per_job", "wal_bytes_per_job"} of the run (cpu null when not measured), and its
# statements appended to $STATEMENTS under `title`.
server_end() { # title
  local t0 w0 t1 w1 cpu
  read -r t0 w0 <<<"$SERVER0"
  t1=$(server_ticks) w1=$(wal_bytes)
  if [[ -n $t0 && -n $t1 ]]; then cpu=$(((t1 - t0) * 1000000 / CLK_TCK / JOBS)); else cpu=null; fi
  if ((STAT_STATEMENTS)); then
    {
      echo
      echo "## $1"
      echo
      echo "| calls | rows | ms | µs a job | WAL bytes a job | blocks dirtied | statement |"
      echo "|---:|---:|---:|---:|---:|---:|---|"
      psql "$URL" -At -F ' | ' -c "select calls, rows, round(total_exec_time::numeric, 1),
          round((total_exec_time * 1000 / $JOBS)::numeric, 2), round(wal_bytes / $JOBS, 1), shared_blks_dirtied,
          left(regexp_replace(query, '\s+', ' ', 'g'), 160)
        from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
        order by total_exec_time desc limit 12" | sed 's/^/| /; s/$/ |/'
    } >>"$STATEMENTS"
  fi
  printf '{"cpu_us_per_job":%s,"wal_bytes_per_job":%d}' "$cpu" "$(((w1 - w0) / JOBS))"
}

# One graphile run; its JSON line tagged with the configuration into the results. Its stderr
# (worker logs, "Found 999!") goes to the log; on failure the log's tail is shown. Graphile's schema
# is dropped when the version differs from the last run's (an older one refuses a newer schema).
LAST_VERSION=
graphile() { # config label rep processes version
  local json server v=$5
  if [[ $v != "$LAST_VERSION" ]]; then
    psql "$URL" -c "drop schema if exists graphile_worker cascade" >/dev/null
    PEERS_GRAPHILE_DIR=$OUT/graphile-$v "${NODE[$v]}" "$HERE/graphile-run.js" --url "$URL" --migrate 2>>"$LOG"
    LAST_VERSION=$v
  fi
  server_start
  if ! json=$(PEERS_GRAPHILE_DIR=$OUT/graphile-$v "${NODE[$v]}" "$HERE/graphile-run.js" --url "$URL" --jobs "$JOBS" \
    --processes "$4" 2>>"$LOG"); then
    echo "graphile $v run failed ($2, rep $3); the log's tail:" >&2
    tail -n 20 "$LOG" >&2
    exit 1
  fi
  server=$(server_end "graphile-worker $v, $2, rep $3")
  printf '{"config":"%s","label":"%s","rep":%d,"side":"graphile","version":"%s","result":%s,"server":%s}\n' \
    "$1" "$2" "$3" "$v" "$json" "$server" >>"$RESULTS"
  echo "  graphile $v  $2: $json $server" >&2
}

# One taskhost run: `taskhost bench --json` prints one JSON object (the last line starting with
# "{"); it removes its own tasks afterwards. Extra arguments are its worker settings. No latency
# runs: Graphile's side has none, and their 200 single adds, each polled until it ran, cost the
# server as much as a third of the whole run's work (13 - 14 µs a job of 50,000, session 67).
taskhost() { # config label rep with processes [bench args...]
  local config=$1 label=$2 rep=$3 with=$4 processes=$5 json server
  shift 5
  if ((!have_taskhost)); then
    echo "  taskhost  $label: skipped ($TASKHOST not built)" >&2
    return 0
  fi
  server_start
  if ! json=$(cd "$ROOT" && "$TASKHOST" --database-url "$URL" bench --tasks "$JOBS" --processes "$processes" \
    --latency-runs 0 --json "$@" 2>>"$LOG" | grep '^{' | tail -n 1); then
    echo "taskhost run failed ($label, rep $rep); the log's tail:" >&2
    tail -n 20 "$LOG" >&2
    exit 1
  fi
  server=$(server_end "taskhost, $label, rep $rep")
  printf '{"config":"%s","label":"%s","rep":%d,"with":"%s","side":"taskhost","result":%s,"server":%s}\n' \
    "$config" "$label" "$rep" "$with" "$json" "$server" >>"$RESULTS"
  echo "  taskhost  $label: $json $server" >&2
}

echo "peers bench: $JOBS no-op jobs a run, $REPS repetitions, database $DB, graphile-worker ${VERSIONS[*]}" >&2
for ((r = 1; r <= REPS; r++)); do
  echo "repetition $r/$REPS" >&2
  # Interleaved, graphile first then taskhost, so a slow moment of the machine hits both.
  for v in "${VERSIONS[@]}"; do graphile p1 "1 process" "$r" 1 "$v"; done
  taskhost p1 "1 process" "$r" "" 0 --concurrency "$TH_CONCURRENCY" --claim-batch "$TH_CLAIM_BATCH"
  for v in "${VERSIONS[@]}"; do graphile p2 "2 processes" "$r" 2 "$v"; done
  taskhost p2 "2 processes" "$r" "" 2 --concurrency "$TH_CONCURRENCY" --claim-batch "$TH_CLAIM_BATCH"
  # taskhost with its defaults (what a user gets without tuning), against graphile's 1-process
  # figures of this repetition.
  taskhost defaults "taskhost defaults, 1 process" "$r" p1 0
  # taskhost with its queue deleting its successes (`--on-success delete`), as Graphile deletes its
  # jobs, against graphile's figures of the same repetition.
  taskhost p1del "1 process, successes deleted" "$r" p1 0 --concurrency "$TH_CONCURRENCY" --claim-batch "$TH_CLAIM_BATCH" --on-success delete
  taskhost p2del "2 processes, successes deleted" "$r" p2 2 --concurrency "$TH_CONCURRENCY" --claim-batch "$TH_CLAIM_BATCH" --on-success delete
done

# The setting, then the tables.
th_version=$( ((have_taskhost)) && "$TASKHOST" --version 2>/dev/null || echo "not built")
echo
echo "## Graphile Worker vs taskhost, $JOBS no-op jobs a run, $REPS repetitions"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, Linux $(uname -r)"
echo "- PostgreSQL $(psql "$URL" -Atc 'show server_version') (same server for both, database $DB)"
for v in "${VERSIONS[@]}"; do
  echo "- graphile-worker $v (node $("${NODE[$v]}" --version)): perfTest batching config, concurrency 24 a process"
done
echo "- taskhost: $th_version ($TASKHOST), --concurrency $TH_CONCURRENCY --claim-batch $TH_CLAIM_BATCH a process"
echo
node "$HERE/table.js" "$RESULTS"
echo
echo "Results: $RESULTS; logs: $LOG"
((STAT_STATEMENTS)) && echo "Statements: $STATEMENTS"
exit 0
