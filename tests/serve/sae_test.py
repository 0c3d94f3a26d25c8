#!/usr/bin/env python3
"""`vocablens serve MODEL --sae PATH --corpus FILE` on the gpt2-tiny fixture: the SAE's feature pages and the
top activations of a neuron and of a feature over a corpus.

1. POST /api/sae/features and /api/sae/lens answer exactly what `vocablens features MODEL --sae PATH
   [--prompt ...] --format json` prints (a separate process; command_line and created_utc removed).
2. POST /api/top_activations against an independent float64 NumPy reference: the GPT-2 forward of
   tests/python/gpt2_numpy.py over the same windows of the corpus (its ids from `vocablens tokenize`), the
   neuron read at blocks.1.mlp.hook_post, the feature encoded from the SAE's own file by the standard SAE's
   definition (relu((x - b_dec) W_enc + b_enc)); the k largest: the same (window, position) and values
   within 1e-4 (the model runs in float32).
3. --corpus-run DIR (or `serve MODEL DIR`) takes the corpus a `lens --corpus` run read; bad requests are 4xx with one line; a
   server without --sae answers 404 for the SAE's routes.

    VOCABLENS_CLI=build/vocablens python3 tests/serve/sae_test.py [FIXTURES_DIR]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures", "sae"))
from vlserve import VocablensServer  # noqa: E402
from api_test import check, cli_json, comparable, first_difference, failures  # noqa: E402
import gpt2_numpy  # noqa: E402
import make_saes  # noqa: E402

CLI = os.environ.get("VOCABLENS_CLI", "")
FIXTURES = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
    "VOCABLENS_FIXTURES", os.path.join(HERE, "..", "..", "..", "shared", "fixtures"))
MODEL = os.path.join(FIXTURES, "gpt2-tiny")
PROMPT = "The Eiffel Tower is in the city of"
CORPUS_TOKENS, WINDOW = 300, 64
CORPUS = "\n".join([
    "The Eiffel Tower is in Paris, the capital of France. Rome is the capital of Italy.",
    "Berlin has a famous gate; Madrid has a famous museum. Every city has a river or a hill.",
    "In 1889 the tower opened for the World's Fair, and millions of people have climbed it since then.",
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!",
    "def add(a, b):\n    return a + b  # numbers, brackets [1, 2, 3] and {\"key\": \"value\"}",
    "Water boils at 100 degrees Celsius at sea level; ice melts at 0 degrees.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "A neuron in a transformer reads the residual stream and writes back to it after a nonlinearity.",
] * 3)


def reference_top(values, k):
    """values: [(activation, window, position)] -> the k largest, ties in corpus order."""
    return sorted(values, key=lambda v: (-v[0], v[1], v[2]))[:k]


def compare_top(api, ref, what):
    got = [(h["activation"], h["window"], h["position"]) for h in api["top"]]
    same_pos = [g[1:] for g in got] == [r[1:] for r in ref]
    err = max((abs(g[0] - r[0]) for g, r in zip(got, ref)), default=0.0)
    check(len(got) == len(ref) and same_pos and err <= 1e-4,
          f"{what}: the {len(ref)} largest = the NumPy float64 reference's (max |diff| {err:.2e}); "
          f"first {got[:1]} vs {ref[:1]}")


def main():
    if not CLI or not os.path.exists(CLI):
        print("FAIL: VOCABLENS_CLI does not name the built vocablens binary")
        return 1
    if not os.path.isdir(MODEL):
        print(f"FAIL: fixture missing: {MODEL}")
        return 1
    tmp = tempfile.mkdtemp(prefix="vlserve-sae-")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "fixtures", "sae", "make_saes.py"), os.path.join(tmp, "saes"), MODEL],
                   check=True, capture_output=True)
    sae = os.path.join(tmp, "saes", "saelens_standard")
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write(CORPUS + "\n")
    extra = ["--sae", sae, "--corpus", corpus, "--corpus-tokens", str(CORPUS_TOKENS), "--window", str(WINDOW)]
    with VocablensServer(CLI, [MODEL], extra) as s:
        st, info = s.get("/api/model")
        check(st == 200 and info["sae"]["d_sae"] == 96 and info["sae"]["hook_name"] == "blocks.1.hook_resid_pre",
              f"GET /api/model names the SAE: {info.get('sae')}")
        check(info["corpus"] and info["corpus"]["windows"] == (CORPUS_TOKENS + WINDOW - 1) // WINDOW,
              f"GET /api/model names the corpus and its windows: {info.get('corpus')}")

        # 1. The SAE's routes = the features command.
        for path, body, args in [
            ("/api/sae/features", {"features": [0, 5], "top_k": 5}, ["--features", "0,5", "--top-k", "5"]),
            ("/api/sae/features", {"features": "3-4", "top_k": 4, "bottom": False}, ["--features", "3-4", "--top-k", "4", "--no-bottom"]),
            ("/api/sae/lens", {"prompt": PROMPT, "top_features": 3, "top_k": 3},
             ["--prompt", PROMPT, "--top-features", "3", "--top-k", "3"]),
            # the declared analyses, with {"sae": true} = the server's SAE
            ("/api/feature_logits", {"sae": True, "features": [0, 5], "top_k": 5}, ["--features", "0,5", "--top-k", "5"]),
            ("/api/feature_lens", {"sae": True, "prompt": PROMPT, "top_features": 3, "top_k": 3},
             ["--prompt", PROMPT, "--top-features", "3", "--top-k", "3"]),
        ]:
            st, api = s.post(path, body)
            if not check(st == 200, f"POST {path} {json.dumps(body)} -> 200 (got {st}: {str(api)[:200]})"):
                continue
            ref = cli_json(["features", MODEL, "--sae", sae, *args, "--format", "json"])
            d = first_difference(comparable(api), comparable(ref))
            check(d is None, f"POST {path} == vocablens features ... {' '.join(args[:2])} --format json"
                  + (f" (first difference {d})" if d else ""))

        # 2. Top activations against NumPy.
        ids = cli_json(["tokenize", MODEL, CORPUS + "\n", "--json"])["ids"][:CORPUS_TOKENS]
        windows = [ids[i:i + WINDOW] for i in range(0, len(ids), WINDOW)]
        m = gpt2_numpy.load(MODEL)
        acts = [gpt2_numpy.forward(m, w) for w in windows]
        layer, neuron, k = 1, 7, 10
        st, api = s.post("/api/top_activations", {"unit": "neuron", "layer": layer, "index": neuron, "k": k})
        if check(st == 200 and api["tokens"] == len(ids), f"POST /api/top_activations neuron L{layer}N{neuron} -> 200 (got {st})"):
            vals = [(a[f"blocks.{layer}.mlp.hook_post"][t, neuron], w, t) for w, a in enumerate(acts) for t in range(len(windows[w]))]
            compare_top(api, reference_top(vals, k), f"neuron L{layer}N{neuron}")
            h = api["top"][0]
            check(h["context"][h["focus"]] == h["token"] and h["token_id"] == windows[h["window"]][h["position"]],
                  "a hit's context holds its token at `focus`, its id is the corpus's")
        p = make_saes.read_safetensors(os.path.join(sae, "sae_weights.safetensors"))
        feats = [np.maximum((a["blocks.1.hook_resid_pre"] - p["b_dec"]) @ p["W_enc"] + p["b_enc"], 0) for a in acts]
        f = int(np.argmax(sum(x.sum(0) for x in feats)))
        st, api = s.post("/api/top_activations", {"unit": "feature", "index": f, "k": k})
        if check(st == 200, f"POST /api/top_activations feature {f} -> 200 (got {st})"):
            vals = [(x[t, f], w, t) for w, x in enumerate(feats) for t in range(x.shape[0])]
            compare_top(api, reference_top(vals, k), f"SAE feature {f}")
        _, h1, b1 = s.request("POST", "/api/top_activations", {"unit": "feature", "index": f, "k": k})
        check(h1.get("X-Vocablens-Cache") == "hit", "the same top activations again: from the cache")

        # 3. Bad requests: 4xx, one line.
        for path, body, want, words in [
            ("/api/sae/features", {"features": [96]}, 400, "features"),
            ("/api/sae/features", {"features": [0], "top_k": 1e9}, 400, "top_k"),
            ("/api/sae/features", {"features": "0-100000"}, 400, "feature"),
            ("/api/sae/features", {"featurez": [0]}, 400, "unknown option"),
            ("/api/sae/lens", {"prompt": ""}, 400, "prompt"),
            ("/api/sae/lens", {"prompt": "x", "top_features": 10 ** 9}, 400, "top_features"),
            ("/api/top_activations", {"unit": "neuron", "layer": 9, "index": 0}, 400, "layer"),
            ("/api/top_activations", {"unit": "neuron", "layer": 0, "index": 10 ** 9}, 400, "index"),
            ("/api/top_activations", {"unit": "head", "index": 0}, 400, "unit"),
            ("/api/top_activations", {"unit": 5, "index": 0}, 400, "unit"),
            ("/api/top_activations", {"unit": "neuron", "layer": 0, "index": 1.5}, 400, "index"),
            ("/api/top_activations", {"unit": "feature", "index": 0, "k": 10 ** 9}, 400, "k"),
            ("/api/feature_logits", {"sae": "/etc/passwd"}, 400, "sae"),  # a path: a file on the server
            ("/api/feature_corpus", {"sae": True, "path": "/etc/passwd"}, 400, "path"),
        ]:
            st, err = s.post(path, body)
            msg = err.get("error", "")
            check(st == want and words in msg and "\n" not in msg, f"POST {path} {json.dumps(body)[:60]} -> {st} {msg[:120]!r}")
        check(s.alive(), "the server is alive after all of it")

    # --corpus-run: the corpus a `lens --corpus` run read; no --sae: the SAE's routes are 404.
    run = os.path.join(tmp, "run")
    subprocess.run([CLI, "lens", MODEL, "--corpus", corpus, "--out", run], check=True, capture_output=True)
    with VocablensServer(CLI, [MODEL], ["--corpus-run", run, "--corpus-tokens", "100"]) as s:
        st, info = s.get("/api/model")
        check(st == 200 and info["corpus"] and os.path.samefile(info["corpus"]["path"], corpus),
              f"--corpus-run: the run's corpus ({info.get('corpus')})")
    # MODEL RUN_DIR: the run is browsed beside the model and, being a `lens --corpus` run, gives the corpus.
    with VocablensServer(CLI, [MODEL, run], ["--corpus-tokens", "100"]) as s:
        st, info = s.get("/api/model")
        check(st == 200 and info["sae"] is None and info["corpus"] and os.path.samefile(info["corpus"]["path"], corpus),
              f"serve MODEL RUN_DIR: the run's corpus ({info.get('corpus')})")
        st, runs = s.get("/api/runs")
        check(st == 200 and runs["mode"] == "model" and runs["runs"][0]["results"][0]["kind"] == "logit_lens_corpus",
              "serve MODEL RUN_DIR: the run is browsed beside the model")
        st, api = s.post("/api/top_activations", {"unit": "neuron", "layer": 0, "index": 1, "k": 3})
        check(st == 200 and len(api["top"]) == 3 and api["tokens"] == 100, f"--corpus-run: top activations -> {st}")
        st, err = s.post("/api/sae/features", {"features": [0]})
        check(st == 404 and "--sae" in err.get("error", ""), f"no --sae: POST /api/sae/features -> 404 (got {st})")
        st, err = s.post("/api/top_activations", {"unit": "feature", "index": 0})
        check(st == 404 and "--sae" in err.get("error", ""), f"no --sae: a feature's top activations -> 404 (got {st})")
    r = subprocess.run([CLI, "serve", MODEL, "--sae", os.path.join(tmp, "saes", "bad_din"), "--port", "0"],
                       capture_output=True, timeout=120)
    err = r.stderr.decode().strip()
    check(r.returncode != 0 and err.count("\n") == 0 and "d_in" in err, f"--sae with the wrong width: one line, exit {r.returncode}: {err[:120]}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
