#!/usr/bin/env bash
# setup_llama_ref.sh — llama.cpp as the independent reference of the tests, in ONE cache directory: the release
# of npm node-llama-cpp@3.22.1 (full source from its git bundle: headers, gguf-py/, convert_hf_to_gguf.py,
# models/ggml-vocab-*.gguf with .inp/.out test vectors) and the prebuilt libraries of the same release from npm
# @node-llama-cpp/linux-x64@3.22.1, plus our small reference program tests/llama_ref/lcpp_logits.cpp compiled
# against them. Nothing goes into the source tree; nothing of llama.cpp is built from source.
#
#   scripts/setup_llama_ref.sh [DIR]   # DIR: $VOCABLENS_LLAMA_REF, else ~/.cache/vocablens/llama-cpp-3.22.1
#
# Result:
#   DIR/llama.cpp/            source tree (tests/tokenizer_refs, tests/wordpiece_crosscheck, fixture generators)
#   DIR/bins/linux-x64/       libllama*.so, libggml*.so, libggml-base.so (CPU backends are dlopen'd from here;
#                             tests/gguf_quants_test.cpp dequantizes with libggml-base.so)
#   DIR/bin/lcpp_logits       lcpp_logits BINS_DIR MODEL.gguf IDS.txt OUT.f32 [LAYERS.f32] (tests/families_test.cpp)
# The tests look in the same place ($VOCABLENS_LLAMA_REF, else the default) and FAIL when it is missing.
# Idempotent: a complete DIR is reused; lcpp_logits is rebuilt when its source is newer. Called by setup.sh.
# Needs npm, git, g++ (setup.sh installs them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${VOCABLENS_LLAMA_REF:-$HOME/.cache/vocablens/llama-cpp-3.22.1}}
complete() {
  [ -f "$dir/llama.cpp/include/llama.h" ] && [ -d "$dir/llama.cpp/gguf-py" ] &&
    [ -f "$dir/llama.cpp/models/ggml-vocab-bert-bge.gguf" ] &&
    [ -e "$dir/bins/linux-x64/libllama.so" ] && [ -e "$dir/bins/linux-x64/libggml-base.so" ]
}
if ! complete; then
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "setup_llama_ref: npm pack node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 (about 46 MB) into $dir"
  ( cd "$tmp" && npm pack --silent node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >/dev/null )
  mkdir -p "$tmp/nlc" "$tmp/lx"
  tar xzf "$tmp/node-llama-cpp-3.22.1.tgz" -C "$tmp/nlc" package/llama/gitRelease.bundle
  tar xzf "$tmp/node-llama-cpp-linux-x64-3.22.1.tgz" -C "$tmp/lx"
  rm -rf "$dir/llama.cpp" "$dir/bins"
  git -c advice.detachedHead=false clone -q "$tmp/nlc/package/llama/gitRelease.bundle" "$dir/llama.cpp"
  mkdir -p "$dir/bins"
  mv "$tmp/lx/package/bins/linux-x64" "$dir/bins/linux-x64"
  b="$dir/bins/linux-x64"
  for lib in llama ggml; do  # the package ships versioned names only; the linker wants the plain ones too
    [ -e "$b/lib$lib.so" ] || ln -s "$(cd "$b" && ls lib$lib.v*.so | head -1)" "$b/lib$lib.so"
  done
  complete || { echo "setup_llama_ref: $dir is incomplete after unpacking (llama.h, gguf-py, libllama.so, libggml-base.so)" >&2; exit 1; }
fi
src="$root/tests/llama_ref/lcpp_logits.cpp"
out="$dir/bin/lcpp_logits"
if [ ! -x "$out" ] || [ "$src" -nt "$out" ]; then
  mkdir -p "$dir/bin"
  L="$dir/llama.cpp"
  B="$dir/bins/linux-x64"
  g++ -O2 -std=c++17 "$src" -I"$L/include" -I"$L/ggml/include" -L"$B" -lllama -lggml -lggml-base \
    -Wl,-rpath,"$B" -o "$out.tmp"
  mv "$out.tmp" "$out"
fi
echo "setup_llama_ref: llama.cpp $(git -C "$dir/llama.cpp" rev-parse --short HEAD 2>/dev/null || echo '?') in $dir; $out"
