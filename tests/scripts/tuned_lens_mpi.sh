#!/usr/bin/env bash
# tuned_lens_mpi.sh VOCABLENS FIXTURES — see tuned_lens_mpi.cmake.
set -euo pipefail
B=$1; F=$2; M=$F/stories260K/stories260K.bin
W=$(mktemp -d /tmp/vocablens-mpi-XXXXXX); trap 'rm -rf "$W"' EXIT
MPI=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPI+=(--allow-run-as-root)
"$B" tuned-lens sample "$M" --tokens 3000 --seed 3 --max-len 64 --out "$W/corpus.txt"
"$B" lens "$M" --corpus "$W/corpus.txt" --window 64 --format json > "$W/one.json"
"${MPI[@]}" "$B" lens "$M" --corpus "$W/corpus.txt" --window 64 --format json > "$W/two.json"
"$B" tuned-lens train "$M" --corpus "$W/corpus.txt" --out "$W/t1" --window 64 --tokens-per-step 1024 --steps 8 --quiet
"${MPI[@]}" "$B" tuned-lens train "$M" --corpus "$W/corpus.txt" --out "$W/t2" --window 64 --tokens-per-step 1024 --steps 8 --quiet
/usr/bin/python3 - "$W" <<'PY'
import json, struct, sys
import numpy as np
w = sys.argv[1]

# The translators as written beside params.pt (tuned_lens.safetensors: the same tensors, saved by the same
# call, src/train/tuned_lens_io.cpp), read with NumPy: importing torch for params.pt took more CPU than the
# comparison (tuned_lens_test checks that torch.load reads params.pt and that it matches).
def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(t["shape"])
    return out

one, two = json.load(open(w + "/one.json")), json.load(open(w + "/two.json"))
assert two["settings"].get("ranks") == 2, two["settings"]
assert one["summary"]["per_layer"] == two["summary"]["per_layer"], "corpus lens: 2 ranks differ from 1"
assert one["summary"]["windows"] == two["summary"]["windows"] and one["summary"]["windows"] > 4
a, b = read_safetensors(w + "/t1/tuned_lens.safetensors"), read_safetensors(w + "/t2/tuned_lens.safetensors")
assert a.keys() == b.keys() and len(a) > 0
diff = max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)
scale = max(float(np.abs(a[k]).max()) for k in a)
print(f"corpus lens: {len(one['summary']['per_layer'])} layers identical; training: max |1 rank - 2 ranks| = {diff:.3g} (max |param| {scale:.3g})")
assert scale > 0.05, "the translators did not move"
assert diff <= 1e-5 * max(1.0, scale), diff
PY
