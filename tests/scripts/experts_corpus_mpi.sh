#!/usr/bin/env bash
# experts_corpus_mpi.sh VOCABLENS SOURCE — see experts_corpus_mpi.cmake.
set -euo pipefail
B=$1; S=$2; M=$S/tests/fixtures/families/mixtral
W=$(mktemp -d /tmp/vocablens-experts-mpi-XXXXXX); trap 'rm -rf "$W"' EXIT
MPI=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
head -c 8000 "$S/docs/examples/my.txt" > "$W/corpus.txt"
ARGS=(experts "$M" --corpus "$W/corpus.txt" --window 64 --top-k 5 --top-routed 5 --format json)
"$B" "${ARGS[@]}" --out "$W/one" > /dev/null
"${MPI[@]}" "$B" "${ARGS[@]}" --out "$W/two" > "$W/two.stdout"
/usr/bin/python3 - "$W" <<'PY'
import json, sys, math
import numpy as np
w = sys.argv[1]
one, two = (json.load(open(f"{w}/{d}/experts.json")) for d in ("one", "two"))
assert two["settings"].get("ranks") == 2, two["settings"]
assert "ranks" not in one["settings"], one["settings"]
# rank 0 alone reports: one JSON document on stdout, not two
assert open(f"{w}/two.stdout").read().count('"summary"') == 1
s1, s2 = one["summary"], two["summary"]
assert s1["positions"] == s2["positions"] > 5000, (s1["positions"], s2["positions"])
exact = ("expert", "routed", "load", "routed_tokens", "writes_top", "writes_bottom")
n = 0
for l1, l2 in zip(s1["layers"], s2["layers"], strict=True):
    assert l1["layer"] == l2["layer"]
    for e1, e2 in zip(l1["experts"], l2["experts"], strict=True):
        for k in exact:
            assert e1[k] == e2[k], (l1["layer"], e1["expert"], k, e1[k], e2[k])
        assert math.isclose(e1["mean_weight"], e2["mean_weight"], rel_tol=1e-12), (e1, e2)
        n += 1
assert n == 16 and sum(e["routed"] for e in s1["layers"][0]["experts"]) == 2 * s1["positions"]
for f in ("experts.load.npy", "experts.mean_weight.npy"):
    a, b = np.load(f"{w}/one/{f}"), np.load(f"{w}/two/{f}")
    assert a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=0), f
load = np.load(f"{w}/one/experts.load.npy")
assert np.allclose(load.sum(axis=1), 2.0), load  # top 2 of 8: each position counted twice per layer
print(f"experts over {s1['positions']} positions: {n} experts' loads, routed and written tokens identical with 1 and "
      "2 ranks; mean weights within 1e-12")
PY
