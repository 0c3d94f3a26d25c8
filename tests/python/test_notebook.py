"""docs/notebooks/quickstart.ipynb runs from top to bottom (nbclient, the python3 kernel of Debian's
ipykernel) without an error; its assertions check what it shows."""
import os
import sys
import unittest

import nbformat
from nbclient import NotebookClient

from support import FIXTURES, SOURCE, output_structure


class Quickstart(unittest.TestCase):
    def test_executes(self):
        path = os.path.join(SOURCE, "docs", "notebooks", "quickstart.ipynb")
        nb = nbformat.read(path, as_version=4)
        committed = output_structure(nb)
        os.environ["VOCABLENS_FIXTURES"] = os.path.abspath(FIXTURES)
        client = NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": os.path.dirname(path)}})
        client.execute()
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        self.assertFalse([o for o in outputs if o.get("output_type") == "error"])
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        self.assertEqual(len(images), 2, "the heatmap and the spectrum plot")
        html = [o for o in outputs if "text/html" in o.get("data", {})]
        self.assertGreaterEqual(len(html), 2, "the DataFrames of the lens and of the head")
        # Committed executed (scripts/execute_notebooks.py), so that it reads with its results before anyone runs
        # it; the fresh run shows the same kinds of output in every cell, and no warning in the first.
        self.assertTrue(any(committed), "quickstart.ipynb is committed without outputs")
        self.assertEqual(output_structure(nb), committed,
                         "the outputs differ in kind from the committed ones: re-run scripts/execute_notebooks.py")
        first = next(c for c in nb.cells if c.cell_type == "code")
        self.assertFalse([o for o in first.get("outputs", []) if o.output_type == "stream" and o.name == "stderr"],
                         first.get("outputs"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
