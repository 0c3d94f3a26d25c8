#!/usr/bin/python3
"""The default torch.linalg.svd(E) (full_matrices=True: U is V x V, 10 GB for GPT-2) on the E.npy that
bench/run_geometry_bench.sh writes. Usage: /usr/bin/python3 bench/svd_full_baseline.py THREADS OUT_DIR/E.npy"""
import sys, time, resource, numpy as np, torch
torch.set_num_threads(int(sys.argv[1]))
E = torch.from_numpy(np.load(sys.argv[2] if len(sys.argv) > 2 else "E.npy"))
t = time.perf_counter(); c0 = time.process_time()
U, S, Vh = torch.linalg.svd(E)   # the default: full_matrices=True
print(f"threads {sys.argv[1]} torch.linalg.svd(E) full_matrices=True: {time.perf_counter()-t:.2f} s wall, {time.process_time()-c0:.2f} s CPU, U {tuple(U.shape)}, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB")
