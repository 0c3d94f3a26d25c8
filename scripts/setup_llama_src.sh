#!/usr/bin/env bash
# Unpacks the llama.cpp SOURCE the tests read reference data from: npm node-llama-cpp@3.22.1 carries the whole
# llama.cpp tree of its release (de3ff815) as a git bundle; it is cloned into build/llama-ref/llama.cpp.
# Used by tests/wordpiece_crosscheck (models/ggml-vocab-bert-bge.gguf + .inp/.out, gguf-py). Idempotent.
# (The prebuilt libraries of the same release: scripts/setup_llama_ref.sh.)
#   scripts/setup_llama_src.sh [DEST=build/llama-ref]
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-build/llama-ref}
src="$dest/llama.cpp"
if [ -f "$src/models/ggml-vocab-bert-bge.gguf" ] && [ -d "$src/gguf-py" ]; then echo "setup_llama_src: $src present"; exit 0; fi
mkdir -p "$dest/node-llama-cpp"
( cd "$dest" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null )
tar xzf "$dest"/node-llama-cpp-3.22.1.tgz -C "$dest/node-llama-cpp" package/llama/gitRelease.bundle
rm -rf "$src"
git -c advice.detachedHead=false clone -q "$dest/node-llama-cpp/package/llama/gitRelease.bundle" "$src"
test -f "$src/models/ggml-vocab-bert-bge.gguf" || { echo "setup_llama_src: $src/models/ggml-vocab-bert-bge.gguf missing" >&2; exit 1; }
echo "setup_llama_src: llama.cpp source at $src ($(git -C "$src" rev-parse --short HEAD))"
