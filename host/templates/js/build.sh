#!/bin/sh
# Builds plugins/{{name}}.wasm with componentize-js, installed with npm on first use. sdk/ is
# taskhost's JavaScript SDK; wit/js.wit the world it is built against.
set -e
cd "$(dirname "$0")"
tools=${NODE_TOOLS:-.}
if [ ! -x "$tools/node_modules/.bin/componentize-js" ]; then
    npm install --silent --no-audit --no-fund --prefix "$tools" @bytecodealliance/componentize-js@0.23.0
fi
mkdir -p plugins
# -d: WASI random and the fetch-event export off. Stdio stays (console.log lands in the run's logs),
# clocks (setTimeout, the SDK's timeouts) and http (fetch: requests go where the operator's network
# grant allows).
"$tools/node_modules/.bin/componentize-js" app.js --wit wit -n task-handler-js \
    -d random fetch-event -o plugins/{{name}}.wasm
echo "built plugins/{{name}}.wasm"
