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
[ -f "$W/corpus.txt" ] || cat "$S"/docs/*.md > "$W/corpus.txt"
[ -f "$W/model/config.json" ] || D=768 L=12 H=12 FF=3072 V=50257 CTX=1024 /usr/bin/python3 "$S/bench/make_7b.py" safetensors "$W/model"
PYTHONPATH="$S/build/python" /usr/bin/python3 - "$W" "$S/../shared/fixtures/gpt2-tiny" <<'PY'
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
# A third SAE of d_sae = 16·d with a trained SAE's sparsity: sae16d's weights as JumpReLU, each feature's
# threshold at the quantile of its pre-activation (the model's own residuals at the hook, the first 16
# windows of the corpus) that makes it fire on L0 / d_sae of the positions: L0 ≈ 64 as published SAEs have, where the
# standard SAE above fires on about half of its features.
p = os.path.join(w, "sae16d_l0")
if not os.path.exists(os.path.join(p, "cfg.json")):
    import torch, vocablens
    corpus = os.path.join(w, "corpus.txt")
    m = vocablens.load_model(os.path.join(w, "model"), tokenizer=sys.argv[2])
    ids = m.tokenize(open(corpus).read()[:200000])
    xs = []
    for i in range(0, 16 * 127, 127):  # the bench's first 16 windows of 128 (overlapping by one), as the CLI cuts them
        _, cache = m.run_with_cache(ids[i:i + 128], names_filter=["blocks.6.hook_resid_pre"])
        xs.append(cache["blocks.6.hook_resid_pre"].reshape(-1, 768)[:-1].double().numpy())
    x = np.concatenate(xs)
    sae = vocablens.load_sae(os.path.join(w, "sae16d"))
    W_enc, b_enc, b_dec = (t.double().numpy() for t in (sae.W_enc, sae.b_enc, sae.b_dec))
    thr = np.quantile((x - b_dec) @ W_enc + b_enc, 1 - 64 / W_enc.shape[1], axis=0)
    os.makedirs(p, exist_ok=True)
    st(os.path.join(p, "sae_weights.safetensors"), {"W_enc": W_enc, "W_dec": sae.W_dec.double().numpy(), "b_enc": b_enc,
                                                   "b_dec": b_dec, "threshold": thr})
    json.dump({"architecture": "jumprelu", "d_in": 768, "d_sae": W_enc.shape[1], "dtype": "float32",
               "apply_b_dec_to_input": True, "normalize_activations": "none",
               "metadata": {"hook_name": "blocks.6.hook_resid_pre"}}, open(os.path.join(p, "cfg.json"), "w"))
PY
# CPU seconds (user + system) of one run: on a shared machine the CPU a run used is steadier than its wall time,
# and one thread (VOCABLENS_THREADS, default 1 here) keeps OpenMP from spinning while a partner waits.
export VOCABLENS_THREADS=${VOCABLENS_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
run() {
  /usr/bin/time -f "%U %S" -o "$W/time.txt" "$B" features "$W/model" --tokenizer "$S/../shared/fixtures/gpt2-tiny" \
      --sae "$W/$1" --corpus "$W/corpus.txt" --window 128 --max-tokens "$N" --contexts 5 "${@:2}" --format json > "$W/$1.json"
  awk '{print $1 + $2}' "$W/time.txt"
}
l0() { /usr/bin/python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["summary"]["metrics"]["mean_l0"], 1))' "$W/$1.json"; }
for mode in --no-ce ""; do
  a=$(run sae16 $mode); b=$(run sae16d $mode); c=$(run sae16d_l0 $mode); a2=$(run sae16 $mode)
  base=$(echo "if ($a < $a2) $a else $a2" | bc)
  echo "${mode:-full (3 forwards)}, CPU s: d_sae 16: $a / $a2 | d_sae 12288 standard (L0 $(l0 sae16d)): $b," \
       "ratio $(echo "scale=3; $b / $base" | bc) | d_sae 12288 JumpReLU (L0 $(l0 sae16d_l0)): $c, ratio $(echo "scale=3; $c / $base" | bc)"
done
