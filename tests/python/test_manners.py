"""Notebook manners: TransformerLens's token helpers, no progress bar for quick calls, and a clear
ImportError from an interpreter that lacks Debian's torch 1.13."""
import os
import subprocess
import sys
import textwrap
import unittest

import torch

from support import fixture, vocablens

GPT2 = fixture("gpt2-tiny")
STORIES = fixture("stories260K/stories260K.bin")
EIFFEL = [464, 412, 733, 417, 8765, 318, 287, 262, 1748, 286]   # GPT-2's own ids (fixture README)


def run_python(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=os.environ)


class Tokens(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)

    def test_gpt2(self):
        # TransformerLens prepends BOS (<|endoftext|>, 50256) for GPT-2 too unless prepend_bos=False
        t = self.m.to_tokens("The Eiffel Tower is in the city of", prepend_bos=False)
        self.assertEqual(t.dtype, torch.int64)
        self.assertEqual(t.tolist(), [EIFFEL])
        self.assertEqual(self.m.to_tokens("The Eiffel Tower is in the city of").tolist(), [[50256] + EIFFEL])
        self.assertEqual(self.m.to_tokens("Hi", prepend_bos=True).tolist(), [[50256, 17250]])
        both = self.m.to_tokens(["Hello world", "Hi"], prepend_bos=False)
        self.assertEqual(both.tolist(), [[15496, 995], [17250, 50256]])            # padded with EOS
        self.assertEqual(self.m.to_tokens(["Hello world", "Hi"], prepend_bos=False, padding_side="left").tolist(),
                         [[15496, 995], [50256, 17250]])
        self.assertEqual(self.m.to_str_tokens("The Eiffel Tower", prepend_bos=False)[:3], ["The", " E", "iff"])
        self.assertEqual(self.m.to_str_tokens(torch.tensor([EIFFEL[:2]])), ["The", " E"])
        self.assertEqual(self.m.to_str_tokens(["Hello world", "Hi"], prepend_bos=False), [["Hello", " world"], ["Hi"]])
        self.assertEqual(self.m.to_string(EIFFEL), "The Eiffel Tower is in the city of")
        self.assertEqual(self.m.to_string(torch.tensor([EIFFEL, EIFFEL])), ["The Eiffel Tower is in the city of"] * 2)
        self.assertEqual(self.m.to_single_token(" city"), 1748)
        with self.assertRaises(TypeError):
            self.m.to_string("text")
        with self.assertRaises(ValueError):
            self.m.to_tokens("x", padding_side="middle")

    def test_llama2c_bos(self):
        m = vocablens.load_model(STORIES)
        t = m.to_tokens("Once upon a time")
        self.assertEqual(t[0, 0].item(), m.tokenizer.bos_id)                       # SentencePiece convention
        self.assertNotEqual(m.to_tokens("Once", prepend_bos=False)[0, 0].item(), m.tokenizer.bos_id)
        self.assertEqual(m.to_string(t), "Once upon a time")                      # run.c drops the space after BOS
        self.assertEqual(m.to_str_tokens("Once upon"), ["<s>", " Once", " upon"])


