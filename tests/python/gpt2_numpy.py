"""An independent float64 NumPy forward of a GPT-2 checkpoint (fixture gpt2-tiny), written from the model's
definition (Radford et al. 2019; Hugging Face GPT2Model: pre-LayerNorm blocks, Conv1D weights [in, out],
gelu_new, learned positions, tied unembedding), reading model.safetensors with its own reader: nothing
from vocablens. It exposes every TransformerLens hook point (the norms' as vocablens defines them, see norm()
below), and `edits` {hook name: f(array) -> array}
change an activation where the hook would, so hooked vocablens forwards can be checked against it.

    acts = forward(load(dir), ids, edits={"blocks.1.attn.hook_z": zero_head_2})
    acts["logits"]       # [T, V] float64; acts["blocks.0.attn.hook_z"] [T, H, d_head], ...
"""
import json
import os
import struct

import numpy as np


def read_weights(model_dir):
    """model.safetensors (F32 tensors) as float64 arrays, and config.json: the format read by hand."""
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    w = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", info["dtype"]
        a, b = info["data_offsets"]
        w[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(info["shape"]).astype(np.float64)
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    return w, cfg


def load(model_dir):
    w, cfg = read_weights(model_dir)
    return {"w": w, "n_layers": cfg["n_layer"], "n_heads": cfg["n_head"], "d_model": cfg["n_embd"],
            "eps": cfg["layer_norm_epsilon"]}


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def recorder(edits):
    """(acts, hook): hook(name, x) applies edits[name] to a copy of x, records the result in acts, returns it."""
    edits = edits or {}
    acts = {}

    def hook(name, x):
        if name in edits:
            x = edits[name](x.copy())
        acts[name] = x
        return x
    return acts, hook


def forward(m, ids, edits=None):
    """Every activation of one sequence (no batch dimension), TransformerLens names, float64."""
    w, L, H, d, eps = m["w"], m["n_layers"], m["n_heads"], m["d_model"], m["eps"]
    dh = d // H
    T = len(ids)
    acts, hook = recorder(edits)

    def norm(prefix, x, g, bias, final=False):
        # LayerNorm in TransformerLens's steps: hook_scale [T, 1] is the denominator; ln1 / ln2's hook_normalized
        # the centred vector divided by it, before g and bias (TransformerLens's LayerNormPre, what a model with
        # folded norms feeds the next matrix); the final norm's output is ln_final.hook_normalized itself, after
        # g and bias (hooked by the caller), as the unembedding reads it.
        c = x - x.mean(-1, keepdims=True)
        scale = hook(prefix + "hook_scale", np.sqrt((c ** 2).mean(-1, keepdims=True) + eps))
        n = c / scale if final else hook(prefix + "hook_normalized", c / scale)
        return n * g + bias

    x = hook("hook_embed", w["wte.weight"][np.asarray(ids)])
    x = x + hook("hook_pos_embed", w["wpe.weight"][:T])
    causal = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(L):
        p = "h.%d." % l
        b = "blocks.%d." % l
        x = hook(b + "hook_resid_pre", x)
        h = norm(b + "ln1.", x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q = hook(b + "attn.hook_q", qkv[:, :d].reshape(T, H, dh))
        k = hook(b + "attn.hook_k", qkv[:, d:2 * d].reshape(T, H, dh))
        v = hook(b + "attn.hook_v", qkv[:, 2 * d:].reshape(T, H, dh))
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(dh)
        scores = np.where(causal[None], -np.inf, scores)
        scores = hook(b + "attn.hook_attn_scores", scores)
        e = np.exp(scores - scores.max(-1, keepdims=True))
        pattern = hook(b + "attn.hook_pattern", e / e.sum(-1, keepdims=True))
        z = hook(b + "attn.hook_z", np.einsum("hqk,khd->qhd", pattern, v))
        W_O = w[p + "attn.c_proj.weight"].reshape(H, dh, d)
        result = hook(b + "attn.hook_result", np.einsum("qhd,hdm->qhm", z, W_O))
        attn_out = hook(b + "hook_attn_out", result.sum(1) + w[p + "attn.c_proj.bias"])
        mid = hook(b + "hook_resid_mid", x + attn_out)
        h2 = hook(b + "mlp.hook_in", norm(b + "ln2.", mid, w[p + "ln_2.weight"], w[p + "ln_2.bias"]))
        pre = hook(b + "mlp.hook_pre", h2 @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        post = hook(b + "mlp.hook_post", gelu_new(pre))
        mlp_out = hook(b + "hook_mlp_out", post @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])
        x = hook(b + "hook_resid_post", mid + mlp_out)
    fin = hook("ln_final.hook_normalized", norm("ln_final.", x, w["ln_f.weight"], w["ln_f.bias"], final=True))
    acts["logits"] = fin @ w["wte.weight"].T
    return acts
