#!/usr/bin/python3
"""Long-context fixture and float64 reference for tests/long_context_test.cpp (NumPy only).

Writes into OUTDIR two small random-weight checkpoints with a 4096-token context, in the Hugging Face layout
vocablens reads (config.json + model.safetensors, float32), sharing one set of weights:

  OUTDIR/llama/    LlamaForCausalLM: RMSNorm, rotary (rotate_half), SwiGLU, grouped-query attention (4 heads over 2)
  OUTDIR/mistral/  MistralForCausalLM: the same weights with sliding_window = 700 (not a multiple of any block)

plus OUTDIR/ids.npy (int64 [4096], a fixed random sequence) and OUTDIR/<model>_logits.npy (float64 [4096, V]):
each model's forward written here from the definitions (Touvron et al. 2023; Jiang et al. 2023 for the
window: query t sees keys t - window < k <= t), attention one head at a time with the full [T, T] softmax in
float64. Nothing is shared with vocablens. A vocab.json / merges.txt pair (copied from the families fixtures)
makes the directories usable by the CLI.

Usage: long_context_reference.py OUTDIR
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

T = 4096
V, D, H, HKV, DH, FF, L = 320, 64, 4, 2, 16, 128, 2
WINDOW = 700
EPS = 1e-6
THETA = 10000.0
ROWS = 1024  # query rows per softmax block (forward())
HERE = os.path.dirname(os.path.abspath(__file__))


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_weights(rng):
    n = lambda *shape, std: (rng.standard_normal(shape) * std).astype(np.float32)
    t = {"model.embed_tokens.weight": n(V, D, std=0.5), "model.norm.weight": (1 + n(D, std=0.1)), "lm_head.weight": n(V, D, std=0.12)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + n(D, std=0.1)
        # q and k larger than the rest: scores of several units, so that some rows are nearly one-hot and
        # the running maximum of a blocked softmax changes from block to block.
        t[p + "self_attn.q_proj.weight"] = n(H * DH, D, std=0.25)
        t[p + "self_attn.k_proj.weight"] = n(HKV * DH, D, std=0.25)
        t[p + "self_attn.v_proj.weight"] = n(HKV * DH, D, std=0.12)
        t[p + "self_attn.o_proj.weight"] = n(D, H * DH, std=0.12)
        t[p + "post_attention_layernorm.weight"] = 1 + n(D, std=0.1)
        t[p + "mlp.gate_proj.weight"] = n(FF, D, std=0.12)
        t[p + "mlp.up_proj.weight"] = n(FF, D, std=0.12)
        t[p + "mlp.down_proj.weight"] = n(D, FF, std=0.12)
    return t


def config(arch, model_type, extra):
    c = {"architectures": [arch], "model_type": model_type, "hidden_size": D, "intermediate_size": FF,
         "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": HKV, "vocab_size": V,
         "max_position_embeddings": T, "rms_norm_eps": EPS, "rope_theta": THETA, "hidden_act": "silu",
         "tie_word_embeddings": False, "bos_token_id": V - 1, "eos_token_id": V - 1, "torch_dtype": "float32"}
    c.update(extra)
    return c


def rms_norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def rotate(x, cos, sin):  # x [T, DH]; pairs (i, i + DH/2)
    x1, x2 = x[:, : DH // 2], x[:, DH // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def forward(w, ids, window):
    w = {k: v.astype(np.float64) for k, v in w.items()}
    inv_freq = THETA ** (-np.arange(0, DH, 2, dtype=np.float64) / DH)
    ang = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    cos, sin = np.cos(ang), np.sin(ang)
    pos = np.arange(T)
    hidden = pos[None, :] > pos[:, None]  # key after query
    if window > 0:
        hidden |= pos[None, :] <= pos[:, None] - window
    x = w["model.embed_tokens.weight"][ids]
    for i in range(L):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        v = h @ w[p + "self_attn.v_proj.weight"].T
        z = np.zeros((T, H * DH))
        for hd in range(H):
            kv = hd // (H // HKV)
            qh = rotate(q[:, hd * DH:(hd + 1) * DH], cos, sin)
            kh = rotate(k[:, kv * DH:(kv + 1) * DH], cos, sin)
            vh = v[:, kv * DH:(kv + 1) * DH]
            # Each query row's softmax is its own: the rows go ROWS at a time (the same float64 values as one
            # [T, T] matrix, without allocating and faulting in 128 MiB per head), and a block's keys stop at
            # its last query — the keys after it are hidden from every row of the block (weight exactly 0).
            for r0 in range(0, T, ROWS):
                r1 = min(T, r0 + ROWS)
                s = qh[r0:r1] @ kh[:r1].T / np.sqrt(DH)
                s[hidden[r0:r1, :r1]] = -np.inf
                s -= s.max(axis=-1, keepdims=True)
                e = np.exp(s)
                z[r0:r1, hd * DH:(hd + 1) * DH] = (e / e.sum(axis=-1, keepdims=True)) @ vh[:r1]
        x = x + z @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ w[p + "mlp.down_proj.weight"].T
    return rms_norm(x, w["model.norm.weight"]) @ w["lm_head.weight"].T


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: long_context_reference.py OUTDIR")
    out = sys.argv[1]
    rng = np.random.default_rng(20261126)
    w = make_weights(rng)
    ids = rng.integers(0, V - 1, size=T).astype(np.int64)
    np.save(os.path.join(out, "ids.npy"), ids)
    tok = os.path.join(HERE, "fixtures", "families", "mistral")
    for name, arch, mt, extra, window in [("llama", "LlamaForCausalLM", "llama", {}, 0),
                                          ("mistral", "MistralForCausalLM", "mistral", {"sliding_window": WINDOW}, WINDOW)]:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config(arch, mt, extra), f, indent=2)
        write_safetensors(os.path.join(d, "model.safetensors"), w)
        for fn in ("vocab.json", "merges.txt"):
            shutil.copy(os.path.join(tok, fn), os.path.join(d, fn))
        np.save(os.path.join(out, name + "_logits.npy"), forward(w, ids, window))


if __name__ == "__main__":
    main()
