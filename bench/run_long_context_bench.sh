#!/bin/bash
# Long-context bench: `vocablens lens` peak RSS and CPU seconds at T = 2048 / 4096 / 8192 (and longer with
# LONG_TS) on a Llama-shaped F32 GGUF (D 2048, 4 layers, 16 heads, FF 5632, V 32000, context 32768; random
# weights written by bench/make_7b.py), blocked attention (the default) against the materialising path
# (VOCABLENS_ATTENTION=materialize) side by side in one run. Not part of CI.
#
#   bench/run_long_context_bench.sh [BUILD_DIR] [DATA_DIR]        defaults: build, /work/bench-data
#   TS="2048 4096 8192"   lengths run both ways (TS="" none)   OLD_MAX=8192   longest T run the materialising way
#   LONG_TS="32768"       lengths run blocked only   VOCABLENS_THREADS=2
#
# Per run: peak RSS (GNU time's %M), user + system CPU seconds and wall seconds of the whole command, and the
# forward's own CPU and wall seconds from `--timings` (the lens's projections are the rest); per token = / T.
# Generated data stays out of git (DATA_DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
data=${2:-/work/bench-data}
cli=$build/vocablens
TS=${TS-"2048 4096 8192"}
OLD_MAX=${OLD_MAX:-8192}
LONG_TS=${LONG_TS-}
export VOCABLENS_THREADS=${VOCABLENS_THREADS:-2}
[ -x "$cli" ] || { echo "run_long_context_bench.sh: $cli not found (ninja -C $build vocablens_cli)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "run_long_context_bench.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
mkdir -p "$data"
model=$data/long-f32.gguf
if [ ! -e "$model" ]; then
  echo "writing $model (1.3 GB) ..." >&2
  D=2048 L=4 H=16 FF=5632 V=32000 CTX=32768 /usr/bin/python3 "$here/bench/make_7b.py" gguf "$model" f32
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Random ids (fixed seed per T), as comma-separated groups of 2048: one shell word each stays far below
# the kernel's 128 KiB limit on a single argument at any T.
ids() {
  /usr/bin/python3 -c "
import random, sys
T = int(sys.argv[1]); r = random.Random(T)
v = [str(r.randrange(3, 32000)) for _ in range(T)]
print(' '.join(','.join(v[i:i + 2048]) for i in range(0, T, 2048)))" "$1"
}

run() {  # T MODE
  local T=$1 mode=$2 env=()
  [ "$mode" = materialize ] && env=(VOCABLENS_ATTENTION=materialize)
  # shellcheck disable=SC2046
  if ! env "${env[@]}" /usr/bin/time -f "%M %U %S %e" -o "$tmp/time" \
      "$cli" lens "$model" --prompt-ids $(ids "$T") --top-k 1 --format json --timings >/dev/null 2>"$tmp/err"; then
    printf "%6d  %-11s  failed: %s\n" "$T" "$mode" "$(grep -v '^ ' "$tmp/err" | head -1)"
    return
  fi
  read -r kb user sys wall <"$tmp/time"
  local fwd fwd_wall
  fwd=$(awk '$1 == "forward" { print $3 }' "$tmp/err")
  fwd_wall=$(awk '$1 == "forward" { print $2 }' "$tmp/err")
  awk -v T="$T" -v m="$mode" -v kb="$kb" -v u="$user" -v s="$sys" -v w="$wall" -v f="$fwd" -v fw="$fwd_wall" 'BEGIN {
    printf "%6d  %-11s  %7.2f GB  %8.1f s  %7.2f s  %6.1f ms  %8.1f s  %6.2f ms  %8.1f s\n", T, m, kb / 1048576, u + s, w,
           1000 * (u + s) / T, f, 1000 * f / T, fw }'
}

echo "# $(date -u +%FT%TZ) $(uname -n), $VOCABLENS_THREADS threads, $("$cli" --version 2>/dev/null | head -1)"
echo "# model $model"
printf "%6s  %-11s  %10s  %10s  %9s  %9s  %10s  %9s  %10s\n" T attention "peak RSS" "CPU" "wall" "CPU/tok" "fwd CPU" "fwd/tok" "fwd wall"
for T in $TS; do
  run "$T" blocked
  [ "$T" -le "$OLD_MAX" ] && run "$T" materialize
done
for T in $LONG_TS; do run "$T" blocked; done
