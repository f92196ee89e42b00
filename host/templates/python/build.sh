#!/bin/sh
# Builds plugins/{{name}}.wasm with componentize-py, installed on first use in a virtual
# environment (.venv; Debian: apt-get install python3-venv).
set -e
cd "$(dirname "$0")"
venv=${VENV:-.venv}
if [ ! -x "$venv/bin/componentize-py" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet componentize-py==0.25.1
fi
mkdir -p plugins
"$venv/bin/componentize-py" -d wit -w {{world}} componentize app -p . -o plugins/{{name}}.wasm
echo "built plugins/{{name}}.wasm"
