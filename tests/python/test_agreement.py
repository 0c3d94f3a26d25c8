"""The module's numbers equal the CLI's: every analysis is run both ways on the fixtures, and the two run
directories must hold the same files, the same arrays (bit for bit), the same tables (CSV byte for byte),
the same settings and summary."""
import csv
import io
import json
import os
import unittest

import numpy as np

from support import cli, fixture, tempdir, vocablens

GPT2 = fixture("gpt2-tiny")
STORIES = fixture("stories260K/stories260K.bin")
PROMPT = "The Eiffel Tower is in the city of"


def without_timings(x):
    """JSON with every wall-clock field ("seconds": ...) removed: the one thing two runs may not share."""
    if isinstance(x, dict):
        return {k: without_timings(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [without_timings(v) for v in x]
    return x


def csv_without_timings(raw):
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))
    drop = [i for i, c in enumerate(rows[0]) if c == "seconds"] if rows else []
    return [[c for i, c in enumerate(r) if i not in drop] for r in rows]


def compare_dirs(tc, cli_dir, py_dir, kind):
    a, b = sorted(os.listdir(cli_dir)), sorted(os.listdir(py_dir))
    tc.assertEqual(a, b, "files of the run directories")
    tc.assertIn(kind + ".json", a)
    for name in a:
        pa, pb = os.path.join(cli_dir, name), os.path.join(py_dir, name)
        if name.endswith(".npy"):
            x, y = np.load(pa), np.load(pb)
            tc.assertEqual(x.dtype, y.dtype, name)
            tc.assertEqual(x.shape, y.shape, name)
            tc.assertTrue(np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name + ": arrays differ")
        elif name.endswith(".csv"):
            with open(pa, "rb") as f, open(pb, "rb") as g:
                # cell text compared as written (same formatting, same digits); timing columns left out
                tc.assertEqual(csv_without_timings(f.read()), csv_without_timings(g.read()), name + ": tables differ")
        elif name.endswith(".json"):
            with open(pa) as f, open(pb) as g:
                ja, jb = json.load(f), json.load(g)
            for key in ("kind", "settings", "summary"):
                tc.assertEqual(without_timings(ja.get(key)), without_timings(jb.get(key)), name + ": " + key + " differs")
            pa_, pb_ = ja.get("provenance", {}), jb.get("provenance", {})
            for key in ("model_path", "config_sha256", "config_hashed", "model", "vocablens_version"):
                tc.assertEqual(pa_.get(key), pb_.get(key), name + ": provenance." + key)
            tc.assertTrue(pb_["command_line"].startswith("python: vocablens."), pb_["command_line"])


