#!/usr/bin/env bash
# fetch_llama_ref.sh — installs llama.cpp (release of npm node-llama-cpp@3.22.1) as an independent reference for
# the tests: the prebuilt libraries of @node-llama-cpp/linux-x64@3.22.1 and the full source (headers, gguf-py,
# models/ggml-vocab-*.gguf) from node-llama-cpp's git bundle. Nothing is built; nothing goes into the source tree.
#
#   scripts/fetch_llama_ref.sh [DIR]     # DIR: $VOCABLENS_LLAMA_REF, else ~/.cache/vocablens/llama-cpp-3.22.1
#
# Result: DIR/llama.cpp (git checkout of the bundle) and DIR/bins/linux-x64 (libllama.so, libggml*.so).
# Idempotent (a complete DIR is left alone). Called by scripts/setup.sh; used by tests/tokenizer_refs.
set -euo pipefail
dir=${1:-${VOCABLENS_LLAMA_REF:-$HOME/.cache/vocablens/llama-cpp-3.22.1}}
if [ -f "$dir/llama.cpp/include/llama.h" ] && [ -f "$dir/bins/linux-x64/libllama.so" ] && [ -d "$dir/llama.cpp/gguf-py" ]; then
  echo "fetch_llama_ref: $dir is complete"; exit 0
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && npm pack --silent node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >/dev/null )
mkdir -p "$tmp/nlc" "$tmp/lx"
tar xzf "$tmp/node-llama-cpp-3.22.1.tgz" -C "$tmp/nlc"
tar xzf "$tmp/node-llama-cpp-linux-x64-3.22.1.tgz" -C "$tmp/lx"
rm -rf "$dir/llama.cpp" "$dir/bins"
git -c advice.detachedHead=false clone -q "$tmp/nlc/package/llama/gitRelease.bundle" "$dir/llama.cpp"
mkdir -p "$dir/bins"
mv "$tmp/lx/package/bins/linux-x64" "$dir/bins/linux-x64"
b="$dir/bins/linux-x64"
# the package ships versioned names only for some libraries; the linker wants the plain names
for lib in llama ggml; do
  [ -e "$b/lib$lib.so" ] || ln -s "$(cd "$b" && ls lib$lib.v*.so | head -1)" "$b/lib$lib.so"
done
echo "fetch_llama_ref: llama.cpp $(git -C "$dir/llama.cpp" rev-parse --short HEAD) in $dir"
