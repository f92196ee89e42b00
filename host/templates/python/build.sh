#!/bin/sh
# Builds plugins/{{name}}.wasm with componentize-py, installed on first use in a virtual
# environment (.venv; Debian: apt-get install python3-venv). sdk/taskhost.py is taskhost's
# Python SDK and the component's entry: it calls handle() in app.py.
set -e
cd "$(dirname "$0")"
venv=${VENV:-.venv}
if [ ! -x "$venv/bin/componentize-py" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet componentize-py==0.25.1
fi
mkdir -p plugins
"$venv/bin/componentize-py" -d wit -w task-handler-http componentize taskhost -p . -p sdk -o plugins/{{name}}.wasm
echo "built plugins/{{name}}.wasm"
