#!/usr/bin/python3
"""Independent logit-lens reference for tests/lens_test.cpp (NumPy, float64).

Reads the fixtures' *reference* residual streams (computed by the fixtures' own float64 NumPy forward,
see ../shared/fixtures/*/README.md) and the unembedding / final-norm weights straight from the checkpoint
files with a tiny reader of its own (safetensors; llama2.c .bin), i.e. nothing from vocablens. For every
case it writes, into OUTDIR, float64/int64 .npy arrays [n_layers, T] (and [n_layers, T, k] for top-k):

  <case>.lse.npy  .entropy.npy  .kl.npy  .ce.npy  .target_prob.npy  .target_logprob.npy
  <case>.rank_lo.npy  .rank_hi.npy   (1 + #logits > z_t + 1e-3, 1 + #logits > z_t - 1e-3: rank bounds
                                      that tolerate fp32 ties)
  <case>.top_ids.npy  .top_probs.npy  .top_gap.npy  (gap to the next logit; compare ids where > 1e-3)
  <case>.ids.npy

and OUTDIR/cases.json describing the cases (model path, layers, options).

Usage: lens_reference.py FIXTURES_ROOT OUTDIR
"""
import json
import os
import struct
import sys

import numpy as np

TOP_K = 5


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    dtypes = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[base + a:base + b], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        out[name] = arr.astype(np.float64)
    return out


