"""Bad input from Python: TypeError / ValueError naming the argument, the library's one-line messages
(the same the CLI prints), Ctrl-C between steps, the GIL released during long calls; never a crash."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unittest
import _thread

import numpy as np
import torch

from support import cli, fixture, tempdir, vocablens

GPT2 = fixture("gpt2-tiny")
STORIES = fixture("stories260K/stories260K.bin")


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)

    def assertNames(self, exc_type, arg, fn, *a, **kw):
        with self.assertRaises(exc_type) as cm:
            fn(*a, **kw)
        self.assertIn(arg, str(cm.exception))
        self.assertNotIn("\n", str(cm.exception))
        return str(cm.exception)

    def test_same_message_as_cli(self):
        bad = os.path.join(tempdir("bad"), "model.safetensors")
        with open(bad, "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
        rc, _, err = cli("inspect", bad, check=False)
        self.assertEqual(rc, 1)
        with self.assertRaises(vocablens.FormatError) as cm:
            vocablens.load_model(bad)
        self.assertEqual(err.strip(), "vocablens: error: " + str(cm.exception))
        self.assertIsInstance(cm.exception, vocablens.Error)
        with self.assertRaises(vocablens.FormatError):
            vocablens.load_model("/nonexistent/model")

    def test_usage_error_is_value_error(self):
        rc, _, err = cli("neurons", GPT2, "--layer", "1", "--neurons", "9999", check=False)
        self.assertEqual(rc, 2)   # the CLI's exit code for usage errors
        with self.assertRaises(vocablens.UsageError) as cm:
            vocablens.neurons(self.m, 1, neurons=[9999], progress=False)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(err.strip(), "vocablens: error: " + str(cm.exception))

    def test_types_name_the_argument(self):
        self.assertNames(TypeError, "top_k", vocablens.lens, self.m, "Hello", top_k="5")
        self.assertNames(TypeError, "top_k", vocablens.lens, self.m, "Hello", top_k=2.5)
        self.assertNames(TypeError, "resid_mid", vocablens.lens, self.m, "Hello", resid_mid="yes")
        self.assertNames(TypeError, "prompt", vocablens.lens, self.m, 3.5)
        self.assertNames(TypeError, "prompt", vocablens.lens, self.m, torch.zeros(4))
        self.assertNames(TypeError, "prompt", vocablens.lens, self.m, [1, "a"])
        self.assertNames(TypeError, "prompt", vocablens.lens, self.m, b"bytes")
        self.assertNames(TypeError, "layers", vocablens.heads, self.m, layers=[0.5])
        self.assertNames(TypeError, "model", vocablens.lens, "not a model", "Hello")
        self.assertNames(TypeError, "path", vocablens.load_model, 42)
        self.assertNames(TypeError, "names", self.m.run_with_cache, [1, 2], names=[3])
        self.assertNames(TypeError, "input", self.m.run_with_cache, np.array([1.0, 2.0]))
        self.assertNames(TypeError, "topk", vocablens.run, "lens", self.m, prompt="Hi", topk=3)  # misspelt keyword
        with self.assertRaises(TypeError):
            vocablens.lens(self.m, "Hi", 5)   # options are keyword-only

    def test_values_name_the_argument(self):
        self.assertNames(ValueError, "top_k", vocablens.lens, self.m, "Hello", top_k=-1)
        self.assertNames(ValueError, "unembed", vocablens.lens, self.m, "Hello", unembed="inverse")
        self.assertNames(ValueError, "prompt", vocablens.lens, self.m, "")
        self.assertNames(ValueError, "prompt", vocablens.lens, self.m, [])
        self.assertNames(ValueError, "prompt", vocablens.lens, self.m, [50257])
        self.assertNames(ValueError, "prompt", vocablens.lens, self.m, torch.zeros(2, 3, 4, dtype=torch.long))
        self.assertNames(ValueError, "prompt", vocablens.lens, self.m, list(range(200)))   # > n_ctx 128
        self.assertNames(ValueError, "target", vocablens.lens, self.m, "Hello", target=" Eiffel Tower")
        self.assertNames(ValueError, "names", self.m.run_with_cache, [1, 2], names=["blocks.7.hook_resid_post"])
        self.assertNames(ValueError, "names", self.m.run_with_cache, [1, 2], names=["blocks.0.hook_nothing"])
        self.assertNames(ValueError, "layers", vocablens.heads, self.m, layers=[5])
        self.assertNames(ValueError, "kind", vocablens.heads, self.m, kind="vo")
        self.assertNames(ValueError, "matrix", vocablens.spectrum, self.m, matrix=torch.zeros(3, 4, 5))
        self.assertNames(ValueError, "lens", vocablens.run, "lens_tuned_typo", self.m)
        with self.assertRaises(IndexError):
            self.m.W_Q[3]
        with self.assertRaises(IndexError):
            self.m.blocks[3]

    def test_model_survives_errors(self):
        for _ in range(3):
            with self.assertRaises(Exception):
                vocablens.lens(self.m, [0, 99999999])
        r = vocablens.lens(self.m, "Hello", top_k=2)
        self.assertEqual(r.arrays["top_ids"].shape, (3 + 1, 1, 2))

    def test_ctrl_c_stops_between_steps(self):
        m = vocablens.load_model(STORIES)
        ticks = []

        def progress(done, total):
            ticks.append((done, total))
            if len(ticks) == 1:
                _thread.interrupt_main()   # what Ctrl-C does: a pending SIGINT, seen at the next check

        with self.assertRaises(KeyboardInterrupt):
            vocablens.heads(m, top_k=5, progress=progress)
        self.assertEqual(len(ticks), 1)   # stopped at the first step
        self.assertGreater(ticks[0][1], 1)
        r = vocablens.heads(m, layers=0, top_k=5, progress=False)   # and the model still works
        self.assertEqual(r.kind, "heads")

    def test_real_sigint(self):
        """A real SIGINT, sent while the C++ work runs (GIL released), stops heads() at the next step."""
        child = textwrap.dedent("""
            import sys, time, vocablens
            m = vocablens.load_model(sys.argv[1])
            def progress(done, total):
                if done == 1:
                    print("started", flush=True)
            t0 = time.time()
            try:
                vocablens.heads(m, top_k=50, progress=progress)
                print("finished", flush=True)
            except KeyboardInterrupt:
                r = vocablens.lens(m, "Hello", top_k=1)   # the interpreter and the model are fine
                print("interrupted", r.kind, flush=True)
            """)
        p = subprocess.Popen([sys.executable, "-c", child, GPT2], stdout=subprocess.PIPE, text=True)
        self.assertEqual(p.stdout.readline().strip(), "started")
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0)
        self.assertEqual(out.strip(), "interrupted logit_lens")

    def test_progress_callable_and_tqdm(self):
        m = vocablens.load_model(STORIES)
        seen = []
        vocablens.neurons(m, 0, top_k=3, progress=lambda d, t: seen.append((d, t)))
        d_mlp = m.config["d_mlp"]
        self.assertGreater(len(seen), 1)
        self.assertEqual(seen[-1][0], seen[-1][1])   # done == total at the end
        self.assertGreaterEqual(seen[-1][1], d_mlp)  # every vector of every neuron counted
        vocablens.neurons(m, 0, top_k=3, progress=True)   # tqdm (python3-tqdm is installed by setup.sh)
        self.assertNames(TypeError, "progress", vocablens.neurons, m, 0, progress="yes")

    def test_gil_released(self):
        count = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1
                time.sleep(0.001)

        t = threading.Thread(target=spin)
        t.start()
        try:
            t0 = time.time()
            before = count[0]
            # Every declared analysis runs through one binding (run_declared) that releases the GIL around the
            # C++ work, so one of them shows it: heads of one layer, ~0.45 s of CPU (knn's 50257 x 50257
            # cosines took ~6 s), hundreds of the other thread's 1 ms steps when the GIL is free, none if not.
            vocablens.heads(self.m, layers=0, top_k=10, progress=False)
            elapsed = time.time() - t0
            during = count[0] - before
        finally:
            stop.set()
            t.join()
        # with the GIL held for the whole call the other thread could not have run at all
        self.assertGreater(during, 10, "other Python threads did not run during a %.2f s call" % elapsed)


if __name__ == "__main__":
    unittest.main(verbosity=2)
