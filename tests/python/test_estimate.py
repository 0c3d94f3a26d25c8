"""vocablens.estimate(): the peak memory an analysis would need, from the same declaration as the CLI's --dry-run
(vocablens/analysis_estimate.hpp). Checked against the CLI's own dry run and the shapes it must count."""
import json
import os
import re
import subprocess
import unittest

from support import CLI, SOURCE, cli, fixture, vocablens

GPT2 = fixture("gpt2-tiny")
TRANSCODERS = os.path.join(SOURCE, "tests", "fixtures", "graph", "gpt2-tiny")


class Estimate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        with open(GPT2 + "/config.json") as f:
            cls.cfg = json.load(f)

    def test_equals_the_cli_dry_run(self):
        e = vocablens.estimate("lens", self.m, [5, 6, 7])
        _, out, _ = cli("lens", GPT2, "--prompt-ids", "5,6,7", "--dry-run")
        total = re.search(r"total\s+([0-9.]+) MiB", out)
        self.assertIsNotNone(total, out)
        self.assertEqual("{:.1f}".format(e["total_bytes"] / 1048576.0), total.group(1))
        self.assertIn(e["what"], out)
        self.assertIn("MiB", repr(e))

    def test_attribute_project_ablate_declare_their_estimates_too(self):
        # Their estimates moved from their commands into their declarations: Python sees the same total as the
        # command's --dry-run, and it counts more than the weights (the forward's recorded residuals).
        cases = [("attribute", {"target": "#5"}, ["--target", "#5"], "the attribution of 4 tokens"),
                 ("project", {"hook": "resid_post.1"}, ["--hook", "resid_post.1"], "the projection of 4 tokens"),
                 ("ablate", {"head": ["0.1"]}, ["--head", "0.1"], "ablating over 4 tokens")]
        for name, kwargs, flags, what in cases:
            with self.subTest(name):
                e = vocablens.estimate(name, self.m, [5, 6, 7, 8], **kwargs)
                _, out, _ = cli(name, GPT2, "--prompt-ids", "5,6,7,8", *flags, "--dry-run")
                total = re.search(r"total\s+([0-9.]+) MiB", out)
                self.assertIsNotNone(total, out)
                self.assertEqual("{:.1f}".format(e["total_bytes"] / 1048576.0), total.group(1))
                self.assertIn(what, e["what"])
                self.assertGreater(e["total_bytes"], vocablens.estimate("positions", self.m)["total_bytes"])

    def test_heads_declares_its_estimate(self):
        # No forward pass: the weights and the read side; the same total as `heads --dry-run`, and the pseudo-inverse
        # costs more than the transpose.
        e = vocablens.estimate("heads", self.m, layers="0", heads="0")
        _, out, _ = cli("heads", GPT2, "--layer", "0", "--head", "0", "--dry-run")
        total = re.search(r"total\s+([0-9.]+) MiB", out)
        self.assertIsNotNone(total, out)
        self.assertEqual("{:.1f}".format(e["total_bytes"] / 1048576.0), total.group(1))
        self.assertIn("inverse", e["reduce"])

    def test_counts_what_the_options_add(self):
        ids = list(range(10, 110))
        plain = vocablens.estimate("lens", self.m, ids)
        probs = vocablens.estimate("lens", self.m, ids, save_probs=True)
        n, V = self.cfg["n_layer"] + 1, self.cfg["vocab_size"]
        # every layer's [T, V] distribution, float32
        self.assertAlmostEqual(probs["total_bytes"] - plain["total_bytes"], n * 100 * V * 4, delta=1)
        self.assertIn("save_probs", probs["reduce"])
        self.assertGreater(plain["total_bytes"], vocablens.estimate("lens", self.m, ids[:4])["total_bytes"])
        # what each item is: the weights and the lens's stack are named
        self.assertTrue(any("normalised residuals" in w for w, _ in plain["items"]), plain["items"])

    def test_bad_arguments_are_typed_one_liners(self):
        with self.assertRaises(TypeError) as cm:
            vocablens.estimate("lens", self.m, "Hi", top_kk=3)
        self.assertIn("top_kk", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            vocablens.estimate("lens", self.m, "Hi", top_k=-1)
        self.assertIn("top_k", str(cm.exception))
        with self.assertRaises(ValueError):
            vocablens.estimate("no_such_analysis", self.m)
        with self.assertRaises(TypeError):
            vocablens.estimate("lens", "not a model", "Hi")

    def test_a_weights_only_analysis_counts_its_own_phase(self):
        # positions: no forward pass; its Gram matrix of P positions is P x P float32 beyond the weights.
        P = min(64, self.m.cfg.n_ctx)
        small = vocablens.estimate("positions", self.m, max_positions=P // 2)
        e = vocablens.estimate("positions", self.m, max_positions=P)
        self.assertEqual(len(e["phases"]), 1)
        self.assertGreaterEqual(e["phases"][0][1], P * P * 4)
        self.assertGreater(e["total_bytes"], small["total_bytes"])

    def test_a_refused_graph_says_what_fits_as_the_cli_does(self):
        # graph's estimate knows the largest max_feature_nodes that fits a limit; Python spells it as a keyword,
        # and it is the number the CLI's dry run gives under the same limit (VOCABLENS_MEMORY_LIMIT).
        prompt = "The Eiffel Tower is in Paris and the Colosseum is in Rome. " * 5
        one = vocablens.estimate("graph", self.m, prompt, transcoders=TRANSCODERS, max_feature_nodes=1)["total_bytes"]
        e = vocablens.estimate("graph", self.m, prompt, transcoders=TRANSCODERS)
        self.assertGreater(e["total_bytes"], one + 100 * 2 ** 20)
        self.assertIsNone(vocablens.estimate("lens", self.m, [5, 6])["reduce_within"])  # the lens has no such advice
        limit = int(one + 40 * 2 ** 20)
        advice = e["reduce_within"](limit)
        m = re.search(r"give max_feature_nodes=(\d+) or less", advice)
        self.assertIsNotNone(m, advice)
        n = int(m.group(1))
        self.assertGreater(n, 1)
        fits = lambda k: vocablens.estimate("graph", self.m, prompt, transcoders=TRANSCODERS, max_feature_nodes=k)["total_bytes"]
        self.assertLessEqual(fits(n), limit)
        self.assertGreater(fits(n + 1), limit)
        env = dict(os.environ, VOCABLENS_MEMORY_LIMIT=str(limit))
        out = subprocess.run([CLI, "graph", GPT2, "--transcoders", TRANSCODERS, "--prompt", prompt, "--dry-run"],
                             capture_output=True, text=True, env=env).stdout
        self.assertIn("give --max-feature-nodes {} or less".format(n), out)


if __name__ == "__main__":
    unittest.main()
