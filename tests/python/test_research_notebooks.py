"""The five research notebooks of docs/notebooks/ (activation patching on an IOI sentence, a Patchscope, an
activation-addition steering vector, a token-specialised expert of a mixture found and ablated, a circuit of an
attribution graph checked by intervention) run from top to bottom with nbclient, as the quick-start notebook does
(test_install.py). Their own cells assert what could go wrong (exact recovery at layer 0, a hand-written float64
tail against the hooked head patching, the steered residual = unsteered + c·vector, ...); this test fails on any
error output, checks that the plots were drawn, and keeps each notebook under a minute.

The five run one after another in one kernel, each after `%reset -f` (an empty namespace, as in a fresh kernel:
a name one notebook left behind is a NameError in the next), so that the kernel's start and the imports of
vocablens (LibTorch), NumPy and matplotlib are paid once, not five times (6.5 -> 5.5 CPU-s on the Zen 4). No
notebook sets a seed, a default dtype or a global option that another could read."""
import datetime
import os
import unittest

import nbformat
from nbclient import NotebookClient

from support import FIXTURES, SOURCE, output_structure

NOTEBOOKS = ("ioi_patching.ipynb", "patchscope.ipynb", "steering.ipynb", "moe_experts.ipynb", "graph_circuit.ipynb")
_executed = {}


def _reply_time(cell):
    """When the kernel finished a cell (nbclient's record_timing metadata), as a datetime."""
    stamp = cell.metadata["execution"]["shell.execute_reply"].replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(stamp)


def execute_all():
    """Executes the five notebooks once, in one kernel: {name: (seconds, errors, text, images, nb, committed)}."""
    if _executed:
        return _executed
    directory = os.path.join(SOURCE, "docs", "notebooks")
    os.environ["VOCABLENS_FIXTURES"] = os.path.abspath(FIXTURES)
    combined = nbformat.v4.new_notebook()
    spans = {}
    for name in NOTEBOOKS:
        nb = nbformat.read(os.path.join(directory, name), as_version=4)
        nbformat.validate(nb)
        committed = output_structure(nb)
        combined.cells.append(nbformat.v4.new_code_cell("%reset -f"))
        start = len(combined.cells)
        combined.cells.extend(nb.cells)
        spans[name] = (nb, committed, start, len(combined.cells))
    # allow_errors: a notebook that fails still lets the others run (each test checks its own for error outputs).
    client = NotebookClient(combined, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": directory}})
    client.execute()
    for name, (nb, committed, start, end) in spans.items():
        nb.cells = combined.cells[start:end]
        code = [c for c in nb.cells if c.cell_type == "code"]
        # from the end of the reset before it to its last cell's reply
        seconds = (_reply_time(code[-1]) - _reply_time(combined.cells[start - 1])).total_seconds()
        outputs = [o for c in code for o in c.get("outputs", [])]
        errors = [o for o in outputs if o.get("output_type") == "error"]
        text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        _executed[name] = (seconds, errors, text, images, nb, committed)
    return _executed


class ResearchNotebooks(unittest.TestCase):
    def check(self, name, n_images):
        seconds, errors, text, images, nb, committed = execute_all()[name]
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
