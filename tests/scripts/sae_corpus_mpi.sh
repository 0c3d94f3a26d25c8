#!/usr/bin/env bash
# sae_corpus_mpi.sh VOCABLENS SOURCE FIXTURES — see sae_corpus_mpi.cmake.
set -euo pipefail
B=$1; S=$2; F=$3; M=$F/gpt2-tiny
W=$(mktemp -d /tmp/vocablens-sae-mpi-XXXXXX); trap 'rm -rf "$W"' EXIT
MPI=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
/usr/bin/python3 "$S/tests/fixtures/sae/make_saes.py" "$W/saes" "$M" > /dev/null
head -c 6000 "$S/README.md" > "$W/corpus.txt"
ARGS=(features "$M" --sae "$W/saes/saelens_jumprelu" --corpus "$W/corpus.txt" --window 32 --contexts 3)
"$B" "${ARGS[@]}" --out "$W/one" > /dev/null
"${MPI[@]}" "$B" "${ARGS[@]}" --out "$W/two" > /dev/null
/usr/bin/python3 - "$W" <<'PY'
import json, sys, glob, os
import numpy as np
w = sys.argv[1]
one, two = (json.load(open(f"{w}/{d}/feature_corpus.json")) for d in ("one", "two"))
assert two["settings"].get("ranks") == 2, two["settings"]
assert one["summary"] == two["summary"], "2 ranks differ from 1 (summary)"
assert one["summary"]["metrics"]["windows"] > 8
names = sorted(os.path.basename(p) for p in glob.glob(f"{w}/one/*.npy"))
assert len(names) >= 10, names
for n in names:
    a, b = np.load(f"{w}/one/{n}"), np.load(f"{w}/two/{n}")
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), n
print(f"feature corpus: {len(names)} arrays and every metric identical with 1 and 2 ranks "
      f"({one['summary']['metrics']['windows']} windows)")
PY
