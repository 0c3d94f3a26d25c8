#!/bin/bash
# Attribution graphs on a GPT-2-small-shaped random model (12 layers, d 768) with 12 random JumpReLU transcoders
# of 24 576 features (bench/make_graph_fixture.py; written once to $FIX, 2.2 GB, never committed):
#   for each prompt length: vocablens graph's --dry-run estimate, then the run under /usr/bin/time -v (peak RSS,
#   CPU seconds; with the baseline, --save-adjacency too), then the circuit-tracer-style autograd baseline (bench/graph_autograd_baseline.py) on the same
#   model, transcoders, prompt, logits and selected features, its rows checked against vocablens's to 1e-4 of the
#   largest entry, under /usr/bin/time -v too; the ratios printed.
#   bench/run_graph_bench.sh [COPIES...]      prompt = COPIES copies of a 18-token sentence, BOS first (default 7 14)
# Environment: FIX (fixture folder, default /tmp/graphbench/gpt2s), KIND (the fixture's shape when it has to be
# written: gpt2, or gemma2 for the Gemma-2-2B shape, 9.1 GB in bfloat16; default gpt2), FEATURES
# (--max-feature-nodes, default 256), BATCH (64), BASELINE=0 to skip the baseline (the long prompts and the
# Gemma-2 shape), VOCABLENS (default build/vocablens).
set -euo pipefail
cd "$(dirname "$0")/.."
FIX=${FIX:-/tmp/graphbench/gpt2s}
FEATURES=${FEATURES:-256}
BATCH=${BATCH:-64}
VL=${VOCABLENS:-build/vocablens}
[ -f "$FIX/model/config.json" ] || /usr/bin/python3 bench/make_graph_fixture.py "${KIND:-gpt2}" "$FIX"
# OpenBLAS's kernels for this CPU and OpenMP's idle threads asleep, on both sides (the CLI re-executes itself with
# them when they are missing, loading everything twice; torch links its own BLAS)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
field() { grep -E "$1" "$2" | sed -E 's/.*: //'; }
cpu_of() { echo "$(field 'User time' "$1") + $(field 'System time' "$1")" | bc; }
for n in "${@:-7 14}"; do
  P=$(for _ in $(seq "$n"); do printf "The Eiffel Tower is in Paris and the Colosseum is in Rome. "; done); P="${P% }"
  out=$(mktemp -d /tmp/graphbench-run.XXXXXX)
  est=$("$VL" graph "$FIX/model" --transcoders "$FIX/transcoders" --prompt "$P" --max-feature-nodes "$FEATURES" \
        --batch-size "$BATCH" --dry-run | grep -E '^  total' | awk '{print $2}')
  # the baseline checks every row against vocablens's unpruned [N, N] adjacency (--save-adjacency: N² floats
  # more, 2.8 GB at 2 035 tokens); without the baseline it is not asked for
  save=(); [ "${BASELINE:-1}" != 0 ] && save=(--save-adjacency)
  /usr/bin/time -v "$VL" graph "$FIX/model" --transcoders "$FIX/transcoders" --prompt "$P" --max-feature-nodes "$FEATURES" \
      --batch-size "$BATCH" "${save[@]}" --out "$out/run" --format json > "$out/result.json" 2> "$out/vl.time"
  vl_kb=$(field 'Maximum resident' "$out/vl.time"); vl_cpu=$(cpu_of "$out/vl.time")
  read -r T A < <(/usr/bin/python3 -c "import json; s=json.load(open('$out/run/graph.json')); s=s.get('summary', s); print(s['n_pos'], s['n_active'])")
  echo "T=$T active=$A features with rows=$FEATURES: vocablens peak $((vl_kb / 1024)) MiB, dry-run estimate $est MiB" \
       "(estimate/peak $(echo "scale=3; $est * 1024 / $vl_kb" | bc)), CPU $vl_cpu s, wall $(field 'Elapsed' "$out/vl.time")"
  if [ "${BASELINE:-1}" != 0 ]; then
    /usr/bin/time -v /usr/bin/python3 bench/graph_autograd_baseline.py "$FIX/model" "$FIX/transcoders" "$out/run" "$BATCH" \
        > "$out/base.out" 2> "$out/base.time" || { cat "$out/base.out" "$out/base.time"; exit 1; }
    cat "$out/base.out"
    b_kb=$(field 'Maximum resident' "$out/base.time"); b_cpu=$(cpu_of "$out/base.time")
    echo "  autograd baseline: peak $((b_kb / 1024)) MiB, CPU $b_cpu s;" \
         "baseline/vocablens: CPU $(echo "scale=2; $b_cpu / $vl_cpu" | bc)x, peak RSS $(echo "scale=2; $b_kb / $vl_kb" | bc)x"
  fi
  rm -rf "$out"
done
