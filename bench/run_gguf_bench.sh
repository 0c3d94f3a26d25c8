#!/usr/bin/env bash
# Stored-dtype bench: a Llama-2-7B-shaped model (random weights, bench/make_7b.py) as BF16 safetensors, as F16
# sharded pytorch_model.bin (kind torchbin, not in the default list: it needs python3-torch), and as
# GGUF BF16 / Q8_0 / Q4_K; vocablens (bench_gguf: load, forward, full logit lens, peak RSS; and the real
# `vocablens lens` command under /usr/bin/time for its peak RSS) beside llama.cpp (bench/lcpp_bench.cpp
# on the prebuilt libllama of @node-llama-cpp/linux-x64@3.22.1) on the same GGUF, same threads, same
# number of prompt tokens. Not CI. Needs ~15 GB free disk at a time (each file is deleted after use).
#   bench/run_gguf_bench.sh [BUILD_DIR=build] [THREADS=2] [TOKENS=128] [KINDS="st bf16 q8_0 q4_k"]
# Env: GGUF_BENCH_DIR (work dir, default /tmp/vocablens-gguf-bench), LLAMA_CPP (headers), LLAMA_BINS,
# D/L/H/FF/V (smaller shapes for a dry run), NICE (default 10), KEEP=1 (keep the generated files; existing
# files are reused).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
threads="${2:-2}"
tokens="${3:-128}"
kinds="${4:-st bf16 q8_0 q4_k}"
work="${GGUF_BENCH_DIR:-/tmp/vocablens-gguf-bench}"
tok="${TOKENIZER:-$here/../shared/fixtures/stories260K/tok512.bin}"
. "$here/bench/lcpp_env.sh" bench_gguf vocablens_cli
# A prompt of exactly $tokens tokens is not needed for the CLI run: it reads a long text and the bench
# program times exactly $tokens tokens; the CLI run shows the real command's memory.
prompt="$(printf 'Once upon a time, there was a little girl named Lily. She liked to play in the park with her dog. %.0s' $(seq 1 6))"
run() {  # label, model path
  local label=$1 model=$2
  echo "== $label: $model"
  nice -n "$nice_level" "$build/bench_gguf" "$model" "$tokens" 1 | tee "$work/$label.json"
  nice -n "$nice_level" /usr/bin/time -f "cli_lens_peak_rss_kb %M elapsed_s %e" "$build/vocablens" lens "$model" \
      --tokenizer "$tok" --prompt "$prompt" --top-k 5 --out "$work/$label-lens" >/dev/null 2>"$work/$label-time.txt" \
      || { echo "vocablens lens failed:"; cat "$work/$label-time.txt"; }
  grep cli_lens_peak_rss_kb "$work/$label-time.txt" || true
}
for k in $kinds; do
  if [ "$k" = st ]; then
    [ -e "$work/st/model.safetensors" ] || nice -n "$nice_level" /usr/bin/python3 "$here/bench/make_7b.py" safetensors "$work/st"
    run safetensors-bf16 "$work/st"
    [ -n "${KEEP:-}" ] || rm -rf "$work/st"
  elif [ "$k" = torchbin ]; then
    [ -e "$work/tb/pytorch_model.bin.index.json" ] || nice -n "$nice_level" /usr/bin/python3 "$here/bench/make_7b.py" torchbin "$work/tb"
    run torchbin-f16 "$work/tb"
    [ -n "${KEEP:-}" ] || rm -rf "$work/tb"
  else
    [ -e "$work/$k.gguf" ] || nice -n "$nice_level" /usr/bin/python3 "$here/bench/make_7b.py" gguf "$work/$k.gguf" "$k"
    run "gguf-$k" "$work/$k.gguf"
    echo "-- llama.cpp on the same file"
    nice -n "$nice_level" /usr/bin/time -f "llama_peak_rss_kb %M" "$work/lcpp_bench" "$work/$k.gguf" "$tokens" "$threads" 2 2>&1 \
        | grep -E "^llama.cpp|peak_rss" | tee "$work/lcpp-$k.txt"
    [ -n "${KEEP:-}" ] || rm -f "$work/$k.gguf"
  fi
done
