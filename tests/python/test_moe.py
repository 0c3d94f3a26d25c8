"""Mixtures of experts from Python: the router's hook points in run_with_cache and run_with_hooks, on the Mixtral
and Qwen2-MoE fixtures (tests/fixtures/families/, random weights in the real HF layout). The experts chosen are
compared with llama.cpp's own choice (llama_router.order.i32, its graph's ffn_moe_argsort captured by
tests/llama_ref/lcpp_logits.cpp), not with our C++ output; each chosen expert's output (mlp.hook_expert_out), its
edits, the `experts` analysis and the expert ablations with llama_numpy.py's float64 Mixtral forward (written from
the Hugging Face definition; its logits agree with llama.cpp's to 5e-6)."""
import os
import unittest

import numpy as np
import torch

import llama_numpy
from support import SOURCE, vocablens

FAMILIES = os.path.join(SOURCE, "tests", "fixtures", "families")


def ids_of(family):
    with open(os.path.join(FAMILIES, family, "ids.txt")) as f:
        return [int(x) for x in f.read().split()]


def llama_order(family, layers, T, E):
    path = os.path.join(FAMILIES, family, "llama_router.order.i32")
    return np.fromfile(path, dtype="<i4").reshape(layers, T, E)


class Moe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(os.path.join(FAMILIES, "mixtral"))
        cls.ids = ids_of("mixtral")
        cls.ref_model = llama_numpy.load(os.path.join(FAMILIES, "mixtral"))
        cls.ref = llama_numpy.forward(cls.ref_model, cls.ids)

    # Float32 against float64 through two blocks of a 64-wide model: 1e-4 on logits (as the family agreement), 1e-5
    # on one expert's output.
    def test_expert_out_is_the_float64_reference(self):
        _, cache = self.m.run_with_cache(self.ids)
        for layer in range(2):
            b = f"blocks.{layer}.mlp."
            self.assertTrue(np.array_equal(cache[b + "hook_expert_indices"][0].numpy(), self.ref[b + "hook_expert_indices"]))
            out = cache[b + "hook_expert_out"][0].double().numpy()
            self.assertEqual(out.shape, (len(self.ids), 2, 64))
            self.assertLess(np.abs(out - self.ref[b + "hook_expert_out"]).max(), 1e-5)
            self.assertGreater(np.abs(self.ref[b + "hook_expert_out"]).max(), 0.05)  # not a comparison of zeros

    def test_reading_expert_out_changes_no_bit(self):
        seen = []
        base = self.m.run_with_hooks(self.ids)
        hooked = self.m.run_with_hooks(self.ids, fwd_hooks=[(f"blocks.{l}.mlp.hook_expert_out", lambda t, hook: seen.append(t.sum()))
                                                            for l in range(2)])
        self.assertEqual(len(seen), 2)
        self.assertTrue(torch.equal(base, hooked))

    def test_expert_out_edit_is_the_reference_edit(self):
        def scale(t, hook=None):
            t[..., 1, :] *= -2.0  # every token's second choice, reversed and doubled
            return t

        logits = self.m.run_with_hooks(self.ids, fwd_hooks=[("blocks.0.mlp.hook_expert_out", scale)])[0].double().numpy()
        want = llama_numpy.forward(self.ref_model, self.ids, edits={"blocks.0.mlp.hook_expert_out": scale})["logits"]
        self.assertLess(np.abs(logits - want).max(), 1e-4)
        self.assertGreater(np.abs(want - self.ref["logits"]).max(), 1e-2)

    def test_gradients_at_the_router_points(self):
        # d(logit a - logit b at the last position) / d(expert_out.0, expert_weights.1), against central finite
        # differences of the float64 forward (edits at the same points).
        a, b = 5, 7

        def metric(logits):
            return logits[0, -1, a] - logits[0, -1, b]

        names = ["blocks.0.mlp.hook_expert_out", "blocks.1.mlp.hook_expert_weights"]
        grads = self.m.gradients(self.ids, metric, names)
        rng = np.random.RandomState(5)
        for name in names:
            g = grads[name][0].double().numpy()
            self.assertEqual(g.shape, self.ref[name].shape)
            self.assertGreater(np.abs(g[-1]).max(), 0.0)
            for _ in range(5):
                idx = tuple(int(rng.randint(0, n)) for n in g.shape[:-1]) + (int(rng.randint(0, g.shape[-1])),)
                if rng.rand() < 0.5:
                    idx = (len(self.ids) - 1,) + idx[1:]  # the metric's own position, where every point matters
                fd = []
                for eps in (1e-5, -1e-5):
                    def bump(t, eps=eps):
                        t[idx] += eps
                        return t
                    lg = llama_numpy.forward(self.ref_model, self.ids, edits={name: bump})["logits"]
                    fd.append(lg[-1, a] - lg[-1, b])
                want = (fd[0] - fd[1]) / 2e-5
                self.assertLess(abs(g[idx] - want), 1e-4 + 1e-3 * abs(want), f"{name} {idx}: {g[idx]} vs {want}")

    def test_experts_analysis_is_the_reference(self):
        T, k = len(self.ids), 2
        r = vocablens.experts(self.m, prompt=self.ids, top_k=5, progress=False)
        self.assertEqual(r.summary["positions"], T)
        W_U = self.ref_model["w"]["lm_head.weight"].T  # [d, V]
        for layer in range(2):
            b = f"blocks.{layer}.mlp."
            idx, out = self.ref[b + "hook_expert_indices"], self.ref[b + "hook_expert_out"]
            wts = self.ref[b + "hook_expert_weights"]
            for e in range(8):
                mask = idx == e
                n = int(mask.sum())
                self.assertAlmostEqual(r.arrays["load"][layer, e], n / T, places=12)
                if n == 0:
                    self.assertTrue(np.isnan(r.arrays["mean_weight"][layer, e]))
                    continue
                self.assertAlmostEqual(r.arrays["mean_weight"][layer, e], wts[mask].mean(), places=5)
                scores = out[mask].mean(0) @ W_U
                rows = [row for row in r.table_rows() if row[0] == "writes"][0][2]
                got = [(row[4], row[6]) for row in rows if row[0] == layer and row[1] == e and row[2] == "top"]
                want = np.argsort(-scores, kind="stable")[:5]
                self.assertEqual([g[0] for g in got], [int(j) for j in want])
                self.assertLess(max(abs(g[1] - scores[j]) for g, j in zip(got, want)), 1e-5)
                bottom = [row[4] for row in rows if row[0] == layer and row[1] == e and row[2] == "bottom"]
                self.assertEqual(bottom, [int(j) for j in np.argsort(scores, kind="stable")[:5]])
            self.assertAlmostEqual(float(r.arrays["load"][layer].sum()), k, places=12)  # each token chose k

    def test_ablations_are_the_reference_edits(self):
        E = int(self.ref["blocks.0.mlp.hook_expert_indices"][:, 0][0])  # the first token's first choice at layer 0
        idx = {}

        def keep_idx(t):
            idx["i"] = t.copy()
            return t

        def zero_w(t):
            t[idx["i"] == E] = 0.0
            return t

        def reroute(t):
            t[:, E] = -np.inf
            return t

        for mode, edits in (("zero", {"blocks.0.mlp.hook_expert_indices": keep_idx, "blocks.0.mlp.hook_expert_weights": zero_w}),
                            ("reroute", {"blocks.0.mlp.hook_router_logits": reroute})):
            with self.subTest(mode=mode):
                want = llama_numpy.forward(self.ref_model, self.ids, edits=edits)
                if mode == "reroute":
                    self.assertFalse((want["blocks.0.mlp.hook_expert_indices"] == E).any())
                r = vocablens.experts(self.m, prompt=self.ids, ablate_expert=[f"0.{E}"], ablate_mode=mode, progress=False)
                self.assertAlmostEqual(r.summary["next_token"]["max_logit_change"],
                                       float(np.abs(want["logits"] - self.ref["logits"]).max()), delta=1e-4)
                self.assertGreater(r.summary["next_token"]["max_logit_change"], 1e-3)
                if mode == "reroute":
                    self.assertEqual(r.arrays["load"][0, E], 0.0)
                # The lens reads the ablated forward: its last layer is the ablated model's distribution.
                lens = vocablens.lens(self.m, self.ids, ablate_expert=[f"0.{E}"], ablate_mode=mode, top_k=3, progress=False)
                self.assertEqual(lens.settings["ablate_expert"], [f"0.{E}"])
                top = np.argsort(-want["logits"], axis=-1, kind="stable")[:, :3]
                self.assertTrue(np.array_equal(lens.arrays["top_ids"][-1], top))

    def test_attribution_split_by_expert(self):
        # Direct logit attribution of the last position's top logit: each chosen expert's part is its router weight
        # times its output, through the final norm (scale frozen at this run's value) and W_U, from the float64 forward.
        target = int(np.argmax(self.ref["logits"][-1]))
        r = vocablens.attribute(self.m, self.ids, target=target)
        cols, rows = [(c, rs) for name, c, rs in r.table_rows() if name == "components"][0]
        parts = [dict(zip(cols, row)) for row in rows]
        w, eps = self.ref_model["w"], self.ref_model["eps"]
        x = self.ref["blocks.1.hook_resid_post"][-1]
        u = w["model.norm.weight"] * w["lm_head.weight"][target] / np.sqrt((x ** 2).mean() + eps)
        self.assertFalse([p for p in parts if p["kind"] == "mlp"])  # no dense MLP part: the experts are the MLP
        for layer in range(2):
            b = f"blocks.{layer}.mlp."
            idx, wts, out = (self.ref[b + n][-1] for n in ("hook_expert_indices", "hook_expert_weights", "hook_expert_out"))
            got = {p["expert"]: p["value"] for p in parts if p["kind"] == "expert" and p["layer"] == layer}
            self.assertEqual(sorted(got), sorted(int(e) for e in idx))
            for s_ in range(2):
                self.assertLess(abs(got[int(idx[s_])] - float(wts[s_] * out[s_] @ u)), 1e-4)
            self.assertAlmostEqual(float(r.arrays["mlps"][layer]), sum(got.values()), places=4)
        self.assertLess(abs(sum(p["value"] for p in parts) - self.ref["logits"][-1, target]), 1e-4)

    def test_expert_errors_are_one_line(self):
        with self.assertRaises(vocablens.UsageError) as cm:
            vocablens.experts(self.m, prompt=self.ids, ablate_expert=["0.8"], progress=False)
        self.assertIn("ablate expert '0.8': expert out of range (its layers have 8 experts, 0..7)", str(cm.exception))
        with self.assertRaises(vocablens.UsageError) as cm:
            vocablens.experts(self.m, prompt=self.ids, ablate_expert=["2.1"], progress=False)
        self.assertIn("layer out of range (the model has 2 layers)", str(cm.exception))
        dense = vocablens.load_model(os.path.join(FAMILIES, "qwen3"))
        with self.assertRaises(vocablens.UsageError) as cm:
            vocablens.experts(dense, prompt=[1, 2, 3], progress=False)
        self.assertIn("needs a mixture of experts, and this model has none", str(cm.exception))
        self.assertNotIn("\n", str(cm.exception))

    def test_cache_names_and_llama_cpp_choice(self):
        names = self.m.hook_names()
        self.assertIn("blocks.1.mlp.hook_router_logits", names)
        self.assertIn("blocks.0.mlp.hook_expert_indices", names)
        self.assertNotIn("blocks.0.mlp.hook_post", names)  # no dense MLP: the experts are the MLP
        _, cache = self.m.run_with_cache(self.ids)
        order = llama_order("mixtral", 2, len(self.ids), 8)
        for layer in range(2):
            idx = cache[f"blocks.{layer}.mlp.hook_expert_indices"]
            self.assertEqual(idx.dtype, torch.int64)
            self.assertEqual(tuple(idx.shape), (1, len(self.ids), 2))
            self.assertTrue(np.array_equal(idx[0].numpy(), order[layer, :, :2]))
            w = cache[f"blocks.{layer}.mlp.hook_expert_weights"][0]
            self.assertTrue(torch.allclose(w.sum(-1), torch.ones(len(self.ids)), atol=1e-6))  # Mixtral renormalises
            self.assertEqual(tuple(cache[f"blocks.{layer}.mlp.hook_router_logits"].shape), (1, len(self.ids), 8))
            out = cache[f"blocks.{layer}.mlp.hook_expert_out"][0]           # [T, k, d]: each chosen expert's output
            mlp_out = (out * w.unsqueeze(-1)).sum(1)
            self.assertLess(float((mlp_out - cache[f"blocks.{layer}.hook_mlp_out"][0]).abs().max()), 1e-6)

    def test_weights_by_expert(self):
        w = self.m.weights()
        self.assertEqual(tuple(w["blocks.0.mlp.W_router"].shape), (64, 8))
        self.assertEqual(tuple(w["blocks.1.mlp.experts.7.W_in"].shape), (64, 32))
        self.assertEqual(tuple(w["blocks.1.mlp.experts.7.W_out"].shape), (32, 64))
        self.assertNotIn("blocks.0.mlp.W_in", w)

    def test_router_edit_reroutes(self):
        def prefer_6(logits, hook):
            logits[..., 6] += 50.0

        base = self.m.run_with_hooks(self.ids)
        logits, cache = self.m.run_with_cache(self.ids, fwd_hooks=[("blocks.1.mlp.hook_router_logits", prefer_6)])
        self.assertTrue(bool((cache["blocks.1.mlp.hook_expert_indices"][0, :, 0] == 6).all()))
        self.assertGreater(float((logits - base).abs().max()), 1e-3)

    def test_index_out_of_range_is_a_usage_error(self):
        def bad(idx, hook):
            idx[..., 0] = 8

        with self.assertRaises(vocablens.UsageError) as cm:
            self.m.run_with_hooks(self.ids, fwd_hooks=[("blocks.0.mlp.hook_expert_indices", bad)])
        self.assertIn("blocks.0.mlp.hook_expert_indices: expert index 8 is out of range [0, 8)", str(cm.exception))

    def test_shared_expert_neurons(self):
        q2 = vocablens.load_model(os.path.join(FAMILIES, "qwen2moe"))
        _, cache = q2.run_with_cache(ids_of("qwen2moe"), names_filter=["blocks.0.mlp.hook_post", "blocks.0.mlp.hook_expert_weights"])
        self.assertEqual(tuple(cache["blocks.0.mlp.hook_post"].shape), (1, 12, 64))  # the shared expert's width
        w = cache["blocks.0.mlp.hook_expert_weights"][0]
        self.assertTrue(bool((w.sum(-1) < 1).all()))  # Qwen2-MoE keeps the softmax's top-k as they are


