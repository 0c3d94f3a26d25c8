#!/usr/bin/env bash
# `lens --corpus` under `--compute int8` against llama.cpp's own forward over the same windows, on a Llama-2-7B-shaped
# Q4_K GGUF with random weights (bench/make_7b.py; 3.8 GB, written once to $DIR): CPU seconds per token of the whole
# lens (the load phase left out: `--timings`) and of its forward, against llama.cpp's forward of each window
# (bench/lcpp_bench.cpp: the window's tokens in one batch, F32 KV cache). Prints the ratios. Not CI.
#   bench/run_corpus_vs_llama.sh [BUILD_DIR=build] [TOKENS=8192] [WINDOW=2048] [THREADS=1]
# Environment: DIR (default /tmp/vocablens-corpus-speed), KIND (q4_k), NICE (10), REPEAT (llama.cpp's windows, best
# of; default 2), D/L/H/FF/V for another shape.
# The corpus is ASCII text of this repository's docs; the file's tokenizer reads it as byte tokens, one per byte.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
tokens="${2:-8192}"
window="${3:-2048}"
threads="${4:-1}"
work="${DIR:-/tmp/vocablens-corpus-speed}"
kind="${KIND:-q4_k}"
. "$here/bench/lcpp_env.sh" vocablens_cli
f="$work/$kind-7b.gguf"
[ -e "$f" ] || CTX=$(( window > 4096 ? window : 4096 )) nice -n "$nice_level" /usr/bin/python3 "$here/bench/make_7b.py" gguf "$f" "$kind"
# ASCII text of at least `tokens` bytes (each byte one token of this vocabulary; no BOS is added by the lens corpus)
/usr/bin/python3 -c "import glob,sys; t=''.join(open(p,encoding='utf-8').read() for p in sorted(glob.glob(sys.argv[1]+'/docs/*.md')))
t=''.join(c for c in t if c in '\t\n' or ' ' <= c <= '~'); open(sys.argv[2],'w').write((t*4)[:int(sys.argv[3])])" \
    "$here" "$work/corpus.txt" $(( tokens + 4096 ))
windows=$(( (tokens - 1) / (window - 1) + 1 ))   # the lens's windows overlap by one token
echo "== $(uptime)"
nice -n "$nice_level" "$work/lcpp_bench" "$f" "$window" "$threads" "${REPEAT:-2}" 2>&1 | grep -E "^llama.cpp" | tee "$work/lcpp.log"
/usr/bin/time -f "time %e s wall %U user %S sys" nice -n "$nice_level" "$build/vocablens" --compute int8 lens "$f" \
    --corpus "$work/corpus.txt" --window "$window" --max-tokens "$tokens" --timings --format json \
    > "$work/lens.json" 2> "$work/lens.err" || { tail -5 "$work/lens.err"; exit 1; }
grep -E "^(load|forward|analysis|total) |^time " "$work/lens.err"
echo "== $(uptime)"
/usr/bin/python3 - "$work" "$tokens" "$window" "$windows" <<'PY'
import json, os, re, sys
work, T, W, nw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lcpp = min(float(re.search(r"cpu ([\d.]+) s", l).group(1)) for l in open(f"{work}/lcpp.log"))
ph = {}
for l in open(f"{work}/lens.err"):
    m = re.match(r"(load|forward|analysis|total)\s+([\d.]+)\s+([\d.]+)", l)
    if m: ph[m.group(1)] = float(m.group(3))
    m = re.match(r"time ([\d.]+) s wall ([\d.]+) user ([\d.]+) sys", l)
    if m: cpu = float(m.group(2)) + float(m.group(3))
lens_cpu = cpu - ph.get("load", 0.0)
per_l = lcpp / W
REP = os.environ.get("REPEAT", "2")
print(f"{T} tokens in {nw} windows of {W}: llama.cpp forward {per_l * 1e3:.1f} ms/token (CPU, best of {REP} windows); "
      f"vocablens --compute int8 lens --corpus: {lens_cpu / T * 1e3:.1f} ms/token without its load "
      f"({ph.get('load', 0):.1f} CPU-s), forward {ph.get('forward', 0) / T * 1e3:.1f} ms/token")
print(f"ratio (lens / llama.cpp forward): {lens_cpu / T / per_l:.2f}x; forward alone {ph.get('forward', 0) / T / per_l:.2f}x")
PY
