"""Interventions from Python: patch, ablate, attribute, steer, each checked against a quantity
computed another way (run_with_cache logits, or a forward pass of the same model)."""
import unittest

from support import fixture, vocablens

GPT2 = fixture("gpt2-tiny")


class Interventions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        cls.ids = cls.m.tokenize("The Eiffel Tower is in the city of")

    def logits_last(self, ids):
        logits, _ = self.m.run_with_cache(ids, names=["resid_post.0"])
        return logits[0, -1]

    def test_attribute_parts_sum_to_the_models_logit(self):
        tgt, wrong = self.ids[1], self.ids[2]
        r = vocablens.attribute(self.m, self.ids, tgt, wrong=wrong)
        self.assertEqual(r.kind, "logit_attribution")
        last = self.logits_last(self.ids)
        expected = float(last[tgt] - last[wrong])
        self.assertAlmostEqual(r.summary["model_value"], expected, delta=1e-4)
        self.assertAlmostEqual(r.summary["sum"], expected, delta=1e-4)
        self.assertEqual(tuple(r.tensor("heads").shape), (3, 4))

    def test_patch_end_points_are_the_clean_and_corrupt_runs(self):
        clean = self.ids
        corrupt = list(clean)
        corrupt[1] = self.ids[4]  # same length, one token changed
        tgt, wrong = 286, 262
        r = vocablens.patch(self.m, clean, corrupt, tgt, wrong=wrong, over="resid")
        self.assertEqual(r.kind, "activation_patching")
        c, k = self.logits_last(clean), self.logits_last(corrupt)
        self.assertAlmostEqual(r.summary["clean_metric"], float(c[tgt] - c[wrong]), delta=1e-4)
        self.assertAlmostEqual(r.summary["corrupt_metric"], float(k[tgt] - k[wrong]), delta=1e-4)
        restored = r.tensor("restored")
        self.assertEqual(tuple(restored.shape), (3, len(clean)))
        # patching the whole changed position at layer 0 is the clean run: restored = 1
        self.assertAlmostEqual(float(restored[0, 1]), 1.0, delta=1e-4)
        with self.assertRaises(vocablens.UsageError):
            vocablens.patch(self.m, clean, clean[:-1], tgt)

    def test_ablate_before_is_the_plain_forward(self):
        r = vocablens.ablate(self.m, self.ids, head="1.2")
        self.assertEqual(r.kind, "ablation")
        last = self.logits_last(self.ids)
        before = r.summary["before"]
        self.assertEqual(before["top"][0]["id"], int(last.argmax()))
        with self.assertRaises(ValueError):
            vocablens.ablate(self.m, self.ids)

    def test_methods_of_the_model(self):
        self.assertAlmostEqual(self.m.attribute(self.ids, self.ids[1]).summary["check"], 0.0, delta=1e-4)

    def test_steer_with_zero_scale_is_plain_generation(self):
        r = vocablens.steer(self.m, self.ids, " love", " hate", scale=0.0, steps=5)
        self.assertEqual(r.kind, "steering")
        self.assertEqual(r.summary["steered_ids"], r.summary["plain_ids"])
        r2 = vocablens.steer(self.m, self.ids, " love", " hate", scale=50.0, steps=5, layer=0)
        self.assertEqual(r2.summary["plain_ids"], r.summary["plain_ids"])
        self.assertNotEqual(r2.summary["steered_ids"], r2.summary["plain_ids"])


if __name__ == "__main__":
    unittest.main()
