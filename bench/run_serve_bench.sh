#!/usr/bin/env bash
# `vocablens serve` vs in-process: the lens of a 64-token prompt on the GPT-2-small shape (docs/benchmarks.md).
#   ninja -C build vocablens_cli bench_serve && bench/run_serve_bench.sh [MODEL_DIR] [REPEATS]
# Without MODEL_DIR: random GPT-2-small weights (bench/lens_baseline.py make, 498 MB) in /tmp/vocablens-g2s,
# with gpt2-tiny's tokenizer files beside them. Both measurements in one run, on the same machine.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-/tmp/vocablens-g2s}
REPS=${2:-10}
if [ ! -f "$MODEL/model.safetensors" ]; then
  /usr/bin/python3 bench/lens_baseline.py make "$MODEL"
  cp ../shared/fixtures/gpt2-tiny/vocab.json ../shared/fixtures/gpt2-tiny/merges.txt "$MODEL/"
fi
# The kernels the CLI re-executes itself with (src/cli/blas_kernels.hpp), for the in-process run too.
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$(grep -qw avx512f /proc/cpuinfo && echo SkylakeX || echo Haswell)}
echo "in-process: $(./build/bench_serve "$MODEL" "$REPS" 64)"
echo "API:        $(/usr/bin/python3 bench/serve_bench.py ./build/vocablens "$MODEL" "$REPS" 64)"
