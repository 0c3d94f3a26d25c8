#!/usr/bin/env bash
# Speed of stored-dtype weights, side by side in one run: vocablens (bench_gguf: one forward over N tokens, the full
# logit lens; float32 and bfloat16 compute) and llama.cpp (bench/lcpp_bench.cpp on the prebuilt libllama of
# @node-llama-cpp/linux-x64@3.22.1: all N prompt tokens in one batch, F32 KV cache, flash attention off) on the
# same GGUF files, same thread count, same N. Prints a table with the ratios, then each side's GFLOP/s against one
# core's measured ceilings (bench/bench_peak.cpp). Not CI.
#   bench/run_gguf_speed.sh [BUILD_DIR=build] [THREADS=1] [TOKENS=128] [KINDS="bf16 f16 q8_0 q4_k"]
# Files: $GGUF_BENCH_DIR/<kind>.gguf (default /tmp/vocablens-gguf-speed), written by bench/make_7b.py when
# missing, in the shape given by D/L/H/FF/V (default a 1B-class shape: D=2048 L=16 H=16 FF=5632 V=32000).
# Each program runs REPEAT times (default 2); the best run counts. Both wall and CPU seconds (all threads of
# the process) are reported: on a shared machine CPU seconds are the steadier measure (with THREADS=1 they
# are the single-core cost; llama.cpp's worker threads spin while waiting, so with THREADS>1 compare wall).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
threads="${2:-1}"
tokens="${3:-128}"
kinds="${4:-bf16 f16 q8_0 q4_k}"
work="${GGUF_BENCH_DIR:-/tmp/vocablens-gguf-speed}"
repeat="${REPEAT:-2}"
export D="${D:-2048}" L="${L:-16}" H="${H:-16}" FF="${FF:-5632}" V="${V:-32000}"
. "$here/bench/lcpp_env.sh" bench_gguf bench_peak
log="$work/speed.log"
: > "$log"
for k in $kinds; do
  [ -e "$work/$k.gguf" ] || nice -n "$nice_level" /usr/bin/python3 "$here/bench/make_7b.py" gguf "$work/$k.gguf" "$k"
  echo "== $k $(uptime)" | tee -a "$log"
  nice -n "$nice_level" "$work/lcpp_bench" "$work/$k.gguf" "$tokens" "$threads" "$repeat" 2>&1 | grep -E "^llama.cpp" | sed "s/^/lcpp $k /" | tee -a "$log"
  nice -n "$nice_level" "$build/bench_gguf" "$work/$k.gguf" "$tokens" "$repeat" 2>/dev/null | sed "s/^/ours-float32 $k /" | tee -a "$log"
  nice -n "$nice_level" "$build/bench_gguf" "$work/$k.gguf" "$tokens" "$repeat" --dtype bfloat16 2>/dev/null | sed "s/^/ours-bfloat16 $k /" | tee -a "$log"
done
# One core's ceilings (bench/bench_peak.cpp), for the GFLOP/s lines under the table.
nice -n "$nice_level" "$build/bench_peak" "$tokens" 2>/dev/null | sed "s/^/peak /" | tee -a "$log"
/usr/bin/python3 - "$log" "$tokens" <<'EOF'
import json, os, re, sys
log, n = sys.argv[1], int(sys.argv[2])
D, L, FF, V = (int(os.environ[k]) for k in ("D", "L", "FF", "V"))
gflop = 2.0 * (L * (4 * D * D + 3 * D * FF) + D * V) / 1e9  # per token: the weight matrices' multiply-adds
rows, peak = {}, None
for line in open(log):
    m = re.match(r"lcpp (\S+) llama.cpp .*: ([\d.]+) s .* cpu ([\d.]+) s", line)
    if m:
        r = rows.setdefault(m.group(1), {})
        r["lcpp_wall"] = min(r.get("lcpp_wall", 1e9), float(m.group(2)))
        r["lcpp_cpu"] = min(r.get("lcpp_cpu", 1e9), float(m.group(3)))
        continue
    if line.startswith("peak "):
        peak = json.loads(line[5:])
        continue
    m = re.match(r"ours-(\S+) (\S+) (\{.*\})", line)
    if m:
        j, r = json.loads(m.group(3)), rows.setdefault(m.group(2), {})
        r[m.group(1)] = {"fw": min(j["forward_s"]), "fc": min(j["forward_cpu_s"]), "lw": min(j["lens_s"]), "lc": min(j["lens_cpu_s"])}
print(f"\n{n} prompt tokens, best of the repeats: tokens per wall second (tokens per CPU second); ratio = vocablens / llama.cpp;")
print("lens / forward = CPU seconds of the full logit lens (its forward included) over those of one forward")
print("| weights | llama.cpp | vocablens float32 | ratio | vocablens bfloat16 | ratio | lens / forward, float32 | lens / forward, bfloat16 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for k, r in rows.items():
    if "lcpp_cpu" not in r or "float32" not in r or "bfloat16" not in r: continue
    f, b = r["float32"], r["bfloat16"]
    print(f"| {k.upper()} | {n / r['lcpp_wall']:.1f} ({n / r['lcpp_cpu']:.1f}) | {n / f['fw']:.1f} ({n / f['fc']:.1f}) | "
          f"{r['lcpp_wall'] / f['fw']:.2f} ({r['lcpp_cpu'] / f['fc']:.2f}) | {n / b['fw']:.1f} ({n / b['fc']:.1f}) | "
          f"{r['lcpp_wall'] / b['fw']:.2f} ({r['lcpp_cpu'] / b['fc']:.2f}) | {f['lc'] / f['fc']:.2f} | {b['lc'] / b['fc']:.2f} |")
if peak:
    print(f"\nPer CPU second at {gflop:.3f} GFLOP per token, against one core's ceilings (bench_peak): float32 FMA "
          f"{peak['fp32_fma_gflops']:.1f}, SGEMM {peak['sgemm_gflops']:.1f}, bf16 dot {peak['bf16_dot_gflops']:.1f}, "
          f"bf16 GEMM {peak['bf16_gemm_gflops']:.1f}, int8 dot {peak['int8_dot_gops']:.1f} G/s")
    for k, r in rows.items():
        if "lcpp_cpu" not in r or "float32" not in r or "bfloat16" not in r: continue
        rate = lambda cpu_s: n * gflop / cpu_s
        print(f"  {k.upper()}: llama.cpp {rate(r['lcpp_cpu']):.1f} GFLOP/s; vocablens float32 {rate(r['float32']['fc']):.1f} "
              f"({100 * rate(r['float32']['fc']) / peak['sgemm_gflops']:.0f} % of SGEMM), bfloat16 {rate(r['bfloat16']['fc']):.1f}")
EOF
