"""Model.forward and Python hooks (run_with_hooks, model.hooks), checked against an independent float64
NumPy forward of gpt2-tiny written from GPT-2's definition (gpt2_numpy.py; it reproduces the fixture's own
reference to 1e-7) with the same edit applied, to 1e-4."""
import os
import subprocess
import sys
import textwrap
import threading
import time
import unittest

import numpy as np
import torch

from support import fixture, vocablens
import gpt2_numpy

GPT2 = fixture("gpt2-tiny")
ATOL = 1e-4
IDS = [464, 412, 733, 417, 8765, 318, 287, 262, 1748, 286]   # "The Eiffel Tower is in the city of"


class Forward(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        cls.np = gpt2_numpy.load(GPT2)

    def test_forward_in_a_subprocess(self):
        # Model.forward used to return an item of a freed tuple: touching it killed the interpreter (SIGSEGV).
        code = textwrap.dedent("""
            import vocablens, torch
            m = vocablens.load_model(%r)
            logits = m.forward([1, 2, 3])
            print(type(logits).__name__, tuple(logits.shape), logits.dtype)
            ref, _ = m.run_with_cache([1, 2, 3], names=["blocks.0.hook_resid_post"])
            print("diff", (logits - ref).abs().max().item())
            print("call", (m([1, 2, 3]) - ref).abs().max().item())
        """ % GPT2)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "Tensor (1, 3, 50257) torch.float32")
        self.assertEqual(float(lines[1].split()[1]), 0.0)
        self.assertEqual(float(lines[2].split()[1]), 0.0)

    def test_forward_matches_reference(self):
        logits = self.m.forward(IDS)
        ref = gpt2_numpy.forward(self.np, IDS)["logits"]
        self.assertLess(np.abs(logits[0].numpy() - ref).max(), ATOL)
        loss = self.m.forward(IDS, return_type="loss")
        lp = ref - np.log(np.exp(ref - ref.max(-1, keepdims=True)).sum(-1, keepdims=True)) - ref.max(-1, keepdims=True)
        want = -np.mean([lp[t, IDS[t + 1]] for t in range(len(IDS) - 1)])
        self.assertAlmostEqual(loss.item(), want, places=4)
        self.assertIsNone(self.m.forward(IDS, return_type=None))
        batch = torch.tensor([IDS, IDS[::-1]])
        lb = self.m.forward(batch)
        self.assertEqual(tuple(lb.shape), (2, 10, 50257))
        self.assertLess(np.abs(lb[1].numpy() - gpt2_numpy.forward(self.np, IDS[::-1])["logits"]).max(), ATOL)


