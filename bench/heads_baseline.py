#!/usr/bin/python3
"""Baseline for bench_heads: materialise one head's V×V vocabulary circuit in torch and call topk.

This is what Dar et al.'s released code effectively does per head (they additionally bisect a threshold):
M = A @ B with A [V, d_head], B [d_head, V] (10 GB of float32 for GPT-2's V = 50257), then topk over M.
topk is taken row-wise first (M.topk(k, dim=1): V·k candidates) and then over those candidates, which is
exact and needs no more memory than M itself; --flat calls torch.topk on the flattened 2.5e9-element
matrix instead, which allocates several times M's size (std::bad_alloc on a 23 GB machine).

    /usr/bin/python3 bench/heads_baseline.py                 # V = 50257, d_head = 64, k = 100, full V×V
    /usr/bin/python3 bench/heads_baseline.py --rows 8192     # only 8192 rows of M (extrapolated), for small machines

Runs with Debian's python3-torch (torch 1.13). Prints "key: value" lines like bench_heads, and with
--json FILE writes them as JSON. Peak RSS is the process's ru_maxrss.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--d-head", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=100)
    ap.add_argument("--rows", type=int, default=0, help="materialise only this many rows and extrapolate (0 = all)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--flat", action="store_true", help="torch.topk over the flattened matrix")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    out = {}

    def report(k, v):
        out[k] = v
        print(f"{k}: {json.dumps(v)}", flush=True)

    V, r, k = a.vocab, a.d_head, a.top_k
    rows = a.rows if a.rows > 0 else V
    report("torch_version", torch.__version__)
    report("threads", torch.get_num_threads())
    report("shape", f"V={V} d_head={r} top_k={k} rows={rows}")
    report("topk_mode", "flat" if a.flat else "rowwise")
    A = torch.randn(V, r)
    B = torch.randn(r, V)
    with torch.no_grad():
        t0 = time.perf_counter()
        M = A[:rows] @ B  # [rows, V] float32
        t1 = time.perf_counter()
        if a.flat:
            vals, idx = torch.topk(M.flatten(), k)
        else:
            rv, ri = M.topk(k, dim=1)  # [rows, k]
            cv, ci = torch.topk(rv.flatten(), k)
            vals = cv
            idx = (ci // k) * V + ri.flatten()[ci]
        t2 = time.perf_counter()
    scale = V / rows
    report("materialise_seconds", (t1 - t0) * scale)
    report("topk_seconds", (t2 - t1) * scale)
    report("total_seconds", (t2 - t0) * scale)
    report("extrapolated", rows < V)
    report("effective_gflops", 2.0 * V * V * r / ((t2 - t0) * scale) / 1e9)
    report("best", [int(idx[0]) // V, int(idx[0]) % V, float(vals[0])])
    report("peak_rss_mb", peak_rss_mb())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
