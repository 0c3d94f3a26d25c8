#!/usr/bin/env bash
# Embedding-geometry benchmark (docs/benchmarks.md, "Embedding geometry"), GPT-2-small shape:
# random E 50257 x 768 (seed 1234).
#   1. vocablens top-64 singular values (Gram + Spectra)   vs torch.linalg.svd / svdvals (float32)
#   2. vocablens exact k-NN graph, k = 10                   vs FAISS IndexFlatIP on the same unit rows
#      (Debian libfaiss-dev; without it, a blocked torch.mm + topk baseline)
#   3. neighbour lists compared row by row (float64 cosines for the rows that differ)
#
#   bench/run_geometry_bench.sh [BUILD_DIR] [OUT_DIR]
# Environment: THREADS (default: nproc) for every program; BENCH_ARGS extra flags for bench_geometry
# (e.g. "--lanczos", "--rows 20000", "--no-knn"); SVD_ARGS for the svd baseline ("--no-f64" skips the
# float64 accuracy reference); NO_SVD=1 skips the svd baseline (with BENCH_ARGS=--no-spectrum: k-NN
# only); NO_KNN=1 stops after the spectrum; TORCH_KNN=1 also runs the torch k-NN baseline.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
OUT=${2:-/tmp/vocablens-geometry-bench}
THREADS=${THREADS:-$(getconf _NPROCESSORS_ONLN)}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
mkdir -p "$OUT"
export OMP_NUM_THREADS=$THREADS VOCABLENS_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS

echo "== machine: $(getconf _NPROCESSORS_ONLN) cores, load $(cut -d' ' -f1-3 /proc/loadavg), threads $THREADS"
# OpenBLAS picks its kernels at load time; on some VMs it falls back to Prescott (SSE3) unless
# OPENBLAS_CORETYPE is set (see docs/benchmarks.md). Whatever it picks applies to every program below.
echo "== OpenBLAS core (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-<unset>}): $(OPENBLAS_VERBOSE=2 "$PY" -c 'import numpy; numpy.ones((64, 64)) @ numpy.ones((64, 64))' 2>&1 | tr '\n' ' ')"
cmake --build "$BUILD" --target bench_geometry >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }

echo "== vocablens (bench_geometry)"
# shellcheck disable=SC2086
"$BUILD/bench_geometry" --out "$OUT" ${BENCH_ARGS:-} | tee "$OUT/vocablens.json"

if [ "${NO_SVD:-0}" != 1 ]; then
  echo "== torch.linalg.svd baseline"
  # shellcheck disable=SC2086
  "$PY" "$ROOT/bench/geometry_baseline.py" svd "$OUT" --threads "$THREADS" ${SVD_ARGS:-} | tee "$OUT/torch_svd.json"
fi

if [ "${NO_KNN:-0}" = 1 ]; then
  echo "== k-NN skipped (NO_KNN=1)"
  exit 0
fi
if [ -f /usr/include/faiss/IndexFlat.h ] && { [ -f /usr/lib/x86_64-linux-gnu/libfaiss.a ] || ldconfig -p | grep -q libfaiss; }; then
  echo "== FAISS IndexFlatIP baseline"
  g++ -O3 -std=c++17 -fopenmp "$ROOT/bench/faiss_knn.cpp" -o "$OUT/faiss_knn" \
    -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lfaiss -lblas -llapack
  "$OUT/faiss_knn" "$OUT/U.npy" 10 "$OUT/faiss_indices.npy" | tee "$OUT/faiss.json"
else
  echo "== libfaiss-dev is not installed (apt-get install libfaiss-dev): torch k-NN baseline instead"
  TORCH_KNN=1
fi
if [ "${TORCH_KNN:-0}" = 1 ]; then
  "$PY" "$ROOT/bench/geometry_baseline.py" knn-torch "$OUT" --threads "$THREADS" | tee "$OUT/torch_knn.json"
fi

echo "== neighbour lists: vocablens vs baselines"
"$PY" "$ROOT/bench/geometry_baseline.py" compare "$OUT" | tee "$OUT/compare.json"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
