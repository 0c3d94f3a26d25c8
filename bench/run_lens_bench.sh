#!/usr/bin/env bash
# Logit-lens benchmark: vocablens (bench/bench_lens.cpp) against the same computation written as
# TransformerLens does it in PyTorch (bench/lens_baseline.py), same machine, same thread count.
#
#   bench/run_lens_bench.sh [BUILD_DIR] [THREADS] [REPEAT]
#
# BUILD_DIR defaults to build-lens (the bench target is built there if needed); THREADS to all cores.
# Needs /usr/bin/python3 with numpy and torch (Debian python3-numpy, python3-torch).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build-lens}"
threads="${2:-$(nproc)}"
repeat="${3:-3}"
work="${LENS_BENCH_DIR:-${TMPDIR:-/tmp}/vocablens-lens-bench}"
py=/usr/bin/python3

if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" --target bench_lens -j "$threads" >/dev/null

# Debian's OpenBLAS 0.3.21 does not recognise recent Xeons (e.g. family 6 model 207) and falls back to its
# Prescott (SSE3) kernels, 2-3x slower. LENS_BENCH_CORETYPE: auto (default: pick SkylakeX / Haswell when
# OpenBLAS says Prescott on an AVX-512 / AVX2 CPU), none (leave OpenBLAS alone), or a core name. Whatever
# is chosen applies to both sides.
coretype="${LENS_BENCH_CORETYPE:-auto}"
if [ "$coretype" = auto ]; then
  coretype=
  detected="$(OPENBLAS_VERBOSE=2 "$py" -c 'import torch; torch.mm(torch.ones(64, 64), torch.ones(64, 64))' 2>&1 \
              | sed -n 's/^Core: //p' | head -1)"
  if [ "$detected" = Prescott ]; then
    if grep -qw avx512f /proc/cpuinfo; then coretype=SkylakeX; elif grep -qw avx2 /proc/cpuinfo; then coretype=Haswell; fi
  fi
fi
if [ -n "$coretype" ] && [ "$coretype" != none ]; then
  export OPENBLAS_CORETYPE="$coretype"
  echo "OPENBLAS_CORETYPE=$coretype for both sides" >&2
fi

if [ ! -f "$work/model/model.safetensors" ] || [ ! -f "$work/model/ids.npy" ]; then
  "$py" "$here/bench/lens_baseline.py" make "$work/model" --tokens 1024
fi
mkdir -p "$work/out"

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "== vocablens (threads $threads)" >&2
"$build/bench_lens" "$work/model" --threads "$threads" --repeat "$repeat" --out "$work/out" | tee "$work/vocablens.json"
echo "== PyTorch, TransformerLens style (threads $threads)" >&2
"$py" "$here/bench/lens_baseline.py" run "$work/model" --threads "$threads" --repeat "$repeat" --out "$work/out" \
  | tee "$work/baseline.json"

load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
"$py" - "$work" "$load_before" "$load_after" <<'PY'
import json, sys, os
import numpy as np
w = sys.argv[1]
v = json.load(open(os.path.join(w, "vocablens.json")))
b = json.load(open(os.path.join(w, "baseline.json")))
o = os.path.join(w, "out")
ent = np.abs(np.load(f"{o}/vocablens_entropy.npy") - np.load(f"{o}/baseline_entropy.npy")).max()
kv, kb = np.load(f"{o}/vocablens_kl.npy"), np.load(f"{o}/baseline_kl.npy")
kl = (np.abs(kv - kb) / np.maximum(1.0, np.abs(kb))).max()  # the embedding layer's KL is ~70 nats
tp = np.abs(np.load(f"{o}/vocablens_top_p.npy") - np.load(f"{o}/baseline_top_p.npy")).max()
ids_eq = (np.load(f"{o}/vocablens_top_ids.npy") == np.load(f"{o}/baseline_top_ids.npy")).mean()
print()
print(f"threads                      {v['threads']} (baseline {b['threads']}); OpenBLAS kernels {v['blas_core']} "
      f"(baseline {b['blas_core']})")
print(f"lens only (13 x 1024 x V)    vocablens {v['lens_s']:.2f} s   baseline {b['lens_s']:.2f} s   "
      f"speed-up {b['lens_s'] / v['lens_s']:.2f}x")
print(f"forward + lens               vocablens {v['total_s']:.2f} s   baseline {b['total_s']:.2f} s   "
      f"speed-up {b['total_s'] / v['total_s']:.2f}x")
print(f"forward (wall)                vocablens {v['forward_and_norm_s']:.2f} s (forward alone {v['forward_s']:.2f} s)   "
      f"baseline {b['forward_s']:.2f} s   speed-up {b['forward_s'] / v['forward_and_norm_s']:.2f}x")
# CPU seconds of each process (all threads): the steadier measure on a shared machine.
print(f"CPU s, lens                  vocablens {v['cpu_lens_s']:.2f}   baseline {b['cpu_lens_s']:.2f}   "
      f"ratio {b['cpu_lens_s'] / v['cpu_lens_s']:.2f}x")
print(f"CPU s, forward               vocablens {v['cpu_forward_and_norm_s']:.2f} (forward alone {v['cpu_forward_s']:.2f})   "
      f"baseline {b['cpu_forward_s']:.2f}   ratio {b['cpu_forward_s'] / v['cpu_forward_and_norm_s']:.2f}x")
print(f"CPU s, forward + lens        vocablens {v['cpu_total_s']:.2f}   baseline {b['cpu_total_s']:.2f}   "
      f"ratio {b['cpu_total_s'] / v['cpu_total_s']:.2f}x")
print(f"load average                 before {sys.argv[2]}, after {sys.argv[3]}")
print(f"unembedding rate             lens {v['lens_gflops']:.1f} GFLOP/s (GEMM phase {v['lens_gemm_gflops']:.1f}), "
      f"machine GEMM {v['machine_gemm_gflops']:.1f} GFLOP/s -> {100 * v['lens_fraction_of_machine_gemm']:.0f}%")
print(f"paired with plain at::mm     same rows and blocks right after each lens run: "
      f"{v['paired_plain_mm_gflops']:.1f} GFLOP/s; lens / plain mm (best pair) {100 * v['paired_fraction_best']:.0f}%")
print(f"  lens split                 GEMM {v['lens_gemm_s']:.2f} s, fused row passes {v['lens_stats_s']:.2f} s")
print(f"peak RSS                     vocablens {v['peak_rss_mb']:.0f} MB   baseline {b['peak_rss_mb']:.0f} MB")
print(f"agreement                    max |entropy diff| {ent:.2e}, max |KL diff|/max(1, KL) {kl:.2e}, "
      f"max |top-10 prob diff| {tp:.2e}, top-10 ids equal {100 * ids_eq:.2f}%")
PY
