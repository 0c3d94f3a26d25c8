#!/usr/bin/env python3
"""Baselines and checks for the embedding-geometry benchmark (driven by bench/run_geometry_bench.sh).

  geometry_baseline.py svd DIR [--threads N]       torch.linalg.svd / svdvals of DIR/E.npy; compares the
                                                   top-k with DIR/sv.npy (vocablens)
  geometry_baseline.py knn-torch DIR [--threads N] blocked torch.mm + topk k-NN on DIR/U.npy (reference
                                                   only; float32 scores, ties arbitrary)
  geometry_baseline.py compare DIR                 vocablens knn_indices.npy vs faiss_indices.npy: identical
                                                   rows, and for every differing row whether the difference
                                                   is a float32-level near-tie (exact float64 cosines)

Prints one JSON object per command. Needs python3-numpy and python3-torch (Debian).
"""
import argparse
import json
import time

import numpy as np


def cmd_svd(a):
    import torch
    torch.set_num_threads(a.threads)
    E = torch.from_numpy(np.load(f"{a.dir}/E.npy"))
    ours = np.load(f"{a.dir}/sv.npy")
    k = len(ours)
    t, c = time.perf_counter(), time.process_time()
    S_vals = torch.linalg.svdvals(E)
    t_vals, c_vals = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    U, S, Vh = torch.linalg.svd(E, full_matrices=False)
    t_svd, c_svd = time.perf_counter() - t, time.process_time() - c
    # float64 reference for the accuracy check (values only)
    # (computed once per data directory and kept as sv64.npy; E is regenerated identically from its seed)
    t_64 = rel_ours = rel_torch32 = None
    S64 = None
    try:
        S64 = np.load(f"{a.dir}/sv64.npy")
    except FileNotFoundError:
        if not a.no_f64:
            t = time.perf_counter()
            S64 = torch.linalg.svdvals(E.double()).numpy()
            t_64 = time.perf_counter() - t
            np.save(f"{a.dir}/sv64.npy", S64)
    if S64 is not None:
        rel_ours = float(np.max(np.abs(ours - S64[:k]) / S64[:k]))
        rel_torch32 = float(np.max(np.abs(S.numpy()[:k].astype(np.float64) - S64[:k]) / S64[:k]))
    print(json.dumps({
        "torch_threads": torch.get_num_threads(),
        "torch_linalg_svd_f32_full_matrices_false_s": t_svd,
        "torch_linalg_svd_f32_full_matrices_false_cpu_s": c_svd,
        "torch_linalg_svdvals_f32_s": t_vals,
        "torch_linalg_svdvals_f32_cpu_s": c_vals,
        "torch_linalg_svdvals_f64_s": t_64,
        "k": k,
        "max_rel_err_vocablens_vs_f64_svd": rel_ours,
        "max_rel_err_torch_f32_svd_vs_f64_svd": rel_torch32,
        "note": "full_matrices=True would need U of 50257^2 floats (10.1 GB) and is not run",
    }, indent=2))


def cmd_knn_torch(a):
    import torch
    torch.set_num_threads(a.threads)
    U = torch.from_numpy(np.load(f"{a.dir}/U.npy"))
    n, k, B = U.shape[0], a.k, 1024
    t, c = time.perf_counter(), time.process_time()
    out = torch.empty((n, k), dtype=torch.long)
    for i0 in range(0, n, B):
        S = U[i0:i0 + B] @ U.T
        idx = torch.arange(i0, min(i0 + B, n))
        S[idx - i0, idx] = -float("inf")
        out[i0:i0 + B] = torch.topk(S, k, dim=1).indices
    sec, cpu = time.perf_counter() - t, time.process_time() - c
    np.save(f"{a.dir}/torch_indices.npy", out.numpy())
    print(json.dumps({"torch_knn_seconds": sec, "torch_knn_cpu_seconds": cpu, "torch_threads": torch.get_num_threads()}, indent=2))


def cmd_compare(a):
    E = np.load(f"{a.dir}/E.npy", mmap_mode="r")
    ours = np.load(f"{a.dir}/knn_indices.npy")
    ours_s = np.load(f"{a.dir}/knn_scores.npy")
    res = {}
    for name in ("faiss", "torch"):
        try:
            other = np.load(f"{a.dir}/{name}_indices.npy")
        except FileNotFoundError:
            continue
        n, k = ours.shape
        same_order = np.all(ours == other, axis=1)
        same_set = np.array([set(ours[i]) == set(other[i]) for i in range(n)])
        diff_rows = np.nonzero(~same_order)[0]
        # For differing rows: float64 cosines of the other list, rank by rank against ours. A difference
        # that is a float32 near-tie shows as a tiny rank-wise cosine difference.
        worst = 0.0
        ours_better_or_equal = 0
        examples = []
        for i in diff_rows:
            x = np.asarray(E[i], dtype=np.float64)
            nx = np.linalg.norm(x)
            def cos(j):
                y = np.asarray(E[j], dtype=np.float64)
                return float(x @ y / (nx * np.linalg.norm(y)))
            theirs = np.array([cos(j) for j in other[i]])
            mine = ours_s[i]
            gap = float(np.max(np.abs(theirs - mine)))
            worst = max(worst, gap)
            ours_better_or_equal += int(np.sum(mine) >= np.sum(theirs) - 1e-15)
            if len(examples) < 10:
                examples.append({"row": int(i), "vocablens": ours[i].tolist(), name: other[i].tolist(),
                                 "max_rankwise_cosine_difference": gap})
        res[name] = {
            "rows": int(n), "k": int(k),
            "rows_identical_in_order": int(same_order.sum()),
            "rows_identical_as_sets": int(same_set.sum()),
            "rows_differing": int(len(diff_rows)),
            "max_rankwise_float64_cosine_difference_in_differing_rows": worst,
            "differing_rows_where_vocablens_list_scores_at_least_as_high": ours_better_or_equal,
            "examples": examples,
        }
    print(json.dumps(res, indent=2))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("svd")
    s.add_argument("dir")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--no-f64", action="store_true", help="skip the float64 accuracy reference")
    s = sub.add_parser("knn-torch")
    s.add_argument("dir")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--k", type=int, default=10)
    s = sub.add_parser("compare")
    s.add_argument("dir")
    a = p.parse_args()
    {"svd": cmd_svd, "knn-torch": cmd_knn_torch, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
