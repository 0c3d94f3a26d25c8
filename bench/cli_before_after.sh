#!/usr/bin/env bash
# Two vocablens binaries back to back on the same commands, alternating, 2 threads: wall, user and system seconds
# per run (on a shared machine the same-run ratio is what to trust).
#   bench/cli_before_after.sh OLD_BIN NEW_BIN [ROUNDS=2]      (env: MODEL, TOKENIZER, TINY, THREADS=2)
# Defaults: MODEL the GPT-2-small-shaped directory bench/run_lens_bench.sh writes (LENS_BENCH_DIR/model),
# TOKENIZER and TINY ../shared/fixtures/gpt2-tiny. Commands: the lens of 512 random ids, spectrum --k 128 of W_E,
# knn --k 10 of gpt2-tiny's W_E. Not CI.
set -euo pipefail
old=$1 new=$2 rounds=${3:-2}
here="$(cd "$(dirname "$0")/.." && pwd)"
model="${MODEL:-/work/bench-data/lens/model}"
tiny="${TINY:-$here/../shared/fixtures/gpt2-tiny}"
tok="${TOKENIZER:-$tiny}"
ids=$(/usr/bin/python3 -c "import random; random.seed(2); print(','.join(str(random.randrange(1, 50000)) for _ in range(512)))")
out=$(mktemp -d)
for r in $(seq "$rounds"); do
  for b in "$old" "$new"; do
    for cmd in "lens $model --tokenizer $tok --prompt-ids $ids --top-k 5" "spectrum $model --k 128" "knn $tiny --k 10"; do
      rm -rf "$out/o"
      # shellcheck disable=SC2086
      /usr/bin/time -f "%e %U %S" -o "$out/t" env VOCABLENS_THREADS="${THREADS:-2}" "$b" $cmd --out "$out/o" >/dev/null 2>"$out/e" ||
        { echo "failed: $b ${cmd%% *}"; tail -2 "$out/e"; }
      echo "$b ${cmd%% *} wall/user/sys $(cat "$out/t")"
    done
  done
done
rm -rf "$out"
