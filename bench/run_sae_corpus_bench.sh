#!/usr/bin/env bash
# The cost of an SAE in a corpus pass (`vocablens features --corpus`, docs/features.md): the same command with an
# SAE of d_sae = 16·d and with a negligible one (d_sae = 16), on a GPT-2-small-sized model (Llama layout from
# bench/make_7b.py: d 768, 12 layers, V 50 257, random weights) with GPT-2's tokenizer from the fixtures.
#   bench/run_sae_corpus_bench.sh [WORK_DIR] [MAX_TOKENS]
# Prints the seconds of each run and their ratio; --no-ce (one forward per window: encode, decode and the
# statistics over the forward) and the full run (three forwards per window).
set -euo pipefail
S=$(cd "$(dirname "$0")/.." && pwd); B=$S/build/vocablens; W=${1:-/tmp/vl-sae-bench}; N=${2:-4096}
mkdir -p "$W"
[ -f "$W/model/config.json" ] || D=768 L=12 H=12 FF=3072 V=50257 CTX=1024 /usr/bin/python3 "$S/bench/make_7b.py" safetensors "$W/model"
/usr/bin/python3 - "$W" <<'PY'
import json, os, sys
import numpy as np
w = sys.argv[1]
rng = np.random.default_rng(3)
def st(path, tensors):  # safetensors, F32
    header, off, blobs = {}, 0, []
    for k, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little")); f.write(h); [f.write(b) for b in blobs]
for name, n in (("sae16", 16), ("sae16d", 16 * 768)):
    p = os.path.join(w, name)
    if os.path.exists(os.path.join(p, "cfg.json")): continue
    os.makedirs(p, exist_ok=True)
    d = 768
    st(os.path.join(p, "sae_weights.safetensors"),
       {"W_enc": rng.normal(0, 1 / np.sqrt(d), (d, n)), "W_dec": rng.normal(0, 1 / np.sqrt(n), (n, d)),
        "b_enc": rng.normal(-0.5, 0.1, n), "b_dec": np.zeros(d)})
    json.dump({"architecture": "standard", "d_in": d, "d_sae": n, "dtype": "float32", "apply_b_dec_to_input": True,
               "normalize_activations": "none", "metadata": {"hook_name": "blocks.6.hook_resid_pre"}},
              open(os.path.join(p, "cfg.json"), "w"))
PY
[ -f "$W/corpus.txt" ] || cat "$S"/docs/*.md > "$W/corpus.txt"
run() {  # seconds of one run
  local t0 t1; t0=$(date +%s.%N)
  "$B" features "$W/model" --tokenizer "$S/../shared/fixtures/gpt2-tiny" --sae "$W/$1" --corpus "$W/corpus.txt" \
      --window 128 --max-tokens "$N" --contexts 5 "${@:2}" --format json > /dev/null
  t1=$(date +%s.%N); echo "$t1 - $t0" | bc
}
for mode in --no-ce ""; do
  a=$(run sae16 $mode); b=$(run sae16d $mode); a2=$(run sae16 $mode)
  base=$(echo "if ($a < $a2) $a else $a2" | bc)
  echo "${mode:-full (3 forwards)}: d_sae 16: ${a}s / ${a2}s  d_sae 12288: ${b}s  ratio $(echo "scale=3; $b / $base" | bc)"
done
