#!/usr/bin/python3
"""Baseline for bench/bench_lens.cpp: the logit lens written as TransformerLens does it, in PyTorch.

  lens_baseline.py make DIR [--seed S] [--tokens T]
      Writes a GPT-2-small-shaped model with random weights (12 layers, d_model 768, 12 heads, d_mlp 3072,
      V 50257, n_ctx 1024) as a Hugging Face directory (config.json + model.safetensors, float32), and
      DIR/ids.npy with T random token ids.

  lens_baseline.py run DIR [--threads N] [--repeat R] [--top-k K] [--mode layer|stack] [--out OUTDIR]
      Loads the same weights (own safetensors reader), runs the forward pass caching every residual
      (TransformerLens run_with_cache), then for all 13 lens layers: ln_f applied to each layer's own residual
      (recomputed, not the cached final scale), full logits, log_softmax, top-k, entropy, KL(final || layer),
      cross-entropy against the next token and the rank of the next token. Prints one JSON line of timings
      and peak RSS; with --out also writes entropy/kl/top_ids .npy for the comparison with vocablens.

  --mode layer (default) computes one layer's [T, V] logits at a time (what a careful user writes, and the
  cheaper baseline); --mode stack unembeds the whole [13, T, d] stack at once like
  `model.unembed(cache.accumulated_resid(apply_ln=True))` (about 11 GB at T = 1024).
"""
import argparse
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np

CFG = dict(n_layer=12, n_embd=768, n_head=12, n_inner=3072, vocab_size=50257, n_positions=1024)


