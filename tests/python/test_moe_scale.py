"""Scaling one expert's output (`scale_expert`, "L.E=FACTOR") on the Mixtral fixture: factor 0 is the zero ablation
bit for bit, factor 1 is the unedited forward bit for bit, and other factors agree with the same edit made by hand
(a hook on mlp.hook_expert_out that multiplies the expert's slots) and with llama_numpy.py's float64 forward
with that expert's router weight scaled."""
import json
import os
import unittest

import numpy as np

import llama_numpy
import test_moe  # its fixture helpers (a module, not its TestCase: the loader does not run those twice)
from support import cli, vocablens

FAMILIES = test_moe.FAMILIES


def scaled_forward(model, ids, layer, expert, factor):
    """llama_numpy's float64 forward with `expert`'s router weight at `layer` times `factor` where it is chosen."""
    b, idx = f"blocks.{layer}.mlp.", {}

    def keep(t):
        idx["i"] = t.copy()
        return t

    def scale_w(t):
        t = t.copy()
        t[idx["i"] == expert] *= factor
        return t

    return llama_numpy.forward(model, ids, edits={b + "hook_expert_indices": keep, b + "hook_expert_weights": scale_w})


class MoeScale(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(os.path.join(FAMILIES, "mixtral"))
        cls.ids = test_moe.ids_of("mixtral")
        cls.ref_model = llama_numpy.load(os.path.join(FAMILIES, "mixtral"))
        cls.ref = llama_numpy.forward(cls.ref_model, cls.ids)
        # Layer 1's first token's first choice: an expert that is chosen (so scaling it changes something).
        cls.E = int(cls.ref["blocks.1.mlp.hook_expert_indices"][0, 0])

    def test_factor_zero_is_the_zero_ablation_bit_for_bit(self):
        spec = f"1.{self.E}"
        a = vocablens.experts(self.m, prompt=self.ids, ablate_expert=[spec], ablate_mode="zero", progress=False)
        s = vocablens.experts(self.m, prompt=self.ids, scale_expert=[spec + "=0"], progress=False)
        self.assertGreater(a.summary["next_token"]["max_logit_change"], 1e-3)  # the ablation changes something
        self.assertEqual(a.summary["next_token"]["max_logit_change"], s.summary["next_token"]["max_logit_change"])
        for name in ("load", "mean_weight"):
            self.assertTrue(np.array_equal(a.arrays[name], s.arrays[name], equal_nan=True), name)
        # Every table (each expert's written tokens and scores, the per-token lists, the next tokens): the same
        # values, compared in their shortest round-trip form (exact for floats).
        self.assertEqual(json.dumps(a.table_rows(), default=str), json.dumps(s.table_rows(), default=str))
        la = vocablens.lens(self.m, self.ids, ablate_expert=[spec], top_k=5, progress=False)
        ls = vocablens.lens(self.m, self.ids, scale_expert=[spec + "=0"], top_k=5, progress=False)
        self.assertEqual(ls.settings["scale_expert"], [spec + "=0"])
        for name in la.arrays:
            self.assertTrue(np.array_equal(la.arrays[name], ls.arrays[name], equal_nan=True), name)

    def test_factor_one_changes_no_bit(self):
        s = vocablens.experts(self.m, prompt=self.ids, scale_expert=[f"1.{self.E}=1", "0.3=1"], progress=False)
        self.assertEqual(s.summary["next_token"]["max_logit_change"], 0.0)
        self.assertEqual(s.summary["next_token"]["ablated"], s.summary["next_token"]["unablated"])
        plain = vocablens.lens(self.m, self.ids, top_k=5, progress=False)
        one = vocablens.lens(self.m, self.ids, scale_expert=[f"1.{self.E}=1"], top_k=5, progress=False)
        for name in plain.arrays:
            self.assertTrue(np.array_equal(plain.arrays[name], one.arrays[name], equal_nan=True), name)

    def test_factor_is_the_hook_edit_and_the_float64_reference(self):
        E = self.E
        base = self.m.run_with_hooks(self.ids)
        for factor in (2.0, -0.75, 0.3):
            with self.subTest(factor=factor):
                idx = {}

                def keep(t, hook):
                    idx["i"] = t.clone()

                def scale_out(t, hook):
                    t[idx["i"] == E] *= factor  # the expert's slots: its unweighted output, so its weighted one
                    return t

                by_hand = self.m.run_with_hooks(self.ids, fwd_hooks=[("blocks.1.mlp.hook_expert_indices", keep),
                                                                    ("blocks.1.mlp.hook_expert_out", scale_out)])
                r = vocablens.experts(self.m, prompt=self.ids, scale_expert=[f"1.{E}={factor:g}"], progress=False)
                self.assertEqual(r.settings["scale_expert"], [f"1.{E}={factor:g}"])
                change = float((by_hand - base).abs().max())
                self.assertGreater(change, 1e-3)
                # Same product in another order (w·(f·o) against (f·w)·o): float32 rounding apart.
                self.assertAlmostEqual(r.summary["next_token"]["max_logit_change"], change, delta=1e-5)

                want = scaled_forward(self.ref_model, self.ids, 1, E, factor)
                self.assertLess(np.abs(by_hand[0].double().numpy() - want["logits"]).max(), 1e-4)
                self.assertAlmostEqual(r.summary["next_token"]["max_logit_change"],
                                       float(np.abs(want["logits"] - self.ref["logits"]).max()), delta=1e-4)
                lens = vocablens.lens(self.m, self.ids, scale_expert=[f"1.{E}={factor:g}"], top_k=3, progress=False)
                top = np.argsort(-want["logits"], axis=-1, kind="stable")[:, :3]
                self.assertTrue(np.array_equal(lens.arrays["top_ids"][-1], top))

    def test_attribute_splits_the_scaled_forward(self):
        # `attribute` with scale_expert splits the edited forward's logit: its value and each chosen expert's part
        # (its router weight, scaled, times its output, through the final norm frozen at the edited run's scale)
        # against llama_numpy's float64 forward with the same edit; factor 0 is the zero ablation, part for part.
        E = int(self.ref["blocks.0.mlp.hook_expert_indices"][-1, 0])  # chosen at the position read
        target = int(np.argmax(self.ref["logits"][-1]))
        w, eps = self.ref_model["w"], self.ref_model["eps"]

        def parts_of(r):
            cols, rows = [(c, rs) for name, c, rs in r.table_rows() if name == "components"][0]
            return [dict(zip(cols, row)) for row in rows]

        for factor in (2.5, -0.5):
            with self.subTest(factor=factor):
                spec = f"0.{E}={factor:g}"
                want = scaled_forward(self.ref_model, self.ids, 0, E, factor)
                self.assertGreater(abs(want["logits"][-1, target] - self.ref["logits"][-1, target]), 1e-3)
                r = vocablens.attribute(self.m, self.ids, target=target, scale_expert=[spec])
                self.assertEqual(r.settings["scale_expert"], [spec])
                self.assertLess(abs(r.summary["model_value"] - want["logits"][-1, target]), 1e-4)
                parts = parts_of(r)
                self.assertLess(abs(sum(p["value"] for p in parts) - want["logits"][-1, target]), 1e-4)
                x = want["blocks.1.hook_resid_post"][-1]
                u = w["model.norm.weight"] * w["lm_head.weight"][target] / np.sqrt((x ** 2).mean() + eps)
                for layer in range(2):
                    b = f"blocks.{layer}.mlp."
                    idx, wts, out = (want[b + n][-1] for n in ("hook_expert_indices", "hook_expert_weights",
                                                               "hook_expert_out"))
                    got = {p["expert"]: p["value"] for p in parts if p["kind"] == "expert" and p["layer"] == layer}
                    self.assertEqual(sorted(got), sorted(int(e) for e in idx))
                    for s_ in range(2):
                        self.assertLess(abs(got[int(idx[s_])] - float(wts[s_] * out[s_] @ u)), 1e-4)

        zero = vocablens.attribute(self.m, self.ids, target=target, scale_expert=[f"0.{E}=0"])
        ablated = vocablens.attribute(self.m, self.ids, target=target, ablate_expert=[f"0.{E}"])
        self.assertEqual(ablated.settings["ablate_expert"], [f"0.{E}"])
        self.assertEqual(zero.summary["model_value"], ablated.summary["model_value"])
        self.assertEqual(parts_of(zero), parts_of(ablated))
        self.assertEqual([p["value"] for p in parts_of(zero) if p["name"] == f"L0E{E}"], [0.0])
        self.assertNotEqual(zero.summary["model_value"], self.ref["logits"][-1, target])

    def test_generate_scales_every_step(self):
        # Greedy decoding with the expert scaled, against the float64 forward's argmax with the same edit at each step.
        E, factor, prompt = self.E, 3.0, self.ids[:6]

        def greedy(scale):
            seq = list(prompt)
            for _ in range(5):
                out = scaled_forward(self.ref_model, seq, 1, E, scale)
                seq.append(int(np.argmax(out["logits"][-1])))
            return seq

        rc, out, err = cli("generate", os.path.join(FAMILIES, "mixtral"), "--prompt-ids", ",".join(map(str, prompt)),
                           "--steps", 5, "--stop-id", -1, "--ids", "--scale-expert", f"1.{E}={factor:g}")
        lines = out.strip().split("\n")
        self.assertEqual(len(lines), 2, out)
        self.assertTrue(lines[0].startswith("unsteered: ") and lines[1].startswith(f"steered (experts 1.{E}=3): "), out)
        plain, steered = ([int(x) for x in l.split(": ", 1)[1].split()] for l in lines)
        self.assertEqual(plain, greedy(1.0))
        self.assertEqual(steered, greedy(factor))
        self.assertNotEqual(plain, steered)  # the scaling changes the text, so the comparison can fail
        rc, _, err = cli("generate", os.path.join(FAMILIES, "mixtral"), "--steer", "a-b", "--scale-expert", "1.0=2", check=False)
        self.assertEqual(rc, 2)  # a usage error
        self.assertIn("not both", err)
        rc, _, err = cli("generate", os.path.join(FAMILIES, "qwen3"), "--scale-expert", "0.1=2", check=False)
        self.assertEqual(rc, 2)  # a usage error
        self.assertIn("needs a mixture of experts", err)
        self.assertEqual(len(err.strip().split("\n")), 1, err)

    def test_bad_specs_are_one_line(self):
        for spec, msg in (("1.2", "expected LAYER.EXPERT=FACTOR"), ("1.2=x", "the factor is not a number"),
                          ("1.2=nan", "the factor must be finite"), ("1.8=2", "expert out of range"),
                          ("5.1=2", "layer out of range")):
            with self.subTest(spec=spec):
                with self.assertRaises(vocablens.UsageError) as cm:
                    vocablens.experts(self.m, prompt=self.ids, scale_expert=[spec], progress=False)
                self.assertIn(msg, str(cm.exception))
                self.assertNotIn("\n", str(cm.exception))
        with self.assertRaises(vocablens.UsageError) as cm:
            vocablens.lens(self.m, self.ids, scale_expert=["1.2=2", "1.2=3"], progress=False)
        self.assertIn("scaled twice", str(cm.exception))
        dense = vocablens.load_model(os.path.join(FAMILIES, "qwen3"))
        with self.assertRaises(vocablens.UsageError) as cm:
            vocablens.lens(dense, [1, 2, 3], scale_expert=["0.1=2"], progress=False)
        self.assertIn("needs a mixture of experts", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
