#!/bin/sh
# Builds plugins/{{name}}.wasm with componentize-js, installed with npm on first use. sdk/ is
# taskhost's JavaScript SDK.
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
# `taskhost dev` builds with TASKHOST_DEV=1: sdk/dev.js, app.js with the SDK's part that runs an edit of
# it without a build, against wit/js.wit's world; workers need neither.
entry=app.js world=task-handler
if [ "${TASKHOST_DEV:-}" = 1 ]; then entry=sdk/dev.js world=task-handler-js; fi
"$tools/node_modules/.bin/componentize-js" "$entry" --wit wit -n "$world" \
    -d random fetch-event -o plugins/{{name}}.wasm
echo "built plugins/{{name}}.wasm"
