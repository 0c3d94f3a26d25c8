#!/usr/bin/env python3
"""Executes docs/notebooks/*.ipynb in place, so that they are committed with their outputs (figures, tables,
printed results) and read on GitHub-style viewers before anyone runs them. From the repository root, after the
build:

    PYTHONPATH=$PWD/build/python /usr/bin/python3 scripts/execute_notebooks.py            # every notebook
    PYTHONPATH=$PWD/build/python /usr/bin/python3 scripts/execute_notebooks.py steering.ipynb

The kernel is Jupyter's python3 (Debian's ipykernel), run in docs/notebooks/ so that the notebooks' relative path
to the fixtures (../../../shared/fixtures) is what the committed outputs show. Execution timings are not
recorded (they would change every run). The tests execute the notebooks again and compare the structure of
their outputs with the committed ones (tests/python/test_install.py, test_research_notebooks.py).
"""
import os
import sys

import nbformat
from nbclient import NotebookClient

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "notebooks")


def execute(path):
    nb = nbformat.read(path, as_version=4)
    env_fixtures = os.environ.pop("VOCABLENS_FIXTURES", None)  # the notebooks' own relative path, not a local one
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": HERE}}).execute()
    finally:
        if env_fixtures is not None:
            os.environ["VOCABLENS_FIXTURES"] = env_fixtures
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    if errors:
        raise SystemExit("{}: a cell failed: {}: {}".format(path, errors[0].ename, errors[0].evalue))
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return sum(len(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code")


def main(argv):
    names = argv or sorted(n for n in os.listdir(HERE) if n.endswith(".ipynb"))
    for n in names:
        path = os.path.join(HERE, os.path.basename(n))
        print("{}: {} outputs".format(path, execute(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