class Agreement(unittest.TestCase):
    def both(self, kind, cli_args, fn, /, *args, **kwargs):
        """Runs `vocablens <cli_args> --out D1` (kept in self.cli_dir) and fn(*args, **kwargs).save(D2); compares;
        returns the Result."""
        d1, d2 = tempdir("cli"), tempdir("py")
        self.cli_dir = d1
        cli(*cli_args, "--out", d1, "--format", "npy")
        r = fn(*args, **kwargs)
        self.assertIsInstance(r, vocablens.Result)
        self.assertEqual(r.kind, kind)
        r.save(d2)
        compare_dirs(self, d1, d2, kind)
        return r

    @classmethod
    def setUpClass(cls):
        cls.gpt2 = vocablens.load_model(GPT2)
        cls.stories = vocablens.load_model(STORIES)

    def test_lens(self):
        r = self.both("logit_lens", ["lens", GPT2, "--prompt", PROMPT, "--top-k", "5"],
                      vocablens.lens, self.gpt2, PROMPT, top_k=5)
        self.assertEqual(r.arrays["top_probs"].shape, (4, 10, 5))
        self.assertEqual(list(r.tables["top_k"].columns)[:3], ["layer", "hook", "position"])

    def test_lens_target_pinv_mid(self):
        self.both("logit_lens", ["lens", STORIES, "--prompt", "Once upon a time", "--target-id", "400",
                                 "--unembed", "pinv", "--resid-mid"],
                  self.stories.lens, "Once upon a time", target=400, unembed="pinv", resid_mid=True)

    def test_lens_decoder_blocks(self):
        self.both("logit_lens", ["lens", GPT2, "--prompt", PROMPT, "--decoder-blocks", "1"],
                  vocablens.lens, self.gpt2, PROMPT, decoder_blocks=1)

    def test_lens_two_pass(self):
        """--two-pass / two_pass=True is recorded in the settings of the CLI's run directory and of the Result."""
        r = self.both("logit_lens", ["lens", GPT2, "--prompt", PROMPT, "--two-pass"],
                      vocablens.lens, self.gpt2, PROMPT, two_pass=True)
        self.assertIs(r.settings["two_pass"], True)
        with open(os.path.join(self.cli_dir, "logit_lens.json")) as f:
            self.assertIs(json.load(f)["settings"]["two_pass"], True)
        self.assertIs(vocablens.lens(self.gpt2, PROMPT).settings["two_pass"], False)

    def test_lens_corpus(self):
        path = os.path.join(tempdir("corpus"), "corpus.txt")
        with open(path, "w") as f:
            f.write("Once upon a time, there was a little girl named Lily. She loved to play outside.\n" * 20)
        self.both("logit_lens_corpus", ["lens", STORIES, "--corpus", path, "--window", "64"],
                  vocablens.lens_corpus, self.stories, path, window=64, progress=False)

    def test_tuned_lens(self):
        d = tempdir("tuned")
        path = os.path.join(d, "corpus.txt")
        with open(path, "w") as f:
            f.write("Once upon a time, there was a little girl named Lily. She loved to play outside.\n" * 20)
        lens_dir = os.path.join(d, "lens")
        cli("tuned-lens", "train", STORIES, "--corpus", path, "--out", lens_dir, "--window", "64",
            "--tokens-per-step", "128", "--steps", "3", "--quiet")
        self.both("tuned_lens_eval", ["tuned-lens", "eval", STORIES, "--tuned", lens_dir, "--corpus", path,
                                      "--window", "64"],
                  vocablens.tuned_lens_eval, self.stories, path, lens_dir, window=64, progress=False)
        self.both("logit_lens", ["lens", STORIES, "--prompt", "Once upon a time", "--tuned", lens_dir],
                  vocablens.lens, self.stories, "Once upon a time", tuned=lens_dir)
        prompts = os.path.join(d, "prompts.txt")
        with open(prompts, "w") as f:
            f.write("Once upon a time\nLily went to the park\n")
        r = self.both("logit_lens_batch", ["lens", STORIES, "--prompts", prompts, "--tuned", lens_dir],
                      vocablens.lens_batch, self.stories, prompts, tuned=lens_dir)
        self.assertEqual(r.settings["lens"], "tuned")

    def test_project(self):
        self.both("projection", ["project", GPT2, "--prompt", PROMPT, "--hook", "resid_mid", "--top-k", "4",
                                 "--position", "-1", "--final-norm"],
                  vocablens.project, self.gpt2, PROMPT, hook="resid_mid", top_k=4, positions=[-1], final_norm=True)

    def test_project_read(self):
        self.both("projection", ["project", STORIES, "--prompt", "Once upon a time", "--hook", "mlp_out.2",
                                 "--read", "--inverse", "transpose"],
                  vocablens.project, self.stories, "Once upon a time", hook="mlp_out.2", read=True,
                  inverse="transpose")

    def test_heads(self):
        r = self.both("heads", ["heads", STORIES, "--layer", "0,1", "--kind", "ov", "--top-k", "20"],
                      vocablens.heads, self.stories, layers=[0, 1], kind="ov", top_k=20, progress=False)
        self.assertGreater(len(r.tables["pairs"]), 0)

    def test_heads_tokens(self):
        self.both("heads", ["heads", GPT2, "--layer", "2", "--head", "1", "--top-k", "8", "--token", " Paris",
                            "--alpha-only"],
                  vocablens.heads, self.gpt2, layers=2, heads=1, top_k=8, tokens=[" Paris"], alpha_only=True,
                  progress=False)

    def test_neurons(self):
        self.both("neurons", ["neurons", GPT2, "--layer", "1", "--neurons", "0-40", "--top-k", "6"],
                  vocablens.neurons, self.gpt2, 1, neurons="0-40", top_k=6, progress=False)

    def test_neurons_all_gated(self):
        # every neuron of a gated layer (d_mlp 172)
        self.both("neurons", ["neurons", STORIES, "--layer", "2", "--bottom", "--top-k", "5"],
                  vocablens.neurons, self.stories, 2, bottom=True, top_k=5, progress=False)

    def test_spectrum(self):
        self.both("spectrum", ["spectrum", GPT2, "--k", "8"], vocablens.spectrum, self.gpt2, k=8)

    def test_spectrum_wu(self):
        self.both("spectrum", ["spectrum", STORIES, "--matrix", "W_U", "--k", "5", "--method", "lanczos"],
                  vocablens.spectrum, self.stories, matrix="W_U", k=5, method="lanczos")

    def test_neighbours(self):
        self.both("neighbours", ["neighbours", GPT2, "king - man + woman", "--prefix-space", "--k", "10"],
                  vocablens.neighbours, self.gpt2, "king - man + woman", prefix_space=True, k=10)

    def test_knn(self):
        self.both("knn", ["knn", STORIES, "--k", "5", "--space", "E+"],
                  vocablens.knn, self.stories, k=5, space="E+")

    def test_positions(self):
        self.both("positions", ["positions", GPT2], vocablens.positions, self.gpt2)
        self.both("positions", ["positions", STORIES, "--k", "8"], vocablens.positions, self.stories, k=8)


if __name__ == "__main__":
    unittest.main(verbosity=2)
