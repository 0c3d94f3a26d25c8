#!/usr/bin/env bash
# `vocablens lens --dry-run`'s estimate against the measured peak memory, for one or more builds back to back.
#   bench/dry_run_vs_peak.sh BUILD [BUILD...]        (env: SPEED_DIR, LONG_F32, THREADS=2)
# Models: $SPEED_DIR/{bf16,q4_k,q8_0}.gguf (bench/make_7b.py, see docs/benchmarks.md "Speed against
# llama.cpp") and $LONG_F32 (the F32 long-context file, "Long context"). The peak is the largest Rss of
# /proc/PID/smaps_rollup sampled every 10 ms (anonymous and file pages: mapped weights count once touched).
# Not CI.
set -euo pipefail
speed="${SPEED_DIR:-/work/bench-data/speed}"
long="${LONG_F32:-/work/bench-data/long-f32.gguf}"
one() {  # BIN MODEL T [lens options...]
  local bin=$1 m=$2 t=$3; shift 3
  local ids out best=0 line="" s r p
  ids=$(/usr/bin/python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1, 500)) for _ in range($t)))")
  est=$("$bin" lens "$m" --prompt-ids "$ids" --top-k 5 --dry-run "$@" 2>&1 | awk '/^  total/ {print $2}')
  out=$(mktemp -d)
  VOCABLENS_THREADS="${THREADS:-2}" "$bin" lens "$m" --prompt-ids "$ids" --top-k 5 --out "$out/r" "$@" >/dev/null 2>&1 &
  p=$!
  while kill -0 $p 2>/dev/null; do
    s=$(awk '/^(Rss|Anonymous|Pss_File):/ {printf "%s %d ", $1, $2 / 1024}' /proc/$p/smaps_rollup 2>/dev/null || true)
    r=$(echo "$s" | awk '{print $2}')
    if [ -n "$r" ] && [ "$r" -gt "$best" ]; then best=$r; line=$s; fi
    sleep 0.01
  done
  wait $p || echo "(run failed: $?)"
  rm -rf "$out"
  echo "$(basename "$m") T=$t $* | estimate ${est} MiB | peak $line| ratio $(/usr/bin/python3 -c "print(round(${est:-0} / max($best, 1), 2))")"
}
for build in "$@"; do
  echo "== $build"
  b="$build/vocablens"
  one "$b" "$speed/bf16.gguf" 8; one "$b" "$speed/bf16.gguf" 1024; one "$b" "$speed/q4_k.gguf" 8
  one "$b" "$speed/q4_k.gguf" 1024 --two-pass; one "$b" "$speed/q8_0.gguf" 256
  one "$b" "$long" 8 --unembed pinv; one "$b" "$long" 1024; one "$b" "$long" 1024 --two-pass; one "$b" "$long" 4096 --two-pass
done
