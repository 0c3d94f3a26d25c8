"""Batch and comparison analyses from Python: lens_batch (= `lens --prompts`), compare_embeddings
(= `compare-embeddings`) and
compare (= `compare`) agree with the CLI file for file; compare's KL equals numpy's on the saved
distributions; a run against itself gives zeros; bad input raises with the CLI's one-line message."""
import json
import os
import unittest

import numpy as np

from support import cli, fixture, tempdir, vocablens
from test_agreement import compare_dirs

STORIES = fixture("stories260K/stories260K.bin")
XS = fixture("llama2xs/model.bin")
GPT2 = fixture("gpt2-tiny")


class Compare(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stories = vocablens.load_model(STORIES)
        cls.xs = vocablens.load_model(XS)

    def test_lens_batch_agrees_with_cli(self):
        path = os.path.join(tempdir("prompts"), "p.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"prompt": "Lily went to the", "target": " p"}) + "\n")
            f.write(json.dumps({"prompt": "Once upon a time"}) + "\n")
        d1, d2 = tempdir("cli"), tempdir("py")
        cli("lens", STORIES, "--prompts", path, "--top-k", "3", "--out", d1, "--format", "npy")
        r = vocablens.lens_batch(self.stories, path, top_k=3)
        self.assertEqual(r.kind, "logit_lens_batch")
        r.save(d2)
        compare_dirs(self, d1, d2, "logit_lens_batch")
        # The list form gives the same numbers as the file form.
        r2 = self.stories.lens_batch([{"prompt": "Lily went to the", "target": " p"}, "Once upon a time"], top_k=3)
        self.assertTrue(np.array_equal(r.arrays["target_prob"], r2.arrays["target_prob"], equal_nan=True))
        self.assertEqual(list(r2.tables["by_layer"].columns)[:3], ["prompt_index", "prompt", "target"])
        with self.assertRaises(ValueError):
            vocablens.lens_batch(self.stories, [])

    def test_compare_embeddings_agrees_with_cli(self):
        d1, d2 = tempdir("cli"), tempdir("py")
        cli("compare-embeddings", STORIES, XS, "--k", "5", "--spectrum-k", "8", "--out", d1, "--format", "npy")
        r = vocablens.compare_embeddings(self.stories, self.xs, k=5, spectrum_k=8)
        self.assertEqual(r.kind, "compare_embeddings")
        r.save(d2)
        compare_dirs(self, d1, d2, "compare_embeddings")
        # A model against itself: the identity rotation, CKA 1, full neighbour agreement.
        s = self.stories.compare_embeddings(self.stories, k=5, spectra=False).summary
        self.assertAlmostEqual(s["cka"], 1.0, places=6)
        self.assertAlmostEqual(s["knn_overlap_mean"], 1.0, places=9)
        with self.assertRaises(TypeError):
            vocablens.compare_embeddings(self.stories, "not a model")

    def test_compare(self):
        a = vocablens.lens(self.stories, "Lily went to the park", top_k=3, save_probs=True)
        b = vocablens.lens(self.stories, "Lily ran to the park", top_k=3, save_probs=True)
        x = vocablens.lens(self.xs, "Lily went to the park", top_k=3, save_probs=True)
        self.assertEqual(a.arrays["log_probs"].shape[2], 512)
        # Against itself: zeros.
        s = vocablens.compare(a, a)
        self.assertEqual(s.kind, "lens_compare")
        self.assertTrue(np.all(s.arrays["kl_ab"] == 0) and np.all(s.arrays["kl_ba"] == 0))
        self.assertTrue(np.all(np.nan_to_num(s.arrays["delta_prob"]) == 0))
        # KL(A||B) by numpy on the saved distributions.
        for other in (b, x):
            c = vocablens.compare(a, other)
            la, lb = a.arrays["log_probs"].astype(np.float64), other.arrays["log_probs"].astype(np.float64)
            kl = (np.exp(la) * (la - lb)).sum(-1)
            self.assertLess(float(np.abs(c.arrays["kl_ab"] - kl).max()), 1e-5)
            dp = a.arrays["target_prob"] - other.arrays["target_prob"]
            self.assertTrue(np.allclose(c.arrays["delta_prob"], dp, equal_nan=True, atol=1e-7))
        # Run directories: the CLI's compare of the two saved runs equals the module's.
        da, db, d1, d2 = tempdir("a"), tempdir("b"), tempdir("cli"), tempdir("py")
        a.save(da)
        b.save(db)
        cli("compare", da, db, "--out", d1, "--format", "npy")
        c = vocablens.compare(da, db)
        c.save(d2)
        compare_dirs(self, d1, d2, "lens_compare")
        # Bad input: different vocabularies, different token counts.
        g = vocablens.lens(vocablens.load_model(GPT2), "Lily went to the park", top_k=3)
        with self.assertRaisesRegex(vocablens.UsageError, "different vocabularies"):
            vocablens.compare(a, g)
        short = vocablens.lens(self.stories, "Lily went", top_k=3)
        with self.assertRaisesRegex(vocablens.UsageError, "has 9 tokens and B has 4"):
            vocablens.compare(a, short)
        self.assertEqual(vocablens.compare(a, short, align="end").summary["positions"], 4)
        with self.assertRaises(TypeError):
            vocablens.compare(a, 3)


if __name__ == "__main__":
    unittest.main()
