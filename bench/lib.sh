# What the serve benchmarks (wait.sh, events.sh) share; sourced, from the repository's root.
#
#   bench_setup NAME [DATABASE_URL]   a scratch directory ($dir, removed at exit with every background job),
#                                     the database ($url: DATABASE_URL, or a new SQLite file NAME.db there),
#                                     migrated, the noop test plugin in $dir/plugins, `th` to run taskhost on
#                                     them, and a free-looking port ($port)
#   wait_up PID URL LOG               wait until the server PID answers URL's health route; its LOG and exit if
#                                     it ended first
bin=${TASKHOST_BIN:-target/release/taskhost}

bench_setup() {
  dir=$(mktemp -d)
  trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
  url=${2:-sqlite://$dir/$1.db}
  mkdir -p "$dir/plugins"
  cp target/test-plugins/noop.wasm "$dir/plugins/"
  th migrate > /dev/null
  port=$((20000 + RANDOM % 20000))
}

th() { "$bin" --database-url "$url" --plugins "$dir/plugins" "$@"; }

wait_up() {
  until curl -sf "$2/api/v1/health" > /dev/null; do
    kill -0 "$1" || { cat "$3"; exit 1; }
    sleep 0.1
  done
}
