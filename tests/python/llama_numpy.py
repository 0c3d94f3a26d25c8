"""An independent float64 NumPy forward of a Hugging Face Llama checkpoint (fixture stories260K-hf), written from
the model's definition (Touvron et al. 2023; Hugging Face LlamaModel: RMSNorm before attention and MLP,
rotate_half rotary, grouped-query attention, SwiGLU, tied or explicit lm_head), reading model.safetensors with
gpt2_numpy.py's own reader: nothing from vocablens. It exposes the hook points around the norms as vocablens defines them
(TransformerLens's RMSNorm: hook_scale = sqrt(mean(x²) + eps) [T, 1], hook_normalized = x / scale before the
weight; mlp.hook_in is what the MLP reads, after the weight), plus resid_pre/mid/post and the logits, and
`edits` {hook name: f(array) -> array} change an activation where the hook would.

A Mixtral checkpoint (`block_sparse_moe` tensors; Jiang et al. 2024, Hugging Face MixtralSparseMoeBlock) runs its
MLP as a mixture: router logits h W_gate^T [T, E], softmax over all experts, the top k, their weights renormalised
to sum 1, each chosen expert's SwiGLU w2(silu(w1 h) * w3 h). Hook points as vocablens names them:
mlp.hook_router_logits [T, E], mlp.hook_expert_indices [T, k] (best first), mlp.hook_expert_weights [T, k],
mlp.hook_expert_out [T, k, d] (each chosen expert's unweighted output; the MLP's output is their weighted sum).

    acts = forward(load(dir), ids, edits={"blocks.1.ln2.hook_normalized": f})
    acts["logits"]       # [T, V] float64
"""
import numpy as np

import gpt2_numpy


def load(model_dir):
    w, cfg = gpt2_numpy.read_weights(model_dir)  # the same hand-written safetensors reader
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    return {"w": w, "n_layers": cfg["num_hidden_layers"], "n_heads": H, "n_kv": cfg["num_key_value_heads"],
            "d_head": cfg.get("head_dim", d // H), "eps": cfg["rms_norm_eps"], "theta": cfg["rope_theta"],
            "tied": cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in w,
            "n_experts": cfg.get("num_local_experts", 0), "k": cfg.get("num_experts_per_tok", 0)}


def moe(m, p, b, h2, hook):
    """A Mixtral MLP of one layer on h2 [T, d], with its hook points."""
    w, k = m["w"], m["k"]
    logits = hook(b + "mlp.hook_router_logits", h2 @ w[p + "block_sparse_moe.gate.weight"].T)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    probs = e / e.sum(-1, keepdims=True)
    idx = np.argsort(-probs, axis=-1, kind="stable")[:, :k]  # best first; ties by the lower index, as torch.topk
    idx = hook(b + "mlp.hook_expert_indices", idx)
    wts = np.take_along_axis(probs, idx, -1)
    wts = hook(b + "mlp.hook_expert_weights", wts / wts.sum(-1, keepdims=True))
    T, d = h2.shape
    out = np.zeros((T, k, d))
    for t in range(T):
        for s in range(k):
            x = "%sblock_sparse_moe.experts.%d." % (p, idx[t, s])
            g = h2[t] @ w[x + "w1.weight"].T
            out[t, s] = (g / (1 + np.exp(-g)) * (h2[t] @ w[x + "w3.weight"].T)) @ w[x + "w2.weight"].T
    out = hook(b + "mlp.hook_expert_out", out)
    return (out * wts[..., None]).sum(1)


def rotary(x, theta):
    """x [T, heads, dh]; rotate_half pairs (i, i + dh/2), angle t * theta^(-2i/dh)."""
    T, _, dh = x.shape
    inv = theta ** (-np.arange(0, dh, 2, dtype=np.float64) / dh)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, -1)[:, None, :]
    half = dh // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def forward(m, ids, edits=None):
    """Activations of one sequence (no batch dimension) under TransformerLens's names, float64."""
    w, L, H, Hkv, dh, eps = m["w"], m["n_layers"], m["n_heads"], m["n_kv"], m["d_head"], m["eps"]
    T = len(ids)
    acts, hook = gpt2_numpy.recorder(edits)

    def norm(prefix, x, g, final=False):
        scale = hook(prefix + "hook_scale", np.sqrt((x ** 2).mean(-1, keepdims=True) + eps))
        n = x / scale if final else hook(prefix + "hook_normalized", x / scale)
        return n * g

    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    causal = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(L):
        p = "model.layers.%d." % l
        b = "blocks.%d." % l
        x = hook(b + "hook_resid_pre", x)
        h = norm(b + "ln1.", x, w[p + "input_layernorm.weight"])
        q = rotary((h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, dh), m["theta"])
        k = rotary((h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, dh), m["theta"])
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, Hkv, dh)
        k = np.repeat(k, H // Hkv, axis=1)
        v = np.repeat(v, H // Hkv, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(dh)
        scores = np.where(causal[None], -np.inf, scores)
        e = np.exp(scores - scores.max(-1, keepdims=True))
        z = np.einsum("hqk,khd->qhd", e / e.sum(-1, keepdims=True), v)
        mid = hook(b + "hook_resid_mid", x + z.reshape(T, H * dh) @ w[p + "self_attn.o_proj.weight"].T)
        h2 = hook(b + "mlp.hook_in", norm(b + "ln2.", mid, w[p + "post_attention_layernorm.weight"]))
        if m["n_experts"]:
            mlp_out = moe(m, p, b, h2, hook)
        else:
            gate = h2 @ w[p + "mlp.gate_proj.weight"].T
            up = h2 @ w[p + "mlp.up_proj.weight"].T
            mlp_out = (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
        mlp_out = hook(b + "hook_mlp_out", mlp_out)
        x = hook(b + "hook_resid_post", mid + mlp_out)
    fin = hook("ln_final.hook_normalized", norm("ln_final.", x, w["model.norm.weight"], final=True))
    W_U = w["model.embed_tokens.weight"] if m["tied"] else w["lm_head.weight"]
    acts["logits"] = fin @ W_U.T
    return acts
