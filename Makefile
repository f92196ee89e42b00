# taskhost — `make demo` runs the queue end to end on SQLite, `make test` runs every test.
# Both work on a fresh Debian machine with Rust, Python 3 and Node.js: they add the wasm32-wasip2
# target if it is missing, install the handler toolchains under target/tools, build the host and the
# example handlers from source; `make test` also starts PostgreSQL for the store suite.

CARGO    ?= cargo
PLUGINS  := target/plugins
DEMO_DB  := target/demo.db
TASKHOST := target/release/taskhost

.PHONY: demo dashboard test lint plugins demo-plugins build install install-check features-check bench wasm-target services test-tools clean

wasm-target:
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

plugins: wasm-target
	bash plugins/build.sh

# The handlers the demo runs (all Rust): `make demo` builds only these, without the Python,
# JavaScript and C toolchains (`make plugins` builds every example).
DEMO_HANDLERS := echo fail noop word-count
demo-plugins: wasm-target
	bash plugins/build.sh $(DEMO_HANDLERS)

build:
	$(CARGO) build --release -p taskhost

# `taskhost` on your PATH: into ~/.cargo/bin (rustup puts it on PATH), or PREFIX/bin with PREFIX=DIR.
# Uses this project's target/ so it reuses what `make build` compiled.
install:
	$(CARGO) install --locked --path host --target-dir target $(if $(PREFIX),--root $(PREFIX))

# The install route the README gives, checked by `make test`: installed, the binary runs and
# writes a handler.
install-check: build
	rm -rf target/install-check
	$(MAKE) --no-print-directory install PREFIX=target/install-check
	target/install-check/bin/taskhost --version
	target/install-check/bin/taskhost new c hello --dir target/install-check/hello >/dev/null
	test -x target/install-check/hello/build.sh

demo: demo-plugins build
	rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm $(DEMO_DB)-turn $(DEMO_DB)-waiting
	$(TASKHOST) --database-url sqlite://$(DEMO_DB) --plugins $(PLUGINS) demo

# The demo's queue in a browser: `taskhost serve` on 127.0.0.1:8080 (the dashboard at /, the API
# under /api/v1) with a worker beside it, until Ctrl-C. Runs the demo first when it has not run.
dashboard: demo-plugins build
	@test -f $(DEMO_DB) || $(MAKE) --no-print-directory demo
	$(TASKHOST) --database-url sqlite://$(DEMO_DB) --plugins $(PLUGINS) worker & worker=$$!; \
	trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(TASKHOST) --database-url sqlite://$(DEMO_DB) --plugins $(PLUGINS) serve --listen 127.0.0.1:8080

# PostgreSQL, MariaDB and MySQL for the tests (installed/started when missing; see
# scripts/test-services.sh).
services:
	bash scripts/test-services.sh

# What the tests drive besides the project's own programs (schemathesis, Chromium,
# playwright-core, mypy, TypeScript): see scripts/test-tools.sh.
test-tools:
	bash scripts/test-tools.sh

# The library's, the command's and the integration tests, then the documentation's examples. Not
# the example program: `make lint`'s clippy checks it (every target), and building it in the
# release profile here took a minute of a first `make test`. Three test threads: the tests wait on
# databases, processes and timers about half the time (`it` took 390 s at libtest's default of two
# on 2 cores, 250 s at three); one of them, the tests that stop their own servers (it/chaos/), holds
# a thread for four minutes using half a core. (At four, two tests failed once under the load: a
# lost wake-up, since fixed, and a timing assertion.)
TEST_THREADS ?= 3
# The tests that use MySQL/MariaDB run first against MariaDB (3306), then again against MySQL
# (scripts/mysql-server.sh, Debian unstable's build; about 3 minutes): the two differ in CHECKs,
# the change marker, lock errors, JSON and `taskhost_add`'s procedures. Not the chaos tests (their
# servers are their own, MariaDB on 3307).
MYSQL_URL ?= mysql://taskhost@127.0.0.1:3310/test
MYSQL_SKIP := --skip chaos::
test: plugins services test-tools install-check
	$(CARGO) test --release --workspace --lib --bins --tests -- --test-threads=$(TEST_THREADS)
	TASKHOST_TEST_MYSQL=$(MYSQL_URL) $(CARGO) test --release -p taskhost --test it -- \
		--test-threads=$(TEST_THREADS) mysql schema:: kept_runs:: $(MYSQL_SKIP)
	$(CARGO) test --release --workspace --doc

# The library builds with each database alone and without the command line, and the command
# without OTLP (cargo features): part of `make lint`, in the release profile as clippy checks, so
# the dependencies' checked metadata is made once for both.
features-check:
	for db in sqlite postgres mysql; do \
		$(CARGO) check --release --quiet -p taskhost --lib --no-default-features --features $$db || exit 1; \
	done
	$(CARGO) check --release --quiet -p taskhost --no-default-features --features cli,sqlite

# Formatting, the feature combinations, lints and the library's documentation (every public item
# documented: `#![warn(missing_docs)]`; no broken link), as CI checks them.
lint:
	$(CARGO) fmt --all -- --check
	$(MAKE) --no-print-directory features-check
	$(CARGO) clippy --release --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --release --no-deps -p taskhost --all-features

bench: plugins build
	$(CARGO) bench -p taskhost

clean:
	$(CARGO) clean
