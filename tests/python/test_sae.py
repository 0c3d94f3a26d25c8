"""vocablens.load_sae / feature_logits / feature_lens: encode/decode equal the float64 NumPy references
of tests/fixtures/sae/make_saes.py, feature_logits equals `vocablens features` (same run directory), and
bad input raises the CLI's one-line error."""
import os
import subprocess
import unittest

import numpy as np
import torch

from support import SOURCE, cli, fixture, tempdir, vocablens
from test_agreement import compare_dirs

GPT2 = fixture("gpt2-tiny")


class Sae(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fx = tempdir("sae-fixtures")
        subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "tests", "fixtures", "sae", "make_saes.py"), cls.fx,
                        GPT2], check=True)
        cls.model = vocablens.load_model(GPT2)

    def test_encode_decode_reference(self):
        import json
        with open(os.path.join(self.fx, "cases.json")) as f:
            cases = json.load(f)
        x = torch.from_numpy(np.load(os.path.join(self.fx, "x.npy")))
        for name, c in cases.items():
            sae = vocablens.load_sae(c["path"])
            self.assertEqual(sae.hook_name, c["hook"], name)
            acts = sae.encode(x)
            ref_a = np.load(os.path.join(self.fx, "ref", name + ".acts.npy"))
            ref_y = np.load(os.path.join(self.fx, "ref", name + ".recon.npy"))
            self.assertLessEqual(np.abs(acts.numpy() - ref_a).max(), 1e-5, name)
            self.assertLessEqual(np.abs(sae.forward(x).numpy() - ref_y).max(), 1e-5, name)
            self.assertLessEqual(np.abs(sae.decode(acts, x).numpy() - ref_y).max(), 1e-5, name)
            self.assertEqual(tuple(sae.W_enc.shape), (64, 96))
            self.assertEqual(tuple(sae.W_dec.shape), (96, 64))
            self.assertIsInstance(sae.cfg, dict)

    def test_splice_hook(self):
        sae = vocablens.load_sae(os.path.join(self.fx, "saelens_standard"))
        name, fn = vocablens.splice_hook(sae, error_term=True)
        self.assertEqual(name, "blocks.1.hook_resid_pre")
        x = torch.randn(1, 3, 64)
        self.assertTrue(torch.allclose(fn(x), x, atol=1e-5))

    def test_feature_logits_agrees_with_cli(self):
        sae_dir = os.path.join(self.fx, "saelens_standard")
        d1, d2 = tempdir("cli"), tempdir("py")
        cli("features", GPT2, "--sae", sae_dir, "--top-k", "7", "--features", "0,5-9", "--out", d1, "--format", "npy")
        sae = vocablens.load_sae(sae_dir)
        r = vocablens.feature_logits(self.model, sae, top_k=7, features="0,5-9", progress=False)
        self.assertEqual(r.kind, "features")
        r.save(d2)
        compare_dirs(self, d1, d2, "features")
        ref = np.load(os.path.join(self.fx, "ref", "logits.top_ids.npy"))
        self.assertTrue(np.array_equal(r.arrays["top_ids"], ref[[0, 5, 6, 7, 8, 9]]))

    def test_feature_lens(self):
        sae = vocablens.load_sae(os.path.join(self.fx, "saelens_standard"))
        r = vocablens.feature_lens(self.model, sae, "The Eiffel Tower is in", top_features=3)
        self.assertEqual(r.kind, "feature_lens")
        self.assertEqual(r.arrays["top_features"].shape[1], 3)

    def test_feature_corpus_agrees_with_cli(self):
        sae_dir = os.path.join(self.fx, "saelens_jumprelu")
        corpus = os.path.join(tempdir("corpus"), "c.txt")
        with open(corpus, "w") as f:
            f.write("The Eiffel Tower is in the city of Paris. Once upon a time there was a little girl named Lily.\n")
        d1, d2 = tempdir("cli"), tempdir("py")
        cli("features", GPT2, "--sae", sae_dir, "--corpus", corpus, "--window", "16", "--contexts", "2", "--out", d1,
            "--format", "npy")
        sae = vocablens.load_sae(sae_dir)
        r = vocablens.feature_corpus(self.model, sae, corpus, window=16, contexts=2, progress=False)
        self.assertEqual(r.kind, "feature_corpus")
        r.save(d2)
        compare_dirs(self, d1, d2, "feature_corpus")
        # the density is the fraction of scored positions (every token but the last) where the feature fires
        m = r.summary["metrics"]
        np.testing.assert_array_equal(r.arrays["fire_count"], r.arrays["histogram"].sum(axis=1))
        np.testing.assert_allclose(r.arrays["density"], r.arrays["fire_count"] / m["positions"], rtol=0, atol=0)

    def test_steer_feature_hook(self):
        sae = vocablens.load_sae(os.path.join(self.fx, "saelens_standard"))
        name, fn = vocablens.steer_feature_hook(sae, 5, 3.0)
        self.assertEqual(name, "blocks.1.hook_resid_pre")
        ids = [464, 412, 733, 8765]
        got = self.model.run_with_hooks(ids, fwd_hooks=[(name, fn)])
        vec = sae.W_dec[5].double() * 3.0

        def by_hand(x, hook):
            return (x.double() + vec).float()

        want = self.model.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_resid_pre", by_hand)])
        self.assertLessEqual(float((got - want).abs().max()), 1e-5)
        self.assertGreater(float((got - self.model.run_with_hooks(ids)).abs().max()), 1e-3)
        with self.assertRaises(ValueError):
            vocablens.steer_feature_hook(sae, 96)

    def test_errors(self):
        with self.assertRaises(vocablens.FormatError) as e:
            vocablens.load_sae(os.path.join(self.fx, "bad_unknown"))
        self.assertIn("no SAE layout found", str(e.exception))
        with self.assertRaises(vocablens.FormatError) as e:
            vocablens.load_sae(os.path.join(self.fx, "bad_nan"))
        self.assertIn("NaN", str(e.exception))
        with self.assertRaises(TypeError):
            vocablens.feature_logits(self.model, "not an sae")
        bad = vocablens.load_sae(os.path.join(self.fx, "bad_din"))
        with self.assertRaises(vocablens.UsageError) as e:      # two good files that do not pair
            vocablens.feature_logits(self.model, bad, progress=False)
        self.assertIn("d_in 32 does not match", str(e.exception))


if __name__ == "__main__":
    unittest.main()
