"""The five research notebooks of docs/notebooks/ (activation patching on an IOI sentence, a Patchscope, an
activation-addition steering vector, a token-specialised expert of a mixture found and ablated, a circuit of an
attribution graph checked by intervention) run from top to bottom with nbclient, as the quick-start notebook does
(test_install.py). Their own cells assert what could go wrong (exact recovery at layer 0, a hand-written float64
tail against the hooked head patching, the steered residual = unsteered + c·vector, ...); this test fails on any
error output, checks that the plots were drawn, and keeps each notebook under a minute."""
import os
import time
import unittest

import nbformat
from nbclient import NotebookClient

from support import FIXTURES, SOURCE, output_structure


def execute(name):
    path = os.path.join(SOURCE, "docs", "notebooks", name)
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    committed = output_structure(nb)
    os.environ["VOCABLENS_FIXTURES"] = os.path.abspath(FIXTURES)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(path)}})
    start = time.monotonic()
    client.execute()
    seconds = time.monotonic() - start
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    return seconds, errors, text, images, nb, committed


class ResearchNotebooks(unittest.TestCase):
    def check(self, name, n_images):
        seconds, errors, text, images, nb, committed = execute(name)
        self.assertFalse(errors, errors[:1])
        # committed executed (scripts/execute_notebooks.py), with the outputs a fresh run makes
        self.assertTrue(any(committed), name + " is committed without outputs")
        self.assertEqual(output_structure(nb), committed, name + ": re-run scripts/execute_notebooks.py")
        self.assertEqual(len(images), n_images, name)
        self.assertLess(seconds, 60, "{} took {:.0f} s".format(name, seconds))
        # the experiment is explained before it is run: a markdown cell first, citing its paper
        self.assertEqual(nb.cells[0].cell_type, "markdown")
        self.assertIn("arXiv:", nb.cells[0].source)
        # hooks only: no canned analysis does the core step
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        for canned in ("vocablens.patch(", "vocablens.steer(", "vocablens.ablate(", ".patch(", ".steer("):
            self.assertNotIn(canned, code)
        return text

    def test_ioi_patching(self):
        text = self.check("ioi_patching.ipynb", 2)
        self.assertIn("largest effect: L4H2", text)

    def test_patchscope(self):
        text = self.check("patchscope.ipynb", 1)
        self.assertIn("decoded ' Timmy'", text)

    def test_steering(self):
        text = self.check("steering.ipynb", 1)
        self.assertIn("a little boy named Tim", text)

    def test_moe_experts(self):
        text = self.check("moe_experts.ipynb", 2)
        # the expert found, and the ablation moving exactly the positions routed to it (asserted in the notebook)
        self.assertIn("layer 1, expert 6 takes 100% of ' and' (4 occurrences) and 27% of all tokens", text)
        self.assertIn("elsewhere: 0.0000 (max)", text)

    def test_graph_circuit(self):
        text = self.check("graph_circuit.ipynb", 1)
        # the path found, and the intervention on its feature moving the logit as its edge says (asserted in the
        # notebook: exactly in the frozen model, in direction in the real one)
        self.assertIn("0_46_7  cross layer transcoder", text)
        self.assertIn("real model: a 1 % change moves the logit the predicted way", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
