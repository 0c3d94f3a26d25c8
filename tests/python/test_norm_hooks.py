"""The hook points around the norms and the MLP's input (ln1/ln2.hook_scale, ln1/ln2.hook_normalized, mlp.hook_in,
ln_final.hook_scale): their values against independent float64 NumPy forwards of a LayerNorm model (gpt2_numpy.py,
gpt2-tiny) and an RMSNorm one (llama_numpy.py, stories260K-hf); an edit at each changes the logits as the same edit
in the reference does; reading them changes no bit; blocks without a norm before the MLP refuse the ln points with
one line and give the MLP's input at mlp.hook_in."""
import os
import unittest

import numpy as np
import torch

from support import SOURCE, fixture, vocablens
import gpt2_numpy
import llama_numpy

ATOL = 1e-4
FAMILIES = os.path.join(SOURCE, "tests", "fixtures", "families")
NEW_POINTS = ("ln1.hook_scale", "ln1.hook_normalized", "ln2.hook_scale", "ln2.hook_normalized", "mlp.hook_in")


def scale_row(pos, by):
    def f(x):
        x[pos] *= by
        return x
    return f


def shift_row(pos, by):
    def f(x):
        x[pos] += by
        return x
    return f


def shift_at(pos, i, by):
    def f(x):
        x[pos, i] += by
        return x
    return f


class NormPoints:
    """Shared by the LayerNorm and the RMSNorm model: `reference` is the float64 module, `ids` a prompt."""
    reference = None
    model_dir = None
    ids = None

    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(fixture(cls.model_dir))
        cls.ref = cls.reference.load(fixture(cls.model_dir))
        cls.acts = cls.reference.forward(cls.ref, cls.ids)
        cls.logits, cls.cache = cls.m.run_with_cache(cls.ids)

    def close(self, got, want, what, atol=ATOL):
        got = got.detach().double().numpy() if isinstance(got, torch.Tensor) else got
        self.assertEqual(got.shape, want.shape, what)
        self.assertLess(np.abs(got - want).max(), atol, what)

    def test_values_against_float64(self):
        L = self.m.cfg.n_layers
        names = ["blocks.%d.%s" % (l, p) for l in range(L) for p in NEW_POINTS] + ["ln_final.hook_scale"]
        for name in names:
            self.assertIn(name, self.m.hook_names())
            self.close(self.cache[name][0], self.acts[name], name)
        T = len(self.ids)
        self.assertEqual(tuple(self.cache["blocks.0.ln2.hook_scale"].shape), (1, T, 1))
        self.assertEqual(tuple(self.cache["ln_final.hook_scale"].shape), (1, T, 1))
        self.assertEqual(tuple(self.cache["blocks.1.ln1.hook_normalized"].shape), (1, T, self.m.cfg.d_model))
        # the points are not one another: normalised before the weight, the MLP's input after it
        self.assertGreater(np.abs(self.acts["blocks.1.mlp.hook_in"] - self.acts["blocks.1.ln2.hook_normalized"]).max(),
                           1e-2)
        self.close(self.logits[0], self.acts["logits"], "logits")

    def test_edits_change_the_forward_as_the_reference(self):
        edits = [
            {"blocks.1.ln2.hook_normalized": scale_row(3, 2.0)},
            {"blocks.1.mlp.hook_in": shift_row(2, 0.5)},
            {"blocks.0.ln1.hook_normalized": scale_row(4, -1.0)},
            {"blocks.0.ln2.hook_scale": scale_row(1, 0.25)},
            {"blocks.1.ln1.hook_scale": scale_row(5, 3.0)},
            {"ln_final.hook_scale": scale_row(3, 0.5)},
            {"blocks.1.ln2.hook_scale": scale_row(2, 4.0), "blocks.1.ln2.hook_normalized": shift_row(2, 0.1)},
        ]
        for e in edits:
            want = self.reference.forward(self.ref, self.ids, edits=e)["logits"]
            hooks = []
            for name, f in e.items():
                hooks.append((name, lambda t, hook, f=f: torch.from_numpy(f(t[0].double().numpy())).float()[None]))
            got = self.m.run_with_hooks(self.ids, fwd_hooks=hooks)[0]
            what = ", ".join(e)
            self.close(got, want, what)
            # the edit did something the reference sees: logits moved well beyond the tolerance
            self.assertGreater(np.abs(want - self.acts["logits"]).max(), 100 * ATOL, what)

    def test_gradients_reach_the_points(self):
        # d logit / d activation at the norms' points, against central differences of the float64 reference.
        T = len(self.ids)
        tok = int(np.argmax(self.acts["logits"][-1]))
        metric = lambda logits: logits[0, -1, tok]
        for name, coords in (("blocks.1.ln2.hook_normalized", [(2, 5), (T - 1, 0), (T - 1, 17)]),
                             ("blocks.0.ln1.hook_scale", [(1, 0), (T - 1, 0)]),
                             ("blocks.0.mlp.hook_in", [(T - 1, 3)])):
            g = self.m.gradients(self.ids, metric, names=[name])[name][0].double().numpy()
            self.assertGreater(np.abs(g).max(), 1e-3, name)
            for pos, i in coords:
                h = 1e-4
                up = self.reference.forward(self.ref, self.ids, edits={name: shift_at(pos, i, h)})["logits"][-1, tok]
                down = self.reference.forward(self.ref, self.ids, edits={name: shift_at(pos, i, -h)})["logits"][-1, tok]
                fd = (up - down) / (2 * h)
                self.assertLess(abs(g[pos, i] - fd), 1e-3 * max(1.0, abs(fd)), (name, pos, i, g[pos, i], fd))

    def test_reading_changes_no_bit(self):
        seen = []
        names = ["blocks.%d.%s" % (l, p) for l in range(self.m.cfg.n_layers) for p in NEW_POINTS]
        hooks = [(n, lambda t, hook: seen.append(hook.name)) for n in names + ["ln_final.hook_scale"]]
        got = self.m.run_with_hooks(self.ids, fwd_hooks=hooks)
        self.assertEqual(len(seen), len(hooks))
        self.assertTrue(torch.equal(got, self.m(self.ids)))