def read_llama2c(path):
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", data[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    kv_dim = dim * n_kv // n_heads
    w = np.frombuffer(data[28:], dtype=np.float32)
    off = 0

    def take(n):
        nonlocal off
        a = w[off:off + n]
        off += n
        return a

    emb = take(vocab * dim).reshape(vocab, dim)
    take(n_layers * dim)                 # rms_att
    take(n_layers * dim * dim)           # wq
    take(n_layers * kv_dim * dim)        # wk
    take(n_layers * kv_dim * dim)        # wv
    take(n_layers * dim * dim)           # wo
    take(n_layers * dim)                 # rms_ffn
    take(n_layers * hidden * dim)        # w1
    take(n_layers * dim * hidden)        # w2
    take(n_layers * hidden * dim)        # w3
    rms_final = take(dim)
    head_size = dim // n_heads
    take(seq_len * head_size // 2)       # freq_cis_real
    take(seq_len * head_size // 2)       # freq_cis_imag
    wcls = emb if shared else take(vocab * dim).reshape(vocab, dim)
    return {"W_E": emb.astype(np.float64), "W_U": wcls.T.astype(np.float64),
            "lnf_w": rms_final.astype(np.float64), "n_layers": n_layers}


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps=1e-5):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def lens_stats(normed, W, ids, target=None):
    """normed: [n, T, d] float64 (already through the final norm); W: [d, V].

    Computed a block of positions at a time: the whole [n, T, V] float64 logits of gpt2-tiny's longer
    sequences are hundreds of MB per temporary, and faulting in fresh pages for each of them cost twice
    the arithmetic in system time; blocks of at most ~8 MB are reused by malloc."""
    n, T, _ = normed.shape
    V = W.shape[1]
    lse = np.empty((n, T))
    entropy = np.empty((n, T))
    kl = np.empty((n, T))
    ce = np.full((n, T), np.nan)
    tp = np.full((n, T), np.nan)
    tlp = np.full((n, T), np.nan)
    rank_lo = np.full((n, T), -1, dtype=np.int64)
    rank_hi = np.full((n, T), -1, dtype=np.int64)
    top_ids = np.empty((n, T, TOP_K), dtype=np.int64)
    top_probs = np.empty((n, T, TOP_K))
    gap = np.empty((n, T, TOP_K))
    B = max(1, (8 << 20) // (8 * V))                 # positions per block

    def dist(z):
        m = z.max(-1, keepdims=True)
        lse_ = (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))[..., 0]
        logp = z - lse_[..., None]
        return lse_, logp, np.exp(logp)

    for t0 in range(0, T, B):
        t1 = min(T, t0 + B)
        _, logp_last, p_last = dist(normed[n - 1, t0:t1] @ W)
        for li in range(n):
            z = normed[li, t0:t1] @ W                # [b, V]
            lse[li, t0:t1], logp, p = dist(z)
            entropy[li, t0:t1] = -(p * logp).sum(-1)
            kl[li, t0:t1] = (p_last * (logp_last - logp)).sum(-1)
            for t in range(t0, t1):
                r = t - t0
                if t + 1 < T:
                    ce[li, t] = -logp[r, ids[t + 1]]
                tgt = target if target is not None else (ids[t + 1] if t + 1 < T else None)
                if tgt is None:
                    continue
                zt = z[r, tgt]
                tlp[li, t] = logp[r, tgt]
                tp[li, t] = p[r, tgt]
                rank_lo[li, t] = 1 + (z[r] > zt + 1e-3).sum()
                rank_hi[li, t] = 1 + (z[r] > zt - 1e-3).sum()
            # top K+1 by (logit descending, id ascending) without sorting whole rows
            cand = np.argpartition(-z, TOP_K + 1, axis=-1)[..., :TOP_K + 2]
            cand = np.sort(cand, axis=-1)            # ids ascending, so the stable sort below breaks ties by id
            cval = np.take_along_axis(z, cand, -1)
            order = np.take_along_axis(cand, np.argsort(-cval, axis=-1, kind="stable"), -1)[..., :TOP_K + 1]
            top_ids[li, t0:t1] = order[..., :TOP_K]
            vals = np.take_along_axis(z, order, -1)
            gap[li, t0:t1] = vals[..., :TOP_K] - vals[..., 1:TOP_K + 1]    # gap to the next logit in the ranking
            top_probs[li, t0:t1] = np.take_along_axis(p, order[..., :TOP_K], -1)
    return {"lse": lse, "entropy": entropy, "kl": kl, "ce": ce, "target_prob": tp, "target_logprob": tlp,
            "rank_lo": rank_lo, "rank_hi": rank_hi, "top_ids": top_ids,
            "top_probs": top_probs, "top_gap": gap}


def stack(pre, mid, post, with_mid):
    """Lens layers: resid_pre[0], then (resid_mid[l] if asked,) resid_post[l]."""
    layers, hooks = [pre[0]], ["resid_pre.0"]
    for l in range(post.shape[0]):
        if with_mid:
            layers.append(mid[l])
            hooks.append(f"resid_mid.{l}")
        layers.append(post[l])
        hooks.append(f"resid_post.{l}")
    return np.stack(layers).astype(np.float64), hooks


def main():
    root, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    cases = []

    def emit(name, model, hooks, ids, stats, **opts):
        for k, v in stats.items():
            np.save(os.path.join(out, f"{name}.{k}.npy"), v)
        np.save(os.path.join(out, f"{name}.ids.npy"), np.asarray(ids, dtype=np.int64))
        cases.append({"name": name, "model": model, "hooks": hooks, "top_k": TOP_K, **opts})

    # ---- gpt2-tiny: LayerNorm with bias, tied W_U = wte.T
    g = os.path.join(root, "gpt2-tiny")
    if os.path.isdir(g):
        w = read_safetensors(os.path.join(g, "model.safetensors"))
        W_E = w["wte.weight"]
        W_U = W_E.T
        ref = os.path.join(g, "reference")
        for seq in ("seq0_hello", "seq1_eiffel", "seq2_random100"):
            ids = np.load(os.path.join(ref, f"{seq}_ids.npy")).tolist()
            pre, mid, post = (np.load(os.path.join(ref, f"{seq}_{h}.npy")) for h in ("resid_pre", "resid_mid", "resid_post"))
            for with_mid in (False, True):
                x, hooks = stack(pre, mid, post, with_mid)
                normed = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
                emit(f"gpt2-tiny.{seq}{'.mid' if with_mid else ''}", "gpt2-tiny", hooks, ids,
                     lens_stats(normed, W_U, ids), resid_mid=with_mid, unembed="model")
        # explicit target token (" Paris" = 6342) and the pseudo-inverse unembedding
        seq = "seq1_eiffel"
        ids = np.load(os.path.join(ref, f"{seq}_ids.npy")).tolist()
        pre, mid, post = (np.load(os.path.join(ref, f"{seq}_{h}.npy")) for h in ("resid_pre", "resid_mid", "resid_post"))
        x, hooks = stack(pre, mid, post, False)
        normed = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
        emit("gpt2-tiny.eiffel.target", "gpt2-tiny", hooks, ids, lens_stats(normed, W_U, ids, target=6342),
             resid_mid=False, unembed="model", target=6342)
        # E⁺ = pinv(W_U^T); the fixtures are tied, so this is pinv(W_E)
        emit("gpt2-tiny.eiffel.pinv", "gpt2-tiny", hooks, ids, lens_stats(normed, np.linalg.pinv(W_E), ids),
             resid_mid=False, unembed="pinv")

    # ---- stories260K: RMSNorm without bias, shared classifier
    s = os.path.join(root, "stories260K")
    if os.path.isdir(s):
        w = read_llama2c(os.path.join(s, "stories260K.bin"))
        ref = os.path.join(s, "reference")
        ids = np.load(os.path.join(ref, "ids_first32.npy")).tolist()
        pre, mid, post = (np.load(os.path.join(ref, f"{h}_first32.npy")) for h in ("resid_pre", "resid_mid", "resid_post"))
        for with_mid in (False, True):
            x, hooks = stack(pre, mid, post, with_mid)
            normed = rms_norm(x, w["lnf_w"])
            emit(f"stories260K{'.mid' if with_mid else ''}", "stories260K/stories260K.bin", hooks, ids,
                 lens_stats(normed, w["W_U"], ids), resid_mid=with_mid, unembed="model")
        x, hooks = stack(pre, mid, post, False)
        normed = rms_norm(x, w["lnf_w"])
        emit("stories260K.pinv", "stories260K/stories260K.bin", hooks, ids,
             lens_stats(normed, np.linalg.pinv(w["W_E"]), ids), resid_mid=False, unembed="pinv")

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    print(f"lens_reference: wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