class Manners(unittest.TestCase):
    def test_quick_calls_print_no_progress(self):
        p = run_python("""
            import time, vocablens
            m = vocablens.load_model(%r)
            slowest = 0.0
            for call in (lambda: m.heads(layers=0, heads=1, kind="ov", top_k=3),
                         lambda: m.neurons(0, neurons=[1, 2], top_k=3)):
                t0 = time.monotonic()
                call()
                slowest = max(slowest, time.monotonic() - t0)
            print("ok", slowest)
        """ % GPT2)
        self.assertEqual(p.returncode, 0, p.stderr)
        ok, slowest = p.stdout.split()
        self.assertEqual(ok, "ok")
        if float(slowest) < 0.9:
            self.assertEqual(p.stderr, "")     # tqdm waits a second before drawing anything
        else:
            # a loaded machine made a quick call take a second: then a bar, and nothing else, is right
            for line in p.stderr.replace("\r", "\n").splitlines():
                self.assertTrue(not line.strip() or "%|" in line, "stderr of a slow quick call: " + p.stderr)

    def test_integer_columns(self):
        m = vocablens.load_model(GPT2)
        r = m.lens("The Eiffel Tower is in the city of", top_k=3)
        df = r.tables["top_k"]
        for col in ("layer", "position", "input_id", "rank", "token_id", "target_id", "target_rank"):
            self.assertIn(str(df[col].dtype), ("int64", "Int64"), col)
        # target_id / target_rank are missing at the last position (no next token): nullable, not NaN floats
        self.assertTrue(df["target_rank"].isna().any())
        # layer: the arrays' layer index (accumulated_resid's: 0 = embeddings, l + 1 = after block l)
        self.assertEqual(list(df["layer"].unique()), [0, 1, 2, 3])
        self.assertEqual(list(df["layer_label"].unique()), ["embed", "0", "1", "2"])
        self.assertEqual(list(df.columns[:3]), ["layer", "hook", "position"])
        first = df[(df["layer"] == 2) & (df["position"] == 4) & (df["rank"] == 1)]["token_id"].iloc[0]
        self.assertEqual(first, r.arrays["top_ids"][2, 4, 0])
        self.assertEqual(r.arrays["target_rank"].dtype.name, "int64")

    def test_interpreter_without_torch(self):
        # sys.modules["torch"] = None makes `import torch` fail as it does in pyenv's python3
        p = run_python("""
            import sys
            sys.modules["torch"] = None
            try:
                import vocablens
            except ImportError as e:
                print(e)
        """)
        self.assertEqual(p.returncode, 0, p.stderr)
        msg = p.stdout.strip()
        self.assertIn("torch 1.13", msg)
        self.assertIn(sys.executable, msg)
        self.assertIn("python3-torch", msg)
        self.assertIn("use /", msg)            # names the interpreter to use
        self.assertEqual(len(msg.splitlines()), 1)



class OpenMPWaitPolicy(unittest.TestCase):
    """Importing vocablens first makes OpenMP's idle threads sleep (libgomp reads OMP_WAIT_POLICY once, when it
    loads); a policy the user set, or a libgomp that torch loaded before, is left alone."""

    def settings(self, code, **env):
        e = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        e.update(env, OMP_DISPLAY_ENV="VERBOSE")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)
        self.assertEqual(r.returncode, 0, r.stderr)
        spin = [l.split("'")[1] for l in r.stderr.splitlines() if l.strip().startswith("GOMP_SPINCOUNT =")]
        return spin, r.stdout.strip()

    def test_import_first(self):
        spin, policy = self.settings("import vocablens, os; print(os.environ['OMP_WAIT_POLICY'])")
        self.assertEqual(spin, ["0"])
        self.assertEqual(policy, "PASSIVE")

    def test_users_choice_and_torch_first(self):
        spin, _ = self.settings("import vocablens", OMP_WAIT_POLICY="ACTIVE")
        self.assertNotEqual(spin, ["0"])
        spin, policy = self.settings("import torch, vocablens, os; print(os.environ.get('OMP_WAIT_POLICY'))")
        self.assertNotEqual(spin, ["0"])
        self.assertEqual(policy, "None")


class Threads(unittest.TestCase):
    """VOCABLENS_THREADS, set when vocablens is imported, is the thread count (as the CLI's); unset, torch's own
    default (here OMP_NUM_THREADS) stands; a bad value is said on stderr and, as in the CLI, all cores are used."""

    def threads(self, value):
        e = {k: v for k, v in os.environ.items() if k != "VOCABLENS_THREADS"}
        e["OMP_NUM_THREADS"] = "1"
        if value is not None:
            e["VOCABLENS_THREADS"] = value
        r = subprocess.run([sys.executable, "-c", "import vocablens, torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, env=e)
        self.assertEqual(r.returncode, 0, r.stderr)
        return int(r.stdout), r.stderr

    def test_set_unset_and_bad(self):
        self.assertEqual(self.threads("3")[0], 3)
        self.assertEqual(self.threads(None)[0], 1)
        n, err = self.threads("four")
        self.assertIn("VOCABLENS_THREADS='four' is not a whole number", err)
        self.assertEqual(n, os.cpu_count())


if __name__ == "__main__":
    unittest.main(verbosity=2)
