"""vocablens.load_transcoders: circuit-tracer's transcoder folders from Python, against the float64 references of
tests/fixtures/transcoders/make_transcoders.py (written from circuit-tracer's definitions); a layer as an Sae spliced
at the set's own hook point; bad folders as typed exceptions of one line."""
import json
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np
import torch

from support import SOURCE, fixture, tempdir, vocablens


class Transcoders(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempdir("transcoders")
        subprocess.run([sys.executable, os.path.join(SOURCE, "tests", "fixtures", "transcoders", "make_transcoders.py"),
                        cls.dir], check=True, stdout=subprocess.DEVNULL)
        cls.m = vocablens.load_model(fixture("gpt2-tiny"))
        cls.x = np.load(os.path.join(cls.dir, "x.npy"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def ref(self, name, what):
        return np.load(os.path.join(self.dir, "ref", name + "." + what + ".npy"))

    def test_every_case_as_its_reference(self):
        with open(os.path.join(self.dir, "cases.json")) as f:
            cases = json.load(f)
        self.assertEqual(len(cases), 4)
        for name, c in cases.items():
            s = vocablens.load_transcoders(os.path.join(self.dir, name))
            self.assertIsInstance(s, vocablens.TranscoderSet)
            self.assertEqual(s.kind, "cross_layer_transcoder" if c["kind"] == "cross_layer" else "transcoder_set")
            self.assertEqual((len(s), s.d_in, s.d_transcoder, s.d_out), (3, 64, 48, 64))
            self.assertEqual(s.input_hook(1), "blocks.1." + c["hook_in"])
            s.check_fits(self.m)
            acts, recon, rows = self.ref(name, "acts"), self.ref(name, "recon"), self.ref(name, "rows")
            feats = [s.encode(l, torch.from_numpy(self.x[l])) for l in range(3)]
            for l in range(3):
                self.assertLess(np.abs(feats[l].numpy() - acts[l]).max(), 1e-9, (name, l))
                r = s.decoder_rows(l, 5).double().numpy()
                self.assertTrue(np.array_equal(r, rows[l][:s.n_outputs(l)]), (name, l))
                got = s.decode(l, feats, torch.from_numpy(self.x[l])).numpy()
                self.assertLess(np.abs(got - recon[l]).max(), 1e-9, (name, l))
            sae = s.layer(2)
            self.assertIsInstance(sae, vocablens.Sae)
            self.assertEqual(sae.hook_name, s.input_hook(2))

    def test_a_layer_spliced_at_its_own_point(self):
        # plt_jumprelu reads ln2.hook_normalized: the features of what the forward has there.
        s = vocablens.load_transcoders(os.path.join(self.dir, "plt_jumprelu"))
        ids = [464, 412, 733, 417, 8765]
        _, cache = self.m.run_with_cache(ids, names_filter=[s.input_hook(1)])
        x = cache[s.input_hook(1)][0].double()
        seen = {}

        def grab(t, hook):
            seen["f"] = s.layer(1).encode(t[0].double())
        self.m.run_with_hooks(ids, fwd_hooks=[(s.layer(1).hook_name, grab)])
        self.assertTrue(torch.equal(seen["f"], s.encode(1, x)))
        self.assertGreater(int((seen["f"] != 0).sum()), 0)

    def test_bad_folders(self):
        for case, exc, part in (("bad_kind", vocablens.FormatError, "unknown model_kind 'sparse_autoencoder'"),
                                ("bad_hook", vocablens.FormatError, "feature_input_hook 'hook_nowhere'"),
                                ("bad_clt_nan", vocablens.FormatError, "W_dec_1.safetensors: tensor 'W_dec_1' has NaN")):
            with self.assertRaises(exc) as e:
                vocablens.load_transcoders(os.path.join(self.dir, case))
            self.assertIn(part, str(e.exception))
            self.assertNotIn("\n", str(e.exception))
        s = vocablens.load_transcoders(os.path.join(self.dir, "bad_clt_layers"))
        with self.assertRaises(ValueError) as e:   # a UsageError: two good inputs that do not pair
            s.check_fits(self.m)
        self.assertIn("a cross-layer transcoder of 2 layers", str(e.exception))
        with self.assertRaises(TypeError):
            vocablens.load_transcoders(5)


if __name__ == "__main__":
    unittest.main()