def llama_gguf_py():
    """llama.cpp's gguf-py (scripts/setup_llama_ref.sh): its numpy dequantizer is the reference; missing is a failure."""
    ref = os.environ.get("VOCABLENS_LLAMA_REF") or os.path.expanduser("~/.cache/vocablens/llama-cpp-3.22.1")
    path = os.path.join(ref, "llama.cpp", "gguf-py")
    if not os.path.isdir(path):
        raise AssertionError(f"llama.cpp's gguf-py expected at {path} (run scripts/setup_llama_ref.sh)")
    import sys
    if path not in sys.path:
        sys.path.insert(0, path)
    import gguf
    return gguf


class QuantizedExperts(unittest.TestCase):
    def test_each_expert_view_is_its_slice_of_the_3d_tensor(self):
        # mixtral-q8_0.gguf: llama.cpp's quantizer (tests/llama_ref/lcpp_quantize.cpp) on the F32 twin. Each expert is
        # a packed view of its rows of ffn_*_exps; dequantized (vocablens's decoder) it must equal gguf-py's
        # dequantization of the same slice of the 3-D tensor.
        gguf = llama_gguf_py()
        path = os.path.join(FAMILIES, "mixtral", "mixtral-q8_0.gguf")
        r = gguf.GGUFReader(path)
        w = vocablens.load_model(path).weights()
        names = {"ffn_gate_exps": "W_gate", "ffn_up_exps": "W_in", "ffn_down_exps": "W_out"}
        seen = 0
        for t in r.tensors:
            kind = t.name.split(".")[2] if t.name.startswith("blk.") else ""
            if kind not in names:
                continue
            self.assertEqual(t.tensor_type.name, "Q8_0")
            deq = gguf.quants.dequantize(t.data, t.tensor_type)   # [E, out, in]
            layer = int(t.name.split(".")[1])
            for e in range(deq.shape[0]):
                ours = w[f"blocks.{layer}.mlp.experts.{e}.{names[kind]}"].numpy()   # [in, out]
                self.assertTrue(np.array_equal(ours, deq[e].T), f"{t.name} expert {e}")
                seen += 1
        self.assertEqual(seen, 2 * 3 * 8)


if __name__ == "__main__":
    unittest.main()
