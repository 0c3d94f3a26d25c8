"""Shared by tests/python/test_*.py: where the fixtures, the CLI and the module are; run with
/usr/bin/python3 by CTest (tests/scripts/python.cmake sets PYTHONPATH=build/python and VOCABLENS_CLI)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.environ.get("VOCABLENS_FIXTURES") or os.path.join(SOURCE, "..", "shared", "fixtures")
CLI = os.environ.get("VOCABLENS_CLI") or os.path.join(SOURCE, "build", "vocablens")


def __getattr__(name):
    """`from support import vocablens` loads the module (and LibTorch, ~1.2 s of CPU) on first use only: the
    tests that need just the paths (the notebooks run in a kernel, `pip install` in a venv) skip it."""
    if name != "vocablens":
        raise AttributeError("module 'support' has no attribute " + repr(name))
    import vocablens  # PYTHONPATH=build/python
    import torch

    torch.set_num_threads(1)  # same as the CLI under CTest (VOCABLENS_THREADS=1): identical summation order
    globals()["vocablens"] = vocablens
    return vocablens


def fixture(rel):
    path = os.path.join(FIXTURES, rel)
    if not os.path.exists(path):
        # Missing fixtures fail loudly (tests/support/fixtures.hpp has the same rule for the C++ tests).
        if os.environ.get("VOCABLENS_ALLOW_MISSING_FIXTURES") == "1":
            print("SKIPPED: fixture missing: " + path, file=sys.stderr)
            return None
        raise FileNotFoundError("fixture missing: " + path + " (set VOCABLENS_FIXTURES)")
    return path


def cli(*args, check=True):
    """Runs the CLI; returns (exit code, stdout, stderr)."""
    env = dict(os.environ, VOCABLENS_THREADS="1", OMP_NUM_THREADS="1", NO_COLOR="1")
    p = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise AssertionError("CLI failed ({}): {}\n{}".format(p.returncode, " ".join(map(str, args)), p.stderr))
    return p.returncode, p.stdout, p.stderr


def tempdir(tag):
    return tempfile.mkdtemp(prefix="vocablens-py-" + tag + "-")


def output_structure(nb):
    """Per code cell, its outputs' kinds: ("stream", "stdout"), ("display_data", ("image/png", "text/plain")), ...
    (consecutive outputs of one stream counted once)
    The committed notebooks (scripts/execute_notebooks.py) and a fresh execution must agree on this, not on the
    text (paths and timings differ)."""
    cells = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        kinds = []
        for o in c.get("outputs", []):
            if o.output_type == "stream":
                # consecutive prints arrive as one stream output or several, as the kernel flushed them
                if not kinds or kinds[-1] != ("stream", o.name):
                    kinds.append(("stream", o.name))
            elif o.output_type in ("display_data", "execute_result"):
                kinds.append((o.output_type, tuple(sorted(o.get("data", {})))))
            else:
                kinds.append((o.output_type,))
        cells.append(kinds)
    return cells
