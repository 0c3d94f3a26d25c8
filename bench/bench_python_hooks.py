#!/usr/bin/python3
"""Cost of Python hooks and of caching every point, on the GPT-2-small shape (12 layers, d_model 768, 12
heads, d_mlp 3072, vocabulary 50257) with random weights, at T tokens (docs/benchmarks.md, "Python hooks").

Process CPU time per call (median of ROUNDS), one thread:
  forward                      model.forward(ids)
  one no-op hook               run_with_hooks with fn(act, hook): return None at blocks.6.hook_resid_pre
  no-op hook at every block    the same at blocks.L.hook_resid_pre for every L (12 Python calls)
  no-op hook at every point    a filter matching every hook point except hook_result (14 per block + 3)
  run_with_cache, residual     names_filter: resid_pre/mid/post, attn_out, mlp_out (the forward's own tensors)
  run_with_cache, every point  all 17 kinds (hook_result included: per-head outputs are computed for it)

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_python_hooks.py [T=256] [ROUNDS=5]
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import time

import numpy as np
import torch

import vocablens

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "..", "shared", "fixtures", "gpt2-tiny")


def write_gpt2_small(path, seed=0):
    """A GPT-2-small-shaped Hugging Face directory with random N(0, 0.02) weights (tokenizer from gpt2-tiny)."""
    L, d, V, n_ctx, d_mlp = 12, 768, 50257, 1024, 3072
    rng = np.random.default_rng(seed)
    shapes = {"wte.weight": (V, d), "wpe.weight": (n_ctx, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for l in range(L):
        p = "h.%d." % l
        shapes.update({p + "ln_1.weight": (d,), p + "ln_1.bias": (d,), p + "attn.c_attn.weight": (d, 3 * d),
                       p + "attn.c_attn.bias": (3 * d,), p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
                       p + "ln_2.weight": (d,), p + "ln_2.bias": (d,), p + "mlp.c_fc.weight": (d, d_mlp),
                       p + "mlp.c_fc.bias": (d_mlp,), p + "mlp.c_proj.weight": (d_mlp, d), p + "mlp.c_proj.bias": (d,)})
    header, off = {}, 0
    for name in sorted(shapes):
        n = int(np.prod(shapes[name])) * 4
        header[name] = {"dtype": "F32", "shape": list(shapes[name]), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(path, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name in sorted(shapes):
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                a = np.ones(shapes[name], np.float32)
            else:
                a = rng.normal(0, 0.02, shapes[name]).astype(np.float32)
            f.write(a.tobytes())
    with open(os.path.join(TINY, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(n_layer=L, n_embd=d, n_head=12, n_ctx=n_ctx, n_positions=n_ctx)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    for t in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(TINY, t), path)


def cpu_median(f, rounds):
    f()  # warm-up
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        f()
        times.append(time.process_time() - t0)
    return sorted(times)[len(times) // 2]


def main():
    T = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="vocablens-gpt2small-")
    try:
        write_gpt2_small(tmp)
        m = vocablens.load_model(tmp)
        ids = torch.from_numpy(np.random.default_rng(1).integers(0, 50257, T)).unsqueeze(0)
        noop = lambda act, hook: None  # noqa: E731
        every_block = [("blocks.%d.hook_resid_pre" % l, noop) for l in range(12)]
        every_point = [(lambda n: not n.endswith("hook_result"), noop)]
        residual = lambda n: n.split(".")[-1] in ("hook_resid_pre", "hook_resid_mid", "hook_resid_post",  # noqa: E731
                                                   "hook_attn_out", "hook_mlp_out")
        cases = [
            ("forward", lambda: m.forward(ids)),
            ("one no-op hook", lambda: m.run_with_hooks(ids, fwd_hooks=[("blocks.6.hook_resid_pre", noop)])),
            ("no-op hook at every block (12)", lambda: m.run_with_hooks(ids, fwd_hooks=every_block)),
            ("no-op hook at every point (171)", lambda: m.run_with_hooks(ids, fwd_hooks=every_point)),
            ("run_with_cache, residual (60)", lambda: m.run_with_cache(ids, names_filter=residual)),
            ("run_with_cache, every point (183)", lambda: m.run_with_cache(ids)),
        ]
        base = None
        print("| case (GPT-2-small shape, T = %d, 1 thread) | CPU s per call | ratio |" % T)
        print("| --- | ---: | ---: |")
        for name, f in cases:
            t = cpu_median(f, rounds)
            base = base or t
            print("| %s | %.3f | ×%.3f |" % (name, t, t / base))
            sys.stdout.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
