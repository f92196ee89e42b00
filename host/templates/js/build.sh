#!/bin/sh
# Builds plugins/{{name}}.wasm with componentize-js, installed with npm on first use.
set -e
cd "$(dirname "$0")"
tools=${NODE_TOOLS:-.}
if [ ! -x "$tools/node_modules/.bin/componentize-js" ]; then
    npm install --silent --no-audit --no-fund --prefix "$tools" @bytecodealliance/componentize-js@0.23.0
fi
mkdir -p plugins
# -d: WASI features off; stdio stays (console.log lands in the run's logs). fetch needs http:
# requests go where the operator's network grant allows.
"$tools/node_modules/.bin/componentize-js" app.js --wit wit -n task-handler \
    -d {{js_disabled}} -o plugins/{{name}}.wasm
echo "built plugins/{{name}}.wasm"