class Hooks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        cls.np = gpt2_numpy.load(GPT2)
        cls.plain = gpt2_numpy.forward(cls.np, IDS)

    def close(self, got, want, what):
        self.assertLess(np.abs(got - want).max(), ATOL, what)

    def test_zero_head_in_place(self):
        def zero(z, hook):
            self.assertEqual(tuple(z.shape), (1, 10, 4, 16))      # [batch, pos, head, d_head]
            z[:, :, 2] = 0.0

        def ref_zero(z):
            z[:, 2] = 0.0
            return z
        logits = self.m.run_with_hooks(IDS, fwd_hooks=[("blocks.1.attn.hook_z", zero)])
        want = gpt2_numpy.forward(self.np, IDS, {"blocks.1.attn.hook_z": ref_zero})["logits"]
        self.close(logits[0].numpy(), want, "zeroed head 1.2")
        self.assertGreater(np.abs(want - self.plain["logits"]).max(), 1e-2)   # the edit matters

    def test_steering_vector_returned(self):
        vec = torch.from_numpy(np.random.RandomState(7).normal(0, 0.5, 64).astype(np.float32))

        def add(resid, hook):
            return resid + vec
        logits = self.m.run_with_hooks(IDS, fwd_hooks=[("blocks.2.hook_resid_pre", add)])
        want = gpt2_numpy.forward(self.np, IDS, {"blocks.2.hook_resid_pre": lambda x: x + vec.double().numpy()})
        self.close(logits[0].numpy(), want["logits"], "steered at resid_pre.2")
        # our short name is the same point
        again = self.m.run_with_hooks(IDS, fwd_hooks=[("resid_pre.2", add)])
        self.assertTrue(torch.equal(again, logits))

    def test_every_point_of_every_layer(self):
        # A hook at every point (filter) that records what it sees: values against the reference, 23 kinds.
        seen = {}

        def grab(act, hook):
            seen[hook.name] = (act.clone(), hook.layer())
        self.m.run_with_hooks(IDS, fwd_hooks=[(lambda name: True, grab)])
        kinds = {n.split(".", 2)[-1] if n.startswith("blocks.") else n for n in seen}
        self.assertEqual(len(kinds), 23)
        self.assertEqual(len(seen), 4 + 19 * 3)
        for name, (act, layer) in seen.items():
            want = self.plain[name]
            got = act[0].numpy()
            self.assertEqual(got.shape, want.shape, name)
            finite = np.isfinite(want)
            self.assertTrue(np.array_equal(finite, np.isfinite(got)), name)
            self.assertLess(np.abs(got[finite] - want[finite]).max(), ATOL, name)
            self.assertEqual(layer, int(name.split(".")[1]) if name.startswith("blocks.") else None)

    def test_edit_at_every_kind_matches_reference(self):
        # Scaling each kind of point by 0.5 at layer 1 (or the model-level points) changes the output as the
        # reference says.
        for name in self.m.hook_names():
            if name.startswith("blocks.") and not name.startswith("blocks.1."):
                continue
            if name.endswith("hook_attn_scores"):
                edit, ref = (lambda x, hook: x * 0.5), (lambda x: x * 0.5)
            else:
                edit, ref = (lambda x, hook: x.mul_(0.5)), (lambda x: x * 0.5)
            logits = self.m.run_with_hooks(IDS, fwd_hooks=[(name, edit)])
            want = gpt2_numpy.forward(self.np, IDS, {name: ref})["logits"]
            self.close(logits[0].numpy(), want, name)

    def test_several_hooks_in_order_and_ctx(self):
        order = []

        def first(x, hook):
            order.append(("first", hook.name))
            hook.ctx["n"] = hook.ctx.get("n", 0) + 1
            return x * 2.0

        def second(x, hook):
            order.append(("second", hook.name, hook.ctx["n"]))
            return x + 1.0
        logits = self.m.run_with_hooks(IDS, fwd_hooks=[("blocks.0.hook_mlp_out", first),
                                                       ("blocks.0.hook_mlp_out", second)])
        self.assertEqual(order, [("first", "blocks.0.hook_mlp_out"), ("second", "blocks.0.hook_mlp_out", 1)])
        want = gpt2_numpy.forward(self.np, IDS, {"blocks.0.hook_mlp_out": lambda x: x * 2.0 + 1.0})["logits"]
        self.close(logits[0].numpy(), want, "two hooks on one point")

    def test_exception_propagates_as_itself(self):
        class Mine(Exception):
            pass

        def boom(x, hook):
            raise Mine("inside " + hook.name)
        before = self.m.forward(IDS)
        with self.assertRaises(Mine) as cm:
            self.m.run_with_hooks(IDS, fwd_hooks=[("blocks.1.hook_resid_mid", boom)])
        self.assertEqual(str(cm.exception), "inside blocks.1.hook_resid_mid")
        with self.assertRaises(KeyboardInterrupt):
            self.m.run_with_hooks(IDS, fwd_hooks=[("hook_embed", lambda x, hook: (_ for _ in ()).throw(KeyboardInterrupt))])
        self.assertTrue(torch.equal(self.m.forward(IDS), before))   # the model is usable and unchanged

    def test_wrong_replacement(self):
        with self.assertRaises(ValueError) as cm:
            self.m.run_with_hooks(IDS, fwd_hooks=[("blocks.0.attn.hook_z", lambda z, hook: z[:, :, :2])])
        msg = str(cm.exception)
        self.assertIn("blocks.0.attn.hook_z", msg)
        self.assertIn("[1, 10, 2, 16]", msg)
        self.assertIn("[1, 10, 4, 16]", msg)
        with self.assertRaises(ValueError) as cm:
            self.m.run_with_hooks(IDS, fwd_hooks=[("resid_post.1", lambda x, hook: x.double())])
        self.assertIn("blocks.1.hook_resid_post", str(cm.exception))
        self.assertIn("float64", str(cm.exception))
        with self.assertRaises(TypeError):
            self.m.run_with_hooks(IDS, fwd_hooks=[("resid_post.1", lambda x, hook: 3)])
        with self.assertRaises(ValueError) as cm:
            self.m.run_with_hooks(IDS, fwd_hooks=[("blocks.9.hook_resid_post", lambda x, hook: None)])
        self.assertIn("fwd_hooks[0]", str(cm.exception))
        with self.assertRaises(TypeError):
            self.m.run_with_hooks(IDS, fwd_hooks=[("blocks.0.hook_resid_post", "not callable")])
        self.assertEqual(tuple(self.m.forward(IDS).shape), (1, 10, 50257))

    def test_hooks_context(self):
        vec = torch.full((64,), 0.25)

        def add(x, hook):
            return x + vec
        plain = self.m.forward(IDS)
        with self.m.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", add)]):
            inside = self.m.forward(IDS)
            logits, cache = self.m.run_with_cache(IDS, names_filter=["blocks.1.hook_resid_pre"])
            with self.m.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", add)]):
                twice = self.m.forward(IDS)
        after = self.m.forward(IDS)
        self.assertTrue(torch.equal(after, plain))
        want = gpt2_numpy.forward(self.np, IDS, {"blocks.1.hook_resid_pre": lambda x: x + 0.25})
        self.close(inside[0].numpy(), want["logits"], "hooks() context")
        self.assertTrue(torch.equal(logits, inside))
        self.close(cache["blocks.1.hook_resid_pre"][0].numpy(), want["blocks.1.hook_resid_pre"], "cached after hook")
        want2 = gpt2_numpy.forward(self.np, IDS, {"blocks.1.hook_resid_pre": lambda x: x + 0.5})
        self.close(twice[0].numpy(), want2["logits"], "nested contexts")
        # an exception inside the block still removes the hooks
        with self.assertRaises(RuntimeError):
            with self.m.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", add)]):
                raise RuntimeError("leave")
        self.assertTrue(torch.equal(self.m.forward(IDS), plain))

    def test_batch_rows_patched_separately(self):
        # Activation patching's shape: row 1 gets row 0's resid_mid.0 at the last position.
        other = IDS[:-1] + [50]
        batch = torch.tensor([IDS, other])

        def patch(x, hook):
            x[1, -1] = x[0, -1]
        got = self.m.run_with_hooks(batch, fwd_hooks=[("blocks.0.hook_resid_mid", patch)])
        clean = self.plain["blocks.0.hook_resid_mid"]

        def ref(x):
            x[-1] = clean[-1]
            return x
        want = gpt2_numpy.forward(self.np, other, {"blocks.0.hook_resid_mid": ref})["logits"]
        self.close(got[1].numpy(), want, "patched row")
        self.close(got[0].numpy(), self.plain["logits"], "clean row")

    def test_backward_hooks(self):
        grads = {}

        def keep(g, hook):
            grads[hook.name] = g.clone()
        logits = self.m.run_with_hooks(IDS, bwd_hooks=[("blocks.1.hook_resid_post", keep)])
        self.assertTrue(logits.requires_grad)
        logits[0, -1, 42].backward()
        g = self.m.gradients(IDS, lambda lg: lg[0, -1, 42], "blocks.1.hook_resid_post")
        self.assertLess((grads["blocks.1.hook_resid_post"] - g["blocks.1.hook_resid_post"]).abs().max().item(), 1e-6)
        self.assertFalse(any(w.requires_grad for w in self.m.weights().values()))

    def test_gil_released_between_hooks(self):
        # Another Python thread keeps running while a hooked forward runs in C++ (the GIL is taken only
        # around each hook): with the GIL held for the whole pass it could not run at all.
        count = [0]
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1
                time.sleep(0.001)
        batch = torch.randint(0, 50257, (4, 128))
        hooks = [("blocks.%d.hook_resid_pre" % l, lambda x, hook: None) for l in range(3)]
        t = threading.Thread(target=spin)
        t.start()
        try:
            t0 = time.time()
            before = count[0]
            for _ in range(5):
                self.m.run_with_hooks(batch, fwd_hooks=hooks, return_type=None)
                self.m.run_with_hooks(batch, fwd_hooks=hooks)     # the unembedding: 4 x 128 x 50257
            elapsed = time.time() - t0
            during = count[0] - before
        finally:
            stop.set()
            t.join()
        # about one spin per millisecond when free; a held GIL would leave at most a few (between the calls)
        self.assertGreater(during, max(30, 30 * elapsed), "other Python threads ran %d times in %.2f s of forwards" % (during, elapsed))


if __name__ == "__main__":
    unittest.main(verbosity=2)
