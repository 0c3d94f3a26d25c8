#!/usr/bin/env bash
# Scaling of the corpus lens and of tuned-lens training from 1 process to 2 MPI ranks (docs/benchmarks.md,
# "Tuned lens and MPI"). Each rank runs one LibTorch thread (VOCABLENS_THREADS=1), so 1 -> 2 ranks is 1 -> 2
# cores; best of 3 wall-clock runs each; prints the ratio against the one-process baseline of the same script.
#   bench/run_tuned_lens_mpi_bench.sh [BUILD_DIR] [FIXTURES]
set -euo pipefail
BUILD=${1:-build}; F=${2:-../shared/fixtures}
B=$BUILD/vocablens; S=$F/stories260K/stories260K.bin; G=$F/gpt2-tiny
D=$BUILD/bench-tuned; mkdir -p "$D"
export VOCABLENS_THREADS=1 OMP_NUM_THREADS=1
MPI=(mpirun -np 2 --oversubscribe --bind-to none); [ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
[ -s "$D/corpus.txt" ] || "$B" tuned-lens sample "$S" --tokens 24000 --seed 5 --max-len 64 --out "$D/corpus.txt"
best() {  # best of 3 wall-clock seconds of "$@"
  local b=999999 t0 t1 s
  for _ in 1 2 3; do
    t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N)
    s=$(echo "$t1 - $t0" | bc -l); b=$(echo "if ($s < $b) $s else $b" | bc -l)
  done
  printf '%.2f' "$b"
}
row() {  # name, command...
  local name=$1; shift
  local one two
  one=$(best "$@"); two=$(best "${MPI[@]}" "$@")
  printf '%-44s %8s s %8s s   %.2fx\n' "$name" "$one" "$two" "$(echo "$one / $two" | bc -l)"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); corpus $(wc -c < "$D/corpus.txt") bytes"
printf '%-44s %10s %10s   %s\n' "work" "1 process" "2 ranks" "speed-up"
row "lens --corpus stories260K (window 64)" "$B" lens "$S" --corpus "$D/corpus.txt" --window 64 --format json
row "lens --corpus gpt2-tiny (window 128)" "$B" lens "$G" --corpus "$D/corpus.txt" --window 128 --format json
row "tuned-lens train stories260K (20 x 4096 tok)" "$B" tuned-lens train "$S" --corpus "$D/corpus.txt" --out "$D/lens" \
    --window 64 --tokens-per-step 4096 --steps 20 --quiet
row "tuned-lens train gpt2-tiny (10 x 2048 tok)" "$B" tuned-lens train "$G" --corpus "$D/corpus.txt" --out "$D/lens-gpt" \
    --window 128 --tokens-per-step 2048 --steps 10 --quiet
