#!/usr/bin/python3
"""`vocablens serve`'s answer time for the lens of a TOKENS-token prompt (bench/run_serve_bench.sh).

    serve_bench.py VOCABLENS_CLI MODEL_DIR [REPEATS=10] [TOKENS=64]

Starts the server on 127.0.0.1 and a free port, sends POST /api/lens {"prompt": ids, "top_k": 10} with the
prompts bench/bench_serve.cpp runs in-process (a new one each time, so the cache never answers), times each
answer end to end (request, analysis, JSON, transfer, parsing), then the same prompt again (a cached click).
Prints one JSON line of medians in milliseconds.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
from vlserve import VocablensServer  # noqa: E402


def main():
    cli, model = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    T = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    with open(os.path.join(model, "config.json")) as f:
        V = json.load(f)["vocab_size"]
    with VocablensServer(cli, [model]) as s:
        times, cached = [], []
        for r in range(-1, reps):
            ids = [(1000 + T * (r + 1) + i) % V for i in range(T)]
            t0 = time.perf_counter()
            st, doc = s.post("/api/lens", {"prompt": ids, "top_k": 10})
            t1 = time.perf_counter()
            assert st == 200 and doc["summary"]["n_tokens"] == T, (st, str(doc)[:200])
            s.post("/api/lens", {"prompt": ids, "top_k": 10})
            t2 = time.perf_counter()
            if r >= 0:
                times.append((t1 - t0) * 1e3)
                cached.append((t2 - t1) * 1e3)
    times.sort()
    cached.sort()
    print(json.dumps({"tokens": T, "repeats": reps, "api_ms": round(times[len(times) // 2], 2),
                      "api_cached_ms": round(cached[len(cached) // 2], 2)}))


if __name__ == "__main__":
    main()
