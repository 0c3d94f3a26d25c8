#!/usr/bin/env bash
# tokenizer_bench.sh — GPT-2 tokenization speed, single thread: vocablens vs @dqbd/tiktoken (WASM) vs
# gpt-3-encoder (JS), on the real-text corpus of the cross-check (>= 5 MiB of /usr/share/doc/*/copyright).
#
#   bench/tokenizer_bench.sh [BUILD_DIR=build-tok] [TOKENIZER=../shared/fixtures/gpt2-tiny] [REPEATS=5]
#
# Run from the repository root. Builds bench_tokenizer, installs the npm packages of
# tests/tokenizer_crosscheck if needed, then measures two inputs, each identical for every implementation:
#   1. the corpus cut into chunks of <= 1024 characters at line ends (paragraph / prompt sized);
#   2. whole documents (gpt-3-encoder left out: its encode() is quadratic in the input length).
# Prints the markdown table for docs/benchmarks.md. Other processes on the machine skew the numbers:
# run it on an idle machine; the ratios come from one run.
set -euo pipefail
build=${1:-build-tok}
tokenizer=${2:-../shared/fixtures/gpt2-tiny}
repeats=${3:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
if ! ninja -C "$build" bench_tokenizer >"$build/bench_tokenizer_build.log" 2>&1; then
  tail -20 "$build/bench_tokenizer_build.log"; exit 1
fi
node_dir=tests/tokenizer_crosscheck
if [ ! -d "$node_dir/node_modules/@dqbd/tiktoken" ]; then (cd "$node_dir" && npm ci --no-audit --no-fund); fi
export NODE_PATH="$here/$node_dir/node_modules"

work="$build/tokenizer_bench"
mkdir -p "$work"
node "$node_dir/make_corpus.js" "$work/documents.json" >&2
node bench/chunk_corpus.js "$work/documents.json" "$work/chunks.json" 1024 >&2
results="$work/results.jsonl"
: >"$results"
tag() { node -e 'const r=JSON.parse(require("fs").readFileSync(0,"utf8").trim().split("\n").pop()); r.input=process.argv[1]; console.log(JSON.stringify(r))' "$1"; }
for input in chunks documents; do
  label=$([ $input = chunks ] && echo "chunks of <= 1024 characters" || echo "whole documents")
  "$build/bench_tokenizer" "$tokenizer" "$work/$input.json" "$repeats" | tag "$label" >>"$results"
  extra=$([ $input = documents ] && echo --no-gpt3 || true)
  node bench/tokenizer_bench.js "$work/$input.json" 3 $extra | while read -r line; do echo "$line" | tag "$label"; done >>"$results"
done
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
     "node $(node --version); $(${CXX:-c++} --version | head -1)"
node bench/tokenizer_bench_report.js "$results"
