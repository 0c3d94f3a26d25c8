#!/usr/bin/python3
"""`vocablens serve`'s answer time for the lens of a TOKENS-token prompt (bench/run_serve_bench.sh).

    serve_bench.py VOCABLENS_CLI MODEL_DIR [REPEATS=10] [TOKENS=64]

Starts the server on 127.0.0.1 and a free port, sends POST /api/lens {"prompt": ids, "top_k": 10} with the
prompts bench/bench_serve.cpp runs in-process (a new one each time, so the cache never answers), times each
answer end to end (request, analysis, JSON, transfer, parsing), then the same prompt again (a reload: the cached
answer), then a click on the last position's top cell as the page does it (its top-k is read from the lens answer
already in the page; the one request is POST /api/attribute for that token at that position: it replays the
lens's kept forward pass, X-Vocablens-Forward: replayed), and that click again (the cached answer). The same click
on a prompt whose lens was never asked (a new prompt each time, before its lens) runs its own forward pass
(X-Vocablens-Forward: computed): the uncached click. Prints one JSON line of medians in milliseconds.
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
        times, cached, click, click_again, click_uncached = [], [], [], [], []
        for r in range(-1, reps):
            ids = [(1000 + T * (r + 1) + i) % V for i in range(T)]
            # The uncached click: a prompt no lens has run (its ids are never asked again), same target and position.
            fresh = [(7 + 31 * (r + 2) + 3 * i) % V for i in range(T)]
            tu = time.perf_counter()
            st, h, _ = s.request("POST", "/api/attribute", {"prompt": fresh, "target": 11, "position": T - 1})
            uncached_ms = (time.perf_counter() - tu) * 1e3
            assert st == 200 and h.get("X-Vocablens-Forward") == "computed", (st, h)
            t0 = time.perf_counter()
            st, doc = s.post("/api/lens", {"prompt": ids, "top_k": 10})
            t1 = time.perf_counter()
            assert st == 200 and doc["summary"]["n_tokens"] == T, (st, str(doc)[:200])
            s.post("/api/lens", {"prompt": ids, "top_k": 10})
            t2 = time.perf_counter()
            target = doc["arrays"]["top_ids"]["data"][-1][T - 1][0]
            body = {"prompt": ids, "target": target, "position": T - 1}
            st, h, att = s.request("POST", "/api/attribute", body)
            t3 = time.perf_counter()
            assert st == 200 and h.get("X-Vocablens-Forward") == "replayed", (st, h, att[:200])
            s.post("/api/attribute", body)
            t4 = time.perf_counter()
            if r >= 0:
                times.append((t1 - t0) * 1e3)
                cached.append((t2 - t1) * 1e3)
                click.append((t3 - t2) * 1e3)
                click_again.append((t4 - t3) * 1e3)
                click_uncached.append(uncached_ms)
    med = lambda xs: round(sorted(xs)[len(xs) // 2], 2)  # noqa: E731
    print(json.dumps({"tokens": T, "repeats": reps, "api_ms": med(times), "api_cached_ms": med(cached),
                      "cell_click_uncached_ms": med(click_uncached), "cell_click_ms": med(click),
                      "cell_click_again_ms": med(click_again)}))


if __name__ == "__main__":
    main()
