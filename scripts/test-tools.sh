#!/usr/bin/env bash
# What the tests drive besides the project's own programs, installed once under target/tools
# (and Debian's Chromium system-wide). Idempotent.
#
#   schemathesis (PyPI)      checks the live API against its OpenAPI document (tests/it/openapi.rs)
#   chromium (Debian)        a real browser for the dashboard's tests (tests/it/dashboard.rs)
#   playwright-core (npm)    drives it; it downloads no browser of its own
#   mypy (PyPI), typescript (npm)  type-check the clients and their types (tests/it/clients.rs)
#   vermin (PyPI)            the Python client's oldest Python, from what it uses (tests/it/clients.rs)
set -euo pipefail

SCHEMATHESIS=schemathesis==4.32.5
PLAYWRIGHT=playwright-core@1.64.1
MYPY=mypy==2.4.1
VERMIN=vermin==1.6.0
TYPESCRIPT=typescript@5.9.3
tools=target/tools

if [ ! -x "$tools/st/bin/st" ]; then
    python3 -m venv "$tools/st"
    "$tools/st/bin/pip" install --quiet --disable-pip-version-check "$SCHEMATHESIS"
fi

if [ ! -x "$tools/st/bin/mypy" ]; then
    "$tools/st/bin/pip" install --quiet --disable-pip-version-check "$MYPY"
fi

if [ ! -x "$tools/st/bin/vermin" ]; then
    "$tools/st/bin/pip" install --quiet --disable-pip-version-check "$VERMIN"
fi

if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get install -y -q chromium >/dev/null 2>&1 \
        || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; }
fi

if [ ! -f "$tools/browser/node_modules/playwright-core/package.json" ]; then
    mkdir -p "$tools/browser"
    (cd "$tools/browser" && { [ -f package.json ] || echo '{"private": true}' > package.json; } \
        && npm install --silent --no-audit --no-fund "$PLAYWRIGHT")
fi

if [ ! -f "$tools/browser/node_modules/typescript/package.json" ]; then
    (cd "$tools/browser" && npm install --silent --no-audit --no-fund "$TYPESCRIPT")
fi