def make(args):
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.RandomState(args.seed)
    L, d, V, C, F = CFG["n_layer"], CFG["n_embd"], CFG["vocab_size"], CFG["n_positions"], CFG["n_inner"]
    shapes = {"wte.weight": (V, d), "wpe.weight": (C, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(L):
        p = f"h.{i}."
        shapes.update({p + "ln_1.weight": (d,), p + "ln_1.bias": (d,), p + "attn.c_attn.weight": (d, 3 * d),
                       p + "attn.c_attn.bias": (3 * d,), p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
                       p + "ln_2.weight": (d,), p + "ln_2.bias": (d,), p + "mlp.c_fc.weight": (d, F),
                       p + "mlp.c_fc.bias": (F,), p + "mlp.c_proj.weight": (F, d), p + "mlp.c_proj.bias": (d,)})
    names = sorted(shapes)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for n in names:
        nbytes = 4 * int(np.prod(shapes[n]))
        header[n] = {"dtype": "F32", "shape": list(shapes[n]), "data_offsets": [off, off + nbytes]}
        off += nbytes
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    path = os.path.join(args.dir, "model.safetensors")
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for n in names:
            shp = shapes[n]
            if n.endswith("ln_1.weight") or n.endswith("ln_2.weight") or n == "ln_f.weight":
                a = 1.0 + 0.1 * rng.standard_normal(shp)
            elif len(shp) == 1:
                a = 0.02 * rng.standard_normal(shp)
            else:
                a = 0.02 * rng.standard_normal(shp) if n != "wte.weight" else 0.1 * rng.standard_normal(shp)
            f.write(a.astype("<f4").tobytes())
    os.replace(path + ".tmp", path)
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
              "n_ctx": C, "n_positions": C, "n_embd": d, "n_head": CFG["n_head"], "n_layer": L, "n_inner": None,
              "vocab_size": V, "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "bos_token_id": 50256,
              "eos_token_id": 50256}
    with open(os.path.join(args.dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    ids = rng.randint(0, V, size=args.tokens).astype(np.int64)
    np.save(os.path.join(args.dir, "ids.npy"), ids)
    print(f"wrote {path} ({off / 1e6:.0f} MB) and ids.npy ({args.tokens} tokens)")


def read_safetensors(path):
    import torch
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data, dtype="<f4", count=(b - a) // 4, offset=base + a)
                                     .reshape(info["shape"]).copy())
    return out


def blas_core():
    import ctypes
    try:
        lib = ctypes.CDLL("libblas.so.3")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "unknown"


def run(args):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    with open(os.path.join(args.dir, "config.json")) as f:
        cfg = json.load(f)
    w = read_safetensors(os.path.join(args.dir, "model.safetensors"))
    ids = torch.from_numpy(np.load(os.path.join(args.dir, "ids.npy")))
    L, d, H = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
    dh = d // H
    T = ids.numel()
    W_E = w["wte.weight"]
    W_U = W_E.t()  # tied, as TransformerLens's W_U for GPT-2

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    def run_with_cache():
        x = W_E[ids] + w["wpe.weight"][:T]
        cache = [x]  # resid_pre.0, then resid_post.l
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        for l in range(L):
            p = f"h.{l}."
            h = F.layer_norm(x, (d,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = (t.view(T, H, dh).transpose(0, 1) for t in qkv.split(d, -1))
            s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
            att = torch.softmax(s.masked_fill(mask, float("-inf")), -1)
            z = (att @ v).transpose(0, 1).reshape(T, d)
            x = x + z @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h2 = F.layer_norm(x, (d,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
            x = x + gelu_new(h2 @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]) @ w[p + "mlp.c_proj.weight"] \
                + w[p + "mlp.c_proj.bias"]
            cache.append(x)
        return torch.stack(cache)  # accumulated_resid: [L + 1, T, d]

    def lens(resid):
        # ln_f recomputed on each layer's own residual (TransformerLens apply_ln_to_stack with recompute)
        normed = F.layer_norm(resid, (d,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
        n = normed.shape[0]
        nxt = ids[1:].unsqueeze(-1)
        out = {"entropy": [], "kl": [], "top_ids": [], "top_p": [], "ce": [], "rank": []}
        if args.mode == "stack":
            logits = normed @ W_U                                   # [n, T, V]
            lp = logits.log_softmax(-1)
            p = lp.exp()
            out["entropy"] = -(p * lp).sum(-1)
            out["kl"] = (p[-1] * (lp[-1] - lp)).sum(-1)
            tv, ti = lp.topk(args.top_k, -1)
            out["top_ids"], out["top_p"] = ti, tv.exp()
            out["ce"] = -lp[:, :-1].gather(-1, nxt.expand(n, -1, -1))
            zt = logits[:, :-1].gather(-1, nxt.expand(n, -1, -1))
            out["rank"] = (logits[:, :-1] > zt).sum(-1) + 1
            return {k: v for k, v in out.items()}
        final_lp = (normed[-1] @ W_U).log_softmax(-1)
        final_p = final_lp.exp()
        for l in range(n):
            logits = normed[l] @ W_U                                 # [T, V]
            lp = logits.log_softmax(-1)
            p = lp.exp()
            out["entropy"].append(-(p * lp).sum(-1))
            out["kl"].append((final_p * (final_lp - lp)).sum(-1))
            tv, ti = lp.topk(args.top_k, -1)
            out["top_ids"].append(ti)
            out["top_p"].append(tv.exp())
            out["ce"].append(-lp[:-1].gather(-1, nxt))
            zt = logits[:-1].gather(-1, nxt)
            out["rank"].append((logits[:-1] > zt).sum(-1) + 1)
        return {k: torch.stack(v) for k, v in out.items()}

    # Wall and CPU seconds (time.process_time: every thread of the process, user + system) per phase, best of
    # the repeats; on a shared machine the CPU time is the steadier measure of the work done.
    best_fwd = best_lens = cpu_fwd = cpu_lens = cpu_total = float("inf")
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        resid = run_with_cache()
        t1, c1 = time.perf_counter(), time.process_time()
        res = lens(resid)
        t2, c2 = time.perf_counter(), time.process_time()
        best_fwd, best_lens = min(best_fwd, t1 - t0), min(best_lens, t2 - t1)
        cpu_fwd, cpu_lens, cpu_total = min(cpu_fwd, c1 - c0), min(cpu_lens, c2 - c1), min(cpu_total, c2 - c0)
        del res
    res = lens(resid) if args.out else None
    flops = 2.0 * (L + 1) * T * d * W_E.shape[0]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"impl": "python-torch (TransformerLens style, mode=%s)" % args.mode, "threads": args.threads,
                      "blas_core": blas_core(), "torch": torch.__version__, "tokens": T, "layers": L + 1, "forward_s": best_fwd,
                      "lens_s": best_lens, "total_s": best_fwd + best_lens,
                      "cpu_forward_s": cpu_fwd, "cpu_lens_s": cpu_lens, "cpu_total_s": cpu_total, "lens_gflops": flops / best_lens / 1e9,
                      "peak_rss_mb": peak_mb}))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        np.save(os.path.join(args.out, "baseline_entropy.npy"), res["entropy"].numpy())
        np.save(os.path.join(args.out, "baseline_kl.npy"), res["kl"].numpy())
        np.save(os.path.join(args.out, "baseline_top_ids.npy"), res["top_ids"].numpy())
        np.save(os.path.join(args.out, "baseline_top_p.npy"), res["top_p"].numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--seed", type=int, default=20240605)
    m.add_argument("--tokens", type=int, default=1024)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--threads", type=int, default=os.cpu_count())
    r.add_argument("--repeat", type=int, default=2)
    r.add_argument("--top-k", type=int, default=10)
    r.add_argument("--mode", choices=["layer", "stack"], default="layer")
    r.add_argument("--out", default="")
    args = ap.parse_args()
    make(args) if args.cmd == "make" else run(args)


if __name__ == "__main__":
    sys.exit(main())
