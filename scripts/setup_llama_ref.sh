#!/usr/bin/env bash
# Installs the llama.cpp reference the tests compare against: the npm package @node-llama-cpp/linux-x64@3.22.1
# (prebuilt libggml-base.so / libllama.so of llama.cpp release de3ff815), unpacked into build/llama-ref/.
# Used by tests/gguf_quants_test.cpp (dequantization bit for bit against libggml). Idempotent.
#   scripts/setup_llama_ref.sh [DEST=build/llama-ref]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-build/llama-ref}
bins="$dest/linux-x64/package/bins/linux-x64"
if [ -e "$bins/libggml-base.so" ]; then echo "setup_llama_ref: $bins present"; exit 0; fi
mkdir -p "$dest/linux-x64"
( cd "$dest" && npm pack --silent @node-llama-cpp/linux-x64@3.22.1 >/dev/null )
tar xzf "$dest"/node-llama-cpp-linux-x64-3.22.1.tgz -C "$dest/linux-x64"
test -e "$bins/libggml-base.so" || { echo "setup_llama_ref: $bins/libggml-base.so missing after unpacking" >&2; exit 1; }
echo "setup_llama_ref: installed $bins"
