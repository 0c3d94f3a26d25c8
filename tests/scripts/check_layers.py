#!/usr/bin/env python3
"""The layers of vocablens, and a check that no #include runs upwards (docs/architecture.md, "Layers").

Every source folder belongs to one layer; a file may include headers of its own layer and of the layers
below, never of a layer above. A public header include/vocablens/[sub/]X.hpp belongs to the folder of the
X.cpp that implements it; a header-only one to HEADER_ONLY below, or, if not listed there, to the highest
layer among the headers it includes itself (a header that includes nothing of ours is ground floor).

    python3 tests/scripts/check_layers.py [REPO]      # prints the arrows; exit 1 on an upward one
"""
import os
import re
import sys

# Lowest first. Folders on one line are one layer (they may include each other).
LAYERS = [
    ["src/util"],                     # errors, atomic files, hashes, JSON guards: no LibTorch (but parallel.cpp)
    ["src/core"],                     # plain data: model config, Result
    ["src/tokenizer", "src/checkpoint", "src/spm_shim"],  # text -> ids; files -> named tensors
    ["src/model"],                    # the runner: weights by role, forward, ResidualCache
    ["notebooks-export"],             # Result -> JSON, .npy, CSV, HTML report, notebook; the kinds registry
    ["analyses/linalg"],              # building blocks: streamed top-k, factored products, Gram/eigen, pinv
    ["analyses"],                     # one slice per analysis
    ["src/train"],                    # training from scratch (uses the runner's formats and exporters)
    ["src/cli", "src/serve", "python/src"],  # the roof: subcommands; `vocablens serve`'s HTTP server; Python
]

# Public headers with no X.cpp of their own name: the layer they describe.
HEADER_ONLY = {
    "error": "src/util",
    "result": "src/core",
    "cache": "src/model",
}

SOURCE_ROOTS = ["src", "analyses", "notebooks-export", "python/src"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_index(folder):
    for i, names in enumerate(LAYERS):
        if folder in names:
            return i
    return None


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    os.chdir(repo)
    sources = []
    for root in SOURCE_ROOTS:
        for d, _, files in os.walk(root):
            for f in files:
                if f.endswith((".cpp", ".hpp", ".h")):
                    sources.append(os.path.join(d, f).replace(os.sep, "/"))
    sources.sort()
    headers = []
    for d, _, files in os.walk("include/vocablens"):
        for f in files:
            if f.endswith(".hpp"):
                headers.append(os.path.relpath(os.path.join(d, f), "include").replace(os.sep, "/"))

    problems = []
    # Every source folder must have a layer.
    for s in sources:
        if layer_index(os.path.dirname(s)) is None:
            problems.append(f"{s}: folder '{os.path.dirname(s)}' is in no layer (add it to LAYERS in {__file__})")

    impl = {}  # "vocablens/x.hpp" -> folder of x.cpp
    by_stem = {}
    for s in sources:
        if s.endswith(".cpp"):
            by_stem.setdefault(os.path.splitext(os.path.basename(s))[0], []).append(os.path.dirname(s))
    for h in headers:
        stem = os.path.splitext(os.path.basename(h))[0]
        sub = os.path.dirname(h)[len("vocablens"):].strip("/")  # "" or "linalg"
        cands = by_stem.get(stem, [])
        if sub:
            cands = [c for c in cands if c.endswith("/" + sub)] or cands
        if len(cands) >= 1:
            impl[h] = min(cands, key=lambda c: layer_index(c) if layer_index(c) is not None else 99)
        elif stem in HEADER_ONLY:
            impl[h] = HEADER_ONLY[stem]

    def includes_of(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return INCLUDE_RE.findall(f.read())

    # Header-only headers not listed: the highest layer among what they include (fixed point).
    pending = [h for h in headers if h not in impl]
    for _ in range(len(pending) + 1):
        for h in list(pending):
            incs = [i for i in includes_of(os.path.join("include", h)) if i.startswith("vocablens/")]
            if all(i in impl for i in incs):
                impl[h] = max((impl[i] for i in incs), key=layer_index, default=LAYERS[0][0])
                pending.remove(h)
    for h in pending:
        impl[h] = LAYERS[0][0]

    def target_folder(src, inc):
        if inc.startswith("vocablens/"):
            return impl.get(inc)
        here = os.path.normpath(os.path.join(os.path.dirname(src), inc)).replace(os.sep, "/")
        if os.path.exists(here):
            return os.path.dirname(here)
        for root in ("src", "."):  # include paths: src/ and the repository root
            path = os.path.normpath(os.path.join(root, inc))
            if os.path.exists(path):
                return os.path.dirname(path).replace(os.sep, "/")
        return None

    arrows = {}
    for s in sources + ["include/" + h for h in headers]:
        frm = impl[s[len("include/"):]] if s.startswith("include/") else os.path.dirname(s)
        for inc in includes_of(s):
            to = target_folder(s, inc)
            if to is None or to == frm:
                continue
            arrows.setdefault((frm, to), []).append(f"{s}: #include \"{inc}\"")

    for (frm, to), where in sorted(arrows.items()):
        fi, ti = layer_index(frm), layer_index(to)
        up = fi is not None and ti is not None and ti > fi
        print(f"{'UP  ' if up else '    '}{frm} -> {to} ({len(where)})")
        if up:
            for w in where:
                problems.append(f"{w} runs upwards ({frm} is below {to})")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"{len(arrows)} folder-to-folder arrows, none upwards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
