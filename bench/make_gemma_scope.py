#!/usr/bin/python3
"""Writes Gemma-Scope-sized inputs for the feature-logit memory bench (docs/benchmarks.md; never committed):
  make_gemma_scope.py model OUT_DIR   Gemma-2-2B-shaped Hugging Face folder, ONE layer, tied embeddings in BF16:
                                      config.json + model.safetensors (V 256 000 × d 2304: 1.18 GB of embedding)
  make_gemma_scope.py sae OUT_DIR     Gemma Scope v1 layout: OUT_DIR/params.npz (float32; W_enc [2304, 262144],
                                      W_dec [262144, 2304] rows of unit norm, b_enc, b_dec, threshold; 4.8 GB),
                                      written block by block (never a whole matrix in memory)
  make_gemma_scope.py check RUN MODEL_DIR SAE_DIR [N]
                                      compares the first N (8) features of a `vocablens features ... --out RUN
                                      --format npy` run with float64 NumPy (W_E from the BF16 file, W_dec rows
                                      from params.npz): ids equal, values within 1e-12
Values are independent N(0, σ) draws (no repeated pool: repeated columns would make exact ties everywhere).
D, V, N (d_sae) in the environment write smaller files of the same layout."""
import json, os, struct, sys, zipfile
import numpy as np

d, V, N = (int(os.environ.get(k, v)) for k, v in (("D", 2304), ("V", 256000), ("N", 262144)))
rng = np.random.default_rng(11 if sys.argv[1:2] == ["model"] else 12)  # model and SAE draw independent values
BLOCK = 8192  # rows generated at a time


def bf16(x):  # round to nearest even, as torch does
    u = x.astype(np.float32).view(np.uint32)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


def model(out):
    os.makedirs(out, exist_ok=True)
    H, Hkv, dh, m = 8, 4, 256, 9216
    cfg = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": d, "intermediate_size": m,
           "num_hidden_layers": 1, "num_attention_heads": H, "num_key_value_heads": Hkv, "head_dim": dh,
           "vocab_size": V, "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256,
           "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 4096,
           "cache_implementation": "hybrid", "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1,
           "torch_dtype": "bfloat16"}
    p = "model.layers.0."
    shapes = [("model.embed_tokens.weight", (V, d), 0.03)]
    shapes += [(p + n, s, 0.02) for n, s in (("self_attn.q_proj.weight", (H * dh, d)), ("self_attn.k_proj.weight", (Hkv * dh, d)),
                                             ("self_attn.v_proj.weight", (Hkv * dh, d)), ("self_attn.o_proj.weight", (d, H * dh)),
                                             ("mlp.gate_proj.weight", (m, d)), ("mlp.up_proj.weight", (m, d)),
                                             ("mlp.down_proj.weight", (d, m)))]
    shapes += [(p + n, (d,), 0.0) for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                            "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight")]
    shapes += [("model.norm.weight", (d,), 0.0)]
    header, off = {}, 0
    for n, s, _ in shapes:
        nb = int(np.prod(s)) * 2
        header[n] = {"dtype": "BF16", "shape": list(s), "data_offsets": [off, off + nb]}
        off += nb
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for n, s, std in shapes:
            rows = s[0]
            cols = int(np.prod(s[1:])) if len(s) > 1 else 1
            for r0 in range(0, rows, BLOCK):
                r = min(BLOCK, rows - r0)
                x = rng.standard_normal((r, cols), dtype=np.float32) * std if std > 0 else np.zeros((r, cols), np.float32)
                f.write(bf16(x).tobytes())
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def npy_header(shape):
    h = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{s}, " for s in shape)
    h += " " * (-(len(h) + 11) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()


def sae(out):
    os.makedirs(out, exist_ok=True)
    with zipfile.ZipFile(os.path.join(out, "params.npz"), "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        with z.open("W_enc.npy", "w", force_zip64=True) as f:
            f.write(npy_header((d, N)))
            for r0 in range(0, d, 64):
                f.write((rng.standard_normal((min(64, d - r0), N), dtype=np.float32) * 0.02).tobytes())
        with z.open("W_dec.npy", "w", force_zip64=True) as f:
            f.write(npy_header((N, d)))
            for r0 in range(0, N, BLOCK):
                x = rng.standard_normal((min(BLOCK, N - r0), d), dtype=np.float32)
                x /= np.linalg.norm(x, axis=1, keepdims=True)
                f.write(x.astype(np.float32).tobytes())
        for n, shape, val in (("b_enc", (N,), 0.0), ("b_dec", (d,), 0.0), ("threshold", (N,), 0.05)):
            with z.open(n + ".npy", "w", force_zip64=True) as f:
                f.write(npy_header(shape) + np.full(shape, val, np.float32).tobytes())


def check(run, model_dir, sae_dir, n=8):
    top_ids, top_vals = np.load(run + "/features.top_ids.npy"), np.load(run + "/features.top_values.npy")
    bot_ids, bot_vals = np.load(run + "/features.bottom_ids.npy"), np.load(run + "/features.bottom_values.npy")
    feats = np.load(run + "/features.feature_ids.npy")
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        hn = struct.unpack("<Q", f.read(8))[0]
        e = json.loads(f.read(hn))["model.embed_tokens.weight"]
        V_, D_ = e["shape"]
        f.seek(8 + hn + e["data_offsets"][0])
        E = (np.frombuffer(f.read(V_ * D_ * 2), np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(V_, D_)
    E = E.astype(np.float64)
    with zipfile.ZipFile(os.path.join(sae_dir, "params.npz")) as z, z.open("W_dec.npy") as g:
        g.read(8)
        g.read(struct.unpack("<H", g.read(2))[0])
        rows = int(feats[:n].max()) + 1
        W = np.frombuffer(g.read(rows * D_ * 4), np.float32).reshape(rows, D_).astype(np.float64)
    bad, worst = 0, 0.0
    for q in range(min(n, len(feats))):
        v = E @ W[feats[q]]
        hi = np.lexsort((np.arange(V_), -v))[: top_ids.shape[1]]
        lo = np.lexsort((np.arange(V_), v))[: bot_ids.shape[1]]
        bad += int((hi != top_ids[q]).sum() + (lo != bot_ids[q]).sum())
        worst = max(worst, float(np.abs(v[hi] - top_vals[q]).max()), float(np.abs(v[lo] - bot_vals[q]).max()))
    print(f"{min(n, len(feats))} features: {bad} ids differ, largest value difference {worst:.3g}")
    sys.exit(1 if bad or worst > 1e-12 else 0)


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 8)
    if len(sys.argv) != 3 or sys.argv[1] not in ("model", "sae"):
        sys.exit(__doc__)
    (model if sys.argv[1] == "model" else sae)(sys.argv[2])
