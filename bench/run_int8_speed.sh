#!/usr/bin/env bash
# `--compute int8` against llama.cpp and against the exact float32 path, side by side in one run: one forward over N
# tokens of the same GGUF (bench_gguf's forward phase; llama.cpp: bench/lcpp_bench.cpp on the prebuilt libllama of
# @node-llama-cpp/linux-x64@3.22.1, all N prompt tokens in one batch, F32 KV cache). Prints tokens per CPU second and
# the ratios vocablens / llama.cpp. Not CI.
#   bench/run_int8_speed.sh [BUILD_DIR=build] [THREADS=1] [TOKENS=128] [KINDS="q8_0 q4_k q6_k"]
# Files: $GGUF_BENCH_DIR/<kind>-L<L>.gguf (default /tmp/vocablens-int8-speed), written by bench/make_7b.py when
# missing, shape D/L/H/FF/V (default Llama-shaped D=2048 L=4 H=16 FF=5632 V=32000). Each program runs REPEAT
# times (default 3); the best run counts. CPU seconds are the measure (steady on a shared machine at 1 thread).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
threads="${2:-1}"
tokens="${3:-128}"
kinds="${4:-q8_0 q4_k q6_k}"
work="${GGUF_BENCH_DIR:-/tmp/vocablens-int8-speed}"
repeat="${REPEAT:-3}"
export D="${D:-2048}" L="${L:-4}" H="${H:-16}" FF="${FF:-5632}" V="${V:-32000}"
. "$here/bench/lcpp_env.sh" bench_gguf
log="$work/speed.log"
: > "$log"
for k in $kinds; do
  f="$work/$k-L$L.gguf"
  [ -e "$f" ] || nice -n "$nice_level" /usr/bin/python3 "$here/bench/make_7b.py" gguf "$f" "$k"
  echo "== $k $(uptime)" | tee -a "$log"
  nice -n "$nice_level" "$work/lcpp_bench" "$f" "$tokens" "$threads" "$repeat" 2>&1 | grep -E "^llama.cpp" | sed "s/^/lcpp $k /" | tee -a "$log"
  for mode in int8 float32; do
    nice -n "$nice_level" "$build/bench_gguf" "$f" "$tokens" "$repeat" --dtype "$mode" 2>/dev/null | sed "s/^/ours-$mode $k /" | tee -a "$log"
  done
done
/usr/bin/python3 - "$log" "$tokens" <<'PY'
import json, os, re, sys
log, n = sys.argv[1], int(sys.argv[2])
D, L, FF, V = (int(os.environ[k]) for k in ("D", "L", "FF", "V"))
gflop = 2.0 * (L * (4 * D * D + 3 * D * FF) + D * V) / 1e9  # per token: the weight matrices' multiply-adds
rows = {}
for line in open(log):
    m = re.match(r"lcpp (\S+) llama.cpp .*: ([\d.]+) s .* cpu ([\d.]+) s", line)
    if m:
        r = rows.setdefault(m.group(1), {})
        r["lcpp"] = min(r.get("lcpp", 1e9), float(m.group(3)))
        continue
    m = re.match(r"ours-(\S+) (\S+) (\{.*\})", line)
    if m:
        j = json.loads(m.group(3))
        rows.setdefault(m.group(2), {})[m.group(1)] = min(j["blocks_cpu_s"])
        rows[m.group(2)][m.group(1) + "_all"] = min(j["forward_cpu_s"])
gflop = 2.0 * L * (4 * D * D + 3 * D * FF) / 1e9  # per token: the blocks' weight multiply-adds
print(f"\n{n} prompt tokens, D={D} L={L} FF={FF} V={V}, 1 thread: tokens per CPU second, best of the repeats, of the")
print("blocks (vocablens: forward without logits; llama.cpp: its forward, logits of the last position only);")
print("ratio = vocablens / llama.cpp. Last column: vocablens with every position's logits (unembedding included).")
print("| weights | llama.cpp | vocablens int8 | ratio | vocablens float32 (exact) | ratio | GFLOP/s llama.cpp / int8 | int8, all logits |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for k, r in rows.items():
    if not all(x in r for x in ("lcpp", "int8", "float32")): continue
    print(f"| {k.upper()} | {n / r['lcpp']:.1f} | {n / r['int8']:.1f} | {r['lcpp'] / r['int8']:.2f} | {n / r['float32']:.1f} | "
          f"{r['lcpp'] / r['float32']:.2f} | {n * gflop / r['lcpp']:.0f} / {n * gflop / r['int8']:.0f} | {n / r['int8_all']:.1f} |")
PY