class LayerNormModel(NormPoints, unittest.TestCase):
    reference = gpt2_numpy
    model_dir = "gpt2-tiny"
    ids = [464, 412, 733, 417, 8765, 318, 287, 262]


    def test_apply_ln_to_stack_reads_the_recorded_scale(self):
        # With ln_final.hook_scale edited at position 3, the pieces of the stream normalised by the cache's scale
        # still sum to the final norm's output (TransformerLens reads the scale from the cache too).
        e = scale_row(3, 0.5)
        hook = ("ln_final.hook_scale", lambda t, hook: torch.from_numpy(e(t[0].double().numpy())).float()[None])
        _, cache = self.m.run_with_cache(self.ids, fwd_hooks=[hook])
        pieces = cache.apply_ln_to_stack(cache.decompose_resid()).sum(0) + self.m.ln_final.b
        want = self.reference.forward(self.ref, self.ids, edits={"ln_final.hook_scale": e})["ln_final.hook_normalized"]
        self.close(cache["ln_final.hook_normalized"][0], want, "edited final norm")
        self.close(pieces[0], want, "apply_ln_to_stack")


class RMSNormModel(NormPoints, unittest.TestCase):
    reference = llama_numpy
    model_dir = "stories260K-hf"
    ids = [1, 403, 407, 261, 378, 290, 269, 300]


class NoNormBeforeTheMlp(unittest.TestCase):
    def test_refused_with_one_line_and_mlp_in_is_the_stream(self):
        for family, why in (("opt", "post-norm"), ("olmo2", "no norm before its attention and MLP")):
            m = vocablens.load_model(os.path.join(FAMILIES, family))
            ids = [1, 5, 9, 13]
            for p in ("ln1.hook_scale", "ln2.hook_normalized"):
                with self.assertRaises(ValueError) as e:
                    m.run_with_hooks(ids, fwd_hooks=[("blocks.0." + p, lambda t, hook: None)])
                msg = str(e.exception)
                self.assertIn("blocks.0." + p, msg)
                self.assertIn(why, msg)
                self.assertIn("mlp.hook_in", msg)
                self.assertNotIn("\n", msg)
                self.assertNotIn("blocks.0." + p, m.hook_names())
            _, cache = m.run_with_cache(ids, names_filter=["blocks.0.mlp.hook_in", "blocks.0.hook_resid_mid"])
            self.assertTrue(torch.equal(cache["blocks.0.mlp.hook_in"], cache["blocks.0.hook_resid_mid"]), family)

    def test_parallel_block_normalises_the_block_input(self):
        m = vocablens.load_model(os.path.join(FAMILIES, "gpt_neox"))
        ids = [1, 5, 9, 13, 17]
        _, c = m.run_with_cache(ids)
        x = c["blocks.1.hook_resid_pre"][0].double()
        centred = x - x.mean(-1, keepdim=True)
        eps = m.cfg.eps
        scale = (centred.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        self.assertLess((c["blocks.1.ln2.hook_scale"][0].double() - scale).abs().max().item(), 1e-5)
        self.assertLess((c["blocks.1.ln2.hook_normalized"][0].double() - centred / scale).abs().max().item(), 1e-5)


if __name__ == "__main__":
    unittest.main()
