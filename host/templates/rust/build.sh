#!/bin/sh
# Builds plugins/{{name}}.wasm with cargo (the wasm32-wasip2 target is added when missing).
set -e
cd "$(dirname "$0")"
rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
cargo build --target wasm32-wasip2 --release
mkdir -p plugins
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{crate}}.wasm" plugins/{{name}}.wasm
echo "built plugins/{{name}}.wasm"
