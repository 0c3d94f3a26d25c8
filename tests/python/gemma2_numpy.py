"""An independent float64 NumPy forward of a Hugging Face Gemma-2 checkpoint (fixture tests/fixtures/families/gemma2),
written from the model's definition (Gemma Team 2024; Hugging Face Gemma2Model): embeddings × sqrt(d_model); RMSNorm
with weight (1 + w) before attention, after attention, before the MLP and after it; rotate_half rotary; grouped-query
attention scaled by query_pre_attn_scalar^-1/2, its scores soft-capped c·tanh(s / c) before the causal mask, a
sliding window on even layers (a key is seen while query − key < window); the gelu-tanh gated MLP; the final norm,
the tied unembedding and the final soft-cap. Reads model.safetensors with gpt2_numpy.py's reader: nothing from
vocablens. test_graph_gemma.py checks it against llama.cpp's logits of the fixture (llama_logits.f32).

    acts = forward(load(dir), ids)
    acts["blocks.1.attn.hook_out_pre_norm"]   # [T, d] the attention's output before its post-norm
    acts["logits"]                            # [T, V] float64, soft-capped
"""
import numpy as np

import gpt2_numpy
from llama_numpy import rotary


def load(model_dir):
    w, cfg = gpt2_numpy.read_weights(model_dir)
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    return {"w": w, "cfg": cfg, "n_layers": cfg["num_hidden_layers"], "n_heads": H, "n_kv": cfg["num_key_value_heads"],
            "d_model": d, "d_head": cfg.get("head_dim", d // H), "eps": cfg["rms_norm_eps"], "theta": cfg["rope_theta"]}


def rms(x, eps):
    """The RMSNorm denominator sqrt(mean(x²) + eps) [T, 1]."""
    return np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(m, ids):
    """Activations of one sequence under TransformerLens's names (plus the attention before its post-norm)."""
    w, cfg, L, H, Hkv, dh, d, eps = m["w"], m["cfg"], m["n_layers"], m["n_heads"], m["n_kv"], m["d_head"], m["d_model"], m["eps"]
    T = len(ids)
    acts = {}
    norm = lambda x, g: x / rms(x, eps) * (1 + g)  # noqa: E731 (Gemma's RMSNorm multiplies by 1 + weight)
    x = w["model.embed_tokens.weight"][np.asarray(ids)] * np.sqrt(d)
    q_idx, k_idx = np.arange(T)[:, None], np.arange(T)[None, :]
    for l in range(L):
        p, b = "model.layers.%d." % l, "blocks.%d." % l
        acts[b + "hook_resid_pre"] = x
        h = norm(x, w[p + "input_layernorm.weight"])
        q = rotary((h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, dh), m["theta"])
        k = np.repeat(rotary((h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, dh), m["theta"]), H // Hkv, axis=1)
        v = np.repeat((h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, Hkv, dh), H // Hkv, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(cfg["query_pre_attn_scalar"])
        cap = cfg.get("attn_logit_softcapping") or 0
        if cap:
            scores = cap * np.tanh(scores / cap)
        hidden = k_idx > q_idx
        if l % 2 == 0 and cfg.get("sliding_window"):
            hidden = hidden | (q_idx - k_idx >= cfg["sliding_window"])
        scores = np.where(hidden[None], -np.inf, scores)
        e = np.exp(scores - scores.max(-1, keepdims=True))
        pattern = e / e.sum(-1, keepdims=True)
        acts[b + "attn.hook_pattern"] = pattern
        attn = np.einsum("hqk,khd->qhd", pattern, v).reshape(T, H * dh) @ w[p + "self_attn.o_proj.weight"].T
        acts[b + "attn.hook_out_pre_norm"] = attn
        mid = x + norm(attn, w[p + "post_attention_layernorm.weight"])
        acts[b + "hook_resid_mid"] = mid
        h2 = norm(mid, w[p + "pre_feedforward_layernorm.weight"])
        mlp = (gelu_tanh(h2 @ w[p + "mlp.gate_proj.weight"].T) * (h2 @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        acts[b + "hook_mlp_out"] = norm(mlp, w[p + "post_feedforward_layernorm.weight"])
        x = mid + acts[b + "hook_mlp_out"]
        acts[b + "hook_resid_post"] = x
    logits = norm(x, w["model.norm.weight"]) @ w["model.embed_tokens.weight"].T
    cap = cfg.get("final_logit_softcapping") or 0
    acts["logits"] = cap * np.tanh(logits / cap) if cap else logits
    return acts
