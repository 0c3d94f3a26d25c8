"""docs/notebooks/quickstart.ipynb runs from top to bottom (nbclient, the python3 kernel of Debian's
ipykernel) without an error; its assertions check what it shows."""
import os
import sys
import unittest

import nbformat
from nbclient import NotebookClient

from support import FIXTURES, SOURCE


class Quickstart(unittest.TestCase):
    def test_executes(self):
        path = os.path.join(SOURCE, "docs", "notebooks", "quickstart.ipynb")
        nb = nbformat.read(path, as_version=4)
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
