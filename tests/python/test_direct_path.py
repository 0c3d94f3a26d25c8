"""direct_path (the zero-layer bigram reading, Elhage et al. 2021) against a float64 NumPy reference written from
its definition — logits(t) = W_U · LayerNorm_f(W_E[t]) — on gpt2-tiny's weights read straight from the
safetensors file by gpt2_numpy (not through vocablens); and the same analysis from every surface the declaration makes: the
module function, the Model method, `vocablens direct-path` (a command no src/cli file writes) and its stub."""
import json
import unittest

import numpy as np

import gpt2_numpy
from support import cli, fixture, vocablens

GPT2 = fixture("gpt2-tiny")
PROMPT = "The Eiffel Tower is in the city of"


def reference_logits(ids):
    # gpt2_numpy reads model.safetensors by hand (float64); the definition, written here: the embedding row alone
    # through the final LayerNorm, then the tied unembedding (GPT-2 has no b_U).
    w, cfg = gpt2_numpy.read_weights(GPT2)
    h = gpt2_numpy.layer_norm(w["wte.weight"][ids], w["ln_f.weight"], w["ln_f.bias"], cfg["layer_norm_epsilon"])
    return h @ w["wte.weight"].T                                          # [T, V]


class DirectPath(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        cls.r = vocablens.direct_path(cls.m, PROMPT, top_k=5)

    def test_against_float64_reference(self):
        ids = self.r.arrays["ids"]
        self.assertEqual(ids.tolist(), self.m.tokenize(PROMPT))
        ref = reference_logits(ids)
        for direction, sign in (("top", -1), ("bottom", 1)):
            got_ids, got = self.r.arrays[direction + "_ids"], self.r.arrays[direction + "_logits"]
            self.assertEqual(got.shape, (len(ids), 5))
            for t in range(len(ids)):
                order = np.argsort(sign * ref[t], kind="stable")
                # each listed logit is the reference's logit of that token (fp32 1e-4), in order ...
                np.testing.assert_allclose(got[t], ref[t][got_ids[t]], rtol=0, atol=1e-4)
                # ... and the list is the reference's own k best, up to swaps within 1e-4
                np.testing.assert_allclose(got[t], ref[t][order[:5]], rtol=0, atol=1e-4)
                self.assertEqual(set(got_ids[t][:4].tolist()) - set(order[:6].tolist()), set())

    def test_every_surface(self):
        by_method = self.m.direct_path(PROMPT, top_k=5)
        np.testing.assert_array_equal(by_method.arrays["top_ids"], self.r.arrays["top_ids"])
        _, out, _ = cli("direct-path", GPT2, "--prompt", PROMPT, "--top-k", "5", "--format", "json")
        doc = json.loads(out)
        self.assertEqual(doc["kind"], "direct_path")
        self.assertEqual(doc["settings"]["top_k"], 5)
        self.assertIn("direct_path", vocablens.__all__)
        _, text, _ = cli("direct-path", GPT2, "--prompt", PROMPT, "--top-k", "2", "--no-bottom")
        lines = text.splitlines()
        self.assertEqual(lines[2].split(), list(self.r.tables["top_k"].columns))   # the Result's table, printed
        first = self.r.tables["top_k"].iloc[0]
        self.assertEqual(lines[3].split()[5], str(first["next_id"]))
        self.assertEqual(len(lines), 3 + 2 * len(self.r.arrays["ids"]))              # --no-bottom: top rows only
        from vocablens import _stubs
        self.assertIn("def direct_path(model: Model, prompt:", _stubs.render(vocablens._core.analyses_schema()))

    def test_bad_input_is_one_line(self):
        with self.assertRaises(ValueError):
            vocablens.direct_path(self.m, PROMPT, top_k=0)
        code, _, err = cli("direct-path", GPT2, "--prompt", PROMPT, "--top-k", "0", check=False)
        self.assertEqual(code, 2)
        self.assertIn("direct_path: --top-k: must be >= 1", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
