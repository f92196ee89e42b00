#!/usr/bin/env bash
# Build every example handler from source into $TASKHOST_PLUGIN_OUT (default target/plugins).
# Components meant to be refused (wrong world) go to $TASKHOST_BAD_PLUGIN_OUT
# (default target/plugins-bad) so they never sit in a normal plugins directory.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${TASKHOST_PLUGIN_OUT:-target/plugins}
bad=${TASKHOST_BAD_PLUGIN_OUT:-target/plugins-bad}
target_dir=${CARGO_TARGET_DIR:-$root/target}

rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
cargo build --quiet --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --release --target-dir "$target_dir"

mkdir -p "$out" "$bad"
built=()
for manifest in plugins/*/Cargo.toml; do
    name=$(basename "$(dirname "$manifest")")
    wasm="$target_dir/wasm32-wasip2/release/${name//-/_}.wasm"
    dest=$out
    case $name in wrong-world|greedy-import) dest=$bad ;; esac
    # Copy then rename, so a reader never sees a half-written component.
    cp "$wasm" "$dest/.$name.wasm.tmp"
    mv "$dest/.$name.wasm.tmp" "$dest/$name.wasm"
    built+=("$name")
done
echo "built ${#built[@]} plugins into $out (and $bad): ${built[*]}"
