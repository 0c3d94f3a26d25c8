"""vocablens.Graph (python/vocablens/_graph.py) on gpt2-tiny and its fixture transcoders: interventions against
the graph's own edges, its pruning and Neuronpedia JSON against the CLI's `vocablens graph --out`, bad input.

The edges' exactness itself is tests/graph_test.cpp's and test_graph.py's; here the question is whether the
object's intervention is the one the edges describe. With direct_effects (the frozen replacement model: attention
patterns, norm denominators and MLP outputs frozen, the skip connections following their inputs) the model is
linear in a feature's activation, so a change δ of activation a moves each logit target's demeaned logit by exactly
δ / a × its edge; the real model adds every indirect path, so only the direction is predicted there.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import unittest
from unittest import mock

import numpy as np
import torch

from support import SOURCE, cli, fixture, tempdir, vocablens

GPT2 = fixture("gpt2-tiny")
TRANSCODERS = os.path.join(SOURCE, "tests", "fixtures", "graph", "gpt2-tiny")
PROMPT = "The Eiffel Tower is in"


def demeaned(logits):
    x = logits[0, -1].double()
    return x - x.mean()


def same_json(a, b, path="$"):
    """Exact equality but for floats, equal to 1e-12 of their size (each side prints its own shortest digits)."""
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            raise AssertionError("{}: {!r} != {!r}".format(path, a, b))
        if abs(a - b) > 1e-12 * max(1.0, abs(a), abs(b)):
            raise AssertionError("{}: {!r} != {!r}".format(path, a, b))
        return
    if isinstance(a, dict):
        if set(a) != set(b):
            raise AssertionError("{}: keys {} != {}".format(path, sorted(a), sorted(b)))
        for k in a:
            same_json(a[k], b[k], path + "." + k)
        return
    if isinstance(a, list):
        if len(a) != len(b):
            raise AssertionError("{}: {} items != {}".format(path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            same_json(x, y, "{}[{}]".format(path, i))
        return
    if a != b:
        raise AssertionError("{}: {!r} != {!r}".format(path, a, b))


class GraphObject(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = vocablens.load_model(GPT2)
        cls.g = vocablens.attribution_graph(cls.model, PROMPT, TRANSCODERS, progress=False)
        cls.clean = cls.model(cls.g.ids[None])
        cls.tmp = tempdir("graph-object")
        cls.run_dir = os.path.join(cls.tmp, "run")
        cli("graph", GPT2, "--transcoders", TRANSCODERS, "--prompt", PROMPT, "--out", cls.run_dir)

    def strongest_logit_edges(self, n):
        """The n features with the largest |edge| into the top logit: (node, activation, edge)."""
        g = self.g
        row = g.rows[g.n_features, :g.n_features]
        top = row.abs().argsort(descending=True)[:n].tolist()
        return [(f, float(g.feature_activations[f]), float(row[f])) for f in top]

    def test_structure(self):
        g = self.g
        F, L, T, K = g.n_features, g.n_layers, g.n_pos, g.n_logits
        self.assertEqual(g.n_sources, F + (L + 1) * T)
        self.assertEqual(tuple(g.rows.shape), (F + K, g.n_sources))
        # the sparse adjacency holds the rows at their nodes, and nothing else
        dense = g.adjacency.to_dense()
        self.assertEqual(tuple(dense.shape), (g.n_nodes, g.n_nodes))
        self.assertTrue(torch.equal(dense[g.row_nodes][:, :g.n_sources], g.rows))
        self.assertEqual(int((dense != 0).sum()), int((g.rows != 0).sum()))
        nodes = g.nodes
        self.assertEqual(len(nodes), g.n_nodes)
        self.assertEqual(nodes["feature_type"].value_counts().to_dict(),
                         {"cross layer transcoder": F, "mlp reconstruction error": L * T, "embedding": T, "logit": K})
        self.assertEqual(int(nodes["is_target_logit"].sum()), 1)
        self.assertIn("Graph", repr(g))
        self.assertIn("pruned at 0.8 / 0.98", repr(g.prune()))
        # a node reads back from its id, its index and (layer, position, feature)
        f = 5
        self.assertEqual(g.node_index(g.node_id(f)), f)
        self.assertEqual(g.node_index(tuple(int(v) for v in g.features[f])), f)

    def test_clean_intervention_is_the_clean_run(self):
        # setting a feature to its own activation changes nothing, in each mode (the frozen ones replay the clean
        # run's patterns, denominators and MLP outputs)
        f, a, _ = self.strongest_logit_edges(1)[0]
        for mode in ({}, {"freeze_attention": True}, {"direct_effects": True}):
            with self.subTest(**mode):
                got = self.g.intervene(f, a, **mode)
                self.assertLess(float((got - self.clean).abs().max()), 1e-5)

    def test_direct_effect_is_the_edge(self):
        g = self.g
        K, F = g.n_logits, g.n_features
        largest = float(g.rows.abs().max())
        worst = 0.0
        for f, a, _ in self.strongest_logit_edges(5):
            for delta in (0.1 * a, -0.5 * a):
                got = demeaned(g.intervene(f, a + delta, direct_effects=True)) - demeaned(self.clean)
                pred = delta / a * g.rows[F:F + K, f].double()           # every logit target's edge from f
                err = float((got[g.logit_ids] - pred).abs().max())
                worst = max(worst, err / largest)
                # float32 forwards of a linear model: 1e-5 of the largest edge (measured: about 1e-7)
                self.assertLess(err, 1e-5 * largest, "feature {} ({}), delta {}".format(f, g.node_id(f), delta))
        print("direct effects: max |Δ demeaned logit − δ/a × edge| / largest edge = {:.1e}".format(worst))

    def test_feature_to_feature_edges(self):
        # a feature target's edge is the source's direct effect on its pre-activation: its encoder row (read from
        # the fixture's file) dotted with the change of its layer's MLP input at its position, in the frozen model
        g = self.g
        F = g.n_features
        largest = float(g.rows.abs().max())
        sub = g.rows[:F, :F].abs().flatten()
        for flat in sub.argsort(descending=True)[:5].tolist():
            t, src = divmod(flat, F)
            layer, pos, feat = (int(v) for v in g.features[t])
            sae = vocablens.load_sae(os.path.join(TRANSCODERS, "layer_{}.safetensors".format(layer)))
            W = sae.W_enc.float()
            row = W[feat] if W.shape[0] == sae.d_sae else W[:, feat]
            seen = {}

            def capture(x, hook, pos=pos):
                seen["x"] = x[0, pos].clone()

            a = float(g.feature_activations[src])
            with self.model.hooks(fwd_hooks=[("blocks.{}.mlp.hook_in".format(layer), capture)]):
                self.model(g.ids[None])
                x0 = seen["x"]
                g.intervene(src, 1.3 * a, direct_effects=True)
                x1 = seen["x"]
            got, pred = float((x1 - x0) @ row), 0.3 * float(g.rows[t, src])
            self.assertLess(abs(got - pred), 1e-5 * largest, "{} -> {}".format(g.node_id(src), g.node_id(t)))

    def test_two_features_at_once_add_up(self):
        # the frozen model is linear: two features changed together move each logit by the sum of their edges' shares
        g = self.g
        K, F = g.n_logits, g.n_features
        (f1, a1, _), (f2, a2, _) = self.strongest_logit_edges(2)
        got = demeaned(g.intervene([f1, g.node_id(f2)], [1.2 * a1, 0.7 * a2], direct_effects=True)) - demeaned(self.clean)
        pred = 0.2 * g.rows[F:F + K, f1].double() - 0.3 * g.rows[F:F + K, f2].double()
        self.assertLess(float((got[g.logit_ids] - pred).abs().max()), 1e-5 * float(g.rows.abs().max()))

    def test_direct_effect_every_layout(self):
        # circuit-tracer's folders (tests/fixtures/transcoders/make_transcoders.py): per-layer sets read at
        # ln2.hook_normalized (JumpReLU) and mlp.hook_in (TopK), cross-layer transcoders read at hook_resid_mid and
        # ln2.hook_normalized, whose features write into every later block: the intervention adds each of those rows
        d = tempdir("graph-object-sets")
        try:
            subprocess.run([sys.executable, os.path.join(SOURCE, "tests", "fixtures", "transcoders", "make_transcoders.py"),
                            d], check=True, stdout=subprocess.DEVNULL)
            for case in ("plt_jumprelu", "plt_topk", "clt_jumprelu_bf16", "clt_relu"):
                with self.subTest(case=case):
                    g = vocablens.attribution_graph(self.model, PROMPT, os.path.join(d, case), progress=False)
                    F, K = g.n_features, g.n_logits
                    largest = float(g.rows.abs().max())
                    f = int(g.rows[F, :F].abs().argmax())
                    a = float(g.feature_activations[f])
                    got = demeaned(g.intervene(f, 0.5 * a, direct_effects=True)) - demeaned(self.clean)
                    pred = -0.5 * g.rows[F:F + K, f].double()
                    err = float((got[g.logit_ids] - pred).abs().max())
                    print("{}: {} ({}) set to a/2: |Δ − prediction| = {:.1e} of the largest edge".format(
                        case, g.node_id(f), g._s["tcs"].input, err / largest))
                    self.assertLess(err, 1e-5 * largest)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_real_model_moves_as_predicted(self):
        g = self.g
        f, a, edge = self.strongest_logit_edges(1)[0]
        k = int(g.logit_ids[0])
        for delta in (0.1 * a, -0.1 * a):
            got = float((demeaned(g.intervene(f, a + delta)) - demeaned(self.clean))[k])
            pred = delta / a * edge
            print("real model, {} {:+.3f}: top logit moved {:+.4f}, the edge predicts {:+.4f} (indirect paths "
                  "and the norms make the rest)".format(g.node_id(f), delta, got, pred))
            self.assertGreater(got * pred, 0)

    def test_prune_is_the_clis(self):
        p = self.g.prune(0.8, 0.98)
        kept = p.node_mask.nonzero().flatten().numpy()
        np.testing.assert_array_equal(kept, np.load(os.path.join(self.run_dir, "graph.nodes.npy")))
        adj = np.load(os.path.join(self.run_dir, "graph.adjacency.npy"))       # [M, M] kept edges, row = target
        dense = p.adjacency.to_dense()[kept][:, kept].numpy()
        np.testing.assert_array_equal(dense, adj)
        # and at another pair, against the same engine called from Python
        for nt, et in ((0.5, 0.9), (1.0, 1.0)):
            with self.subTest(node_threshold=nt, edge_threshold=et):
                r = vocablens.graph(self.model, PROMPT, transcoders=TRANSCODERS, node_threshold=nt, edge_threshold=et,
                                    progress=False)
                q = self.g.prune(nt, et)
                np.testing.assert_array_equal(q.node_mask.nonzero().flatten().numpy(), r.arrays["nodes"])
                k = r.arrays["nodes"]
                np.testing.assert_array_equal(q.adjacency.to_dense()[k][:, k].numpy(), r.arrays["adjacency"])
                np.testing.assert_allclose(q.node_influence.numpy(), r.arrays["node_influence"], rtol=1e-12, atol=0)

    def test_neuronpedia_is_the_clis(self):
        path = os.path.join(self.tmp, "np.json")
        self.g.prune().to_neuronpedia(path)
        with open(path, encoding="utf-8") as f:
            mine = json.load(f)
        with open(os.path.join(self.run_dir, "graph.neuronpedia.json"), encoding="utf-8") as f:
            theirs = json.load(f)
        same_json(mine, theirs)
        self.assertGreater(len(mine["links"]), 0)

    def test_neuronpedia_nothing_half_written(self):
        path = os.path.join(self.tmp, "half.json")

        def failing_dump(obj, f, **kw):
            f.write('{"metadata": ')
            raise OSError("disk full")

        with mock.patch("vocablens._graph.json.dump", failing_dump):
            with self.assertRaises(OSError):
                self.g.prune().to_neuronpedia(path)
        self.assertFalse(os.path.exists(path))
        self.assertEqual([n for n in os.listdir(self.tmp) if n.endswith(".tmp")], [])
        with self.assertRaises(ValueError):
            self.g.prune().to_neuronpedia(os.path.join(self.tmp, "no-such-dir", "x.json"))

    def test_bad_input(self):
        g = self.g
        f, a, _ = self.strongest_logit_edges(1)[0]
        error_node = g.n_features  # the first error node
        cases = [
            (ValueError, lambda: g.intervene("no_such_node", 1.0)),
            (ValueError, lambda: g.intervene(10 ** 9, 1.0)),
            (ValueError, lambda: g.intervene((9, 9, 9), 1.0)),
            (ValueError, lambda: g.intervene(error_node, 1.0)),
            (ValueError, lambda: g.intervene(f, float("nan"))),
            (ValueError, lambda: g.intervene(f, math.inf)),
            (ValueError, lambda: g.intervene([f, f], [1.0])),
            (ValueError, lambda: g.intervene([], 1.0)),
            (TypeError, lambda: g.intervene(f, "1.0")),
            (TypeError, lambda: g.intervene(f, True)),
            (TypeError, lambda: g.intervene(2.5, 1.0)),
            (TypeError, lambda: g.intervene((1, 2), 1.0)),
            (TypeError, lambda: g.intervene(f, 1.0, direct_effects="yes")),
            (ValueError, lambda: g.prune(node_threshold=2)),
            (ValueError, lambda: g.prune(edge_threshold=float("nan"))),
            (TypeError, lambda: g.prune("0.8")),
            (ValueError, lambda: g.to_neuronpedia(os.path.join(self.tmp, "unpruned.json"))),
            (TypeError, lambda: g.prune().to_neuronpedia(42)),
            (TypeError, lambda: vocablens.attribution_graph("gpt2", PROMPT, TRANSCODERS)),
            (TypeError, lambda: vocablens.attribution_graph(self.model, PROMPT, 5)),
            (TypeError, lambda: vocablens.attribution_graph(self.model, PROMPT, TRANSCODERS, no_such_option=1)),
            (ValueError, lambda: vocablens.attribution_graph(self.model, PROMPT, TRANSCODERS, max_n_logits=0)),
            (vocablens.Error, lambda: vocablens.attribution_graph(self.model, PROMPT, os.path.join(self.tmp, "none"))),
        ]
        for i, (kind, call) in enumerate(cases):
            with self.subTest(case=i):
                with self.assertRaises(kind) as cm:
                    call()
                self.assertEqual(len(str(cm.exception).strip().splitlines()), 1, str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "unpruned.json")))
        # the model is untouched by the failed calls
        self.assertTrue(torch.equal(self.model(g.ids[None]), self.clean))


if __name__ == "__main__":
    unittest.main(verbosity=2)
