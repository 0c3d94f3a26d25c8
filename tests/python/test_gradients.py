"""model.gradients: d metric(logits) / d activation, checked against central finite differences of the
independent float64 NumPy forward (gpt2_numpy.py), for weights stored as F32, F16 and BF16, and against finite differences of the model's own float32 forward for
llama.cpp's Q8_0 and Q4_K_M files; weights stay frozen."""
import json
import os
import shutil
import struct
import unittest

import numpy as np
import torch

from support import SOURCE, fixture, tempdir, vocablens
import gpt2_numpy

GPT2 = fixture("gpt2-tiny")
IDS = [464, 412, 733, 417, 8765, 318, 287, 262, 1748, 286]
A, B = 1748, 262   # " city", " the"


def metric_np(logits):
    return logits[-1, A] - logits[-1, B]


def metric(logits):
    return logits[0, -1, A] - logits[0, -1, B]


class Gradients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        cls.np = gpt2_numpy.load(GPT2)

    def finite_difference(self, name, index, h=1e-5):
        def at(delta):
            def edit(x):
                x[index] += delta
                return x
            return metric_np(gpt2_numpy.forward(self.np, IDS, {name: edit})["logits"])
        return (at(h) - at(-h)) / (2 * h)

    def test_against_finite_differences(self):
        names = ["blocks.1.hook_resid_pre", "blocks.0.attn.hook_z", "blocks.2.mlp.hook_post", "hook_embed",
                 "blocks.1.attn.hook_pattern"]
        value, grads = self.m.gradients(IDS, metric, names, return_metric=True)
        plain = gpt2_numpy.forward(self.np, IDS)
        self.assertAlmostEqual(value, metric_np(plain["logits"]), places=4)
        rng = np.random.RandomState(3)
        for name in names:
            g = grads[name]
            self.assertEqual(tuple(g.shape), (1,) + plain[name].shape, name)
            self.assertFalse(g.requires_grad)
            checked = 0
            while checked < 6:
                idx = tuple(int(rng.randint(0, s)) for s in plain[name].shape)
                if name.endswith("hook_pattern") and idx[2] > idx[1]:
                    continue   # masked keys: the pattern entry is 0 and fixed
                fd = self.finite_difference(name, idx)
                got = g[(0,) + idx].item()
                self.assertLess(abs(got - fd), 1e-4 + 1e-3 * abs(fd), "{} {}: {} vs {}".format(name, idx, got, fd))
                checked += 1
            # positions after the metric's position do not matter; the last one does
            if name != "blocks.1.attn.hook_pattern":
                self.assertGreater(g[0, -1].abs().max().item(), 0.0, name)
        self.assertFalse(any(w.requires_grad for w in self.m.weights().values()))
        self.assertIsNone(self.m.W_E.grad)

    def test_with_hooks_and_errors(self):
        # gradients through an edited forward: head 1.2 zeroed, so its z gets zero gradient downstream of it
        def zero(z, hook):
            z[:, :, 2] = 0.0
        g = self.m.gradients(IDS, metric, ["blocks.0.hook_resid_post"], fwd_hooks=[("blocks.1.attn.hook_z", zero)])
        fd = []
        for idx in [(9, 3), (9, 40), (4, 7)]:
            def at(delta, idx=idx):
                def edit(x):
                    x[idx] += delta
                    return x

                def z0(z):
                    z[:, 2] = 0.0
                    return z
                return metric_np(gpt2_numpy.forward(self.np, IDS, {"blocks.0.hook_resid_post": edit,
                                                                  "blocks.1.attn.hook_z": z0})["logits"])
            fd.append((g["blocks.0.hook_resid_post"][(0,) + idx].item(), (at(1e-5) - at(-1e-5)) / 2e-5))
        for got, want in fd:
            self.assertLess(abs(got - want), 1e-4 + 1e-3 * abs(want))
        with self.assertRaises(ValueError):
            self.m.gradients(IDS, lambda lg: lg[0, -1], ["blocks.0.hook_resid_post"])
        with self.assertRaises(TypeError):
            self.m.gradients(IDS, "not callable", ["blocks.0.hook_resid_post"])
        # the model is unchanged afterwards, and plain forwards build no graph
        self.assertFalse(self.m.forward(IDS).requires_grad)

    def test_run_with_cache_incl_bwd(self):
        names = ["blocks.1.hook_resid_pre", "blocks.0.attn.hook_z"]
        loss, cache = self.m.run_with_cache(IDS, names_filter=names, return_type="loss", incl_bwd=True)
        self.assertEqual(set(cache.keys()), set(names) | {n + "_grad" for n in names})
        self.assertFalse(loss.requires_grad or cache["blocks.1.hook_resid_pre"].requires_grad)
        want = self.m.gradients(IDS, _loss, names)     # the same loss, written here
        for n in names:
            self.assertLess((cache[n + "_grad"] - want[n]).abs().max().item(), 1e-6, n)
        self.assertGreater(cache["blocks.1.hook_resid_pre_grad"].abs().max().item(), 0.0)
        with self.assertRaises(ValueError):
            self.m.run_with_cache(IDS, names_filter=names, incl_bwd=True)


def _loss(logits):
    lp = torch.log_softmax(logits[0, :-1], -1)
    return -lp.gather(-1, torch.tensor(IDS[1:])[:, None]).mean()


def half_copy(dtype):
    """gpt2-tiny with every tensor stored as F16 or BF16 (a new model.safetensors written here), and the float64
    weights it stores, for gpt2_numpy.forward."""
    d = os.path.join(tempdir("grad-" + dtype), "gpt2-" + dtype)
    os.makedirs(d)
    for f in ("config.json", "vocab.json", "merges.txt"):
        shutil.copy(os.path.join(GPT2, f), d)
    ref = gpt2_numpy.load(GPT2)
    header, blobs, offset = {}, [], 0
    stored = {}
    for name, a in ref["w"].items():
        t = torch.from_numpy(a.astype(np.float32)).to(torch.float16 if dtype == "F16" else torch.bfloat16)
        raw = t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
        stored[name] = t.to(torch.float64).numpy()
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)          # the data starts 8-byte aligned, as safetensors writers pad it
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return d, dict(ref, w=stored)


class StoredDtypes(unittest.TestCase):
    """Weights kept as F16 / BF16 (multiplied through the tiled product, not upcast whole): gradients through them
    equal finite differences of the float64 forward of the stored values, as for F32."""

    def check(self, dtype):
        path, ref = half_copy(dtype)
        m = vocablens.load_model(path)
        self.assertEqual(m.config["weight_dtype"], dtype)
        names = ["blocks.0.hook_resid_post", "blocks.1.attn.hook_z", "blocks.2.mlp.hook_pre"]
        value, grads = m.gradients(IDS, metric, names, return_metric=True)
        self.assertAlmostEqual(value, metric_np(gpt2_numpy.forward(ref, IDS)["logits"]), places=3)
        rng = np.random.RandomState(5)
        for name in names:
            for _ in range(4):
                idx = (9,) + tuple(int(rng.randint(0, s)) for s in grads[name].shape[2:])

                def at(delta, name=name, idx=idx):
                    def edit(x):
                        x[idx] += delta
                        return x
                    return metric_np(gpt2_numpy.forward(ref, IDS, {name: edit})["logits"])
                fd = (at(1e-5) - at(-1e-5)) / 2e-5
                got = grads[name][(0,) + idx].item()
                self.assertLess(abs(got - fd), 1e-4 + 1e-3 * abs(fd),
                                "{} {} {}: {} vs {}".format(dtype, name, idx, got, fd))
        # run_with_hooks(grad=True) through the same weights, and the weights stay frozen
        keep = {}

        def grab(x, hook):
            x.requires_grad_(True)
            keep["x"] = x
        logits = m.run_with_hooks(IDS, fwd_hooks=[("blocks.0.hook_resid_post", grab)], grad=True)
        metric(logits).backward()
        self.assertLess((keep["x"].grad - grads["blocks.0.hook_resid_post"]).abs().max().item(), 1e-5)
        self.assertFalse(any(w.requires_grad for w in m.weights().values()))

    def test_f16(self):
        self.check("F16")

    def test_bf16(self):
        self.check("BF16")

    def check_gguf(self, path, ids, targets, names, label):
        # A GGUF quantized by llama.cpp (tests/data/gguf): no float64 twin of its dequantized weights here, so
        # the gradients are checked against central differences of the same model's float32 forward (whose
        # logits gguf_model_test checks against llama.cpp's), with a step and tolerance float32 allows.
        m = vocablens.load_model(os.path.join(SOURCE, "tests", "data", "gguf", path))
        a, b = targets

        def gguf_metric(logits):
            return logits[0, -1, a] - logits[0, -1, b]
        grads = m.gradients(ids, gguf_metric, names)
        rng = np.random.RandomState(9)
        for name in names:
            for _ in range(4):
                idx = (0, len(ids) - 1, int(rng.randint(0, grads[name].shape[-1])))

                def at(delta, name=name, idx=idx):
                    def edit(x, hook):
                        x[idx] += delta
                    return gguf_metric(m.run_with_hooks(ids, fwd_hooks=[(name, edit)])).double().item()
                h = 1e-2
                fd = (at(h) - at(-h)) / (2 * h)
                got = grads[name][idx].item()
                self.assertLess(abs(got - fd), 2e-3 + 2e-2 * abs(fd), "{} {} {}: {} vs {}".format(label, name, idx, got, fd))
        self.assertGreater(grads[names[0]][0, len(ids) - 1].abs().max().item(), 0.0)

    def test_q8_0_gguf(self):
        self.check_gguf("gpt2-tiny-q8_0.gguf", IDS, (A, B), ["blocks.0.hook_resid_post", "blocks.1.mlp.hook_post"], "Q8_0")

    def test_q4_k_gguf(self):
        # A small Llama (d 256, 2 layers) in llama.cpp's Q4_K_M: Q4_K and Q6_K blocks, rows of 256.
        with open(os.path.join(SOURCE, "tests", "data", "gguf", "ids-llama.txt")) as f:
            ids = [int(t) for t in f.read().split()][:12]
        self.check_gguf("llamak-q4_k_m.gguf", ids, (403, 407), ["blocks.0.hook_resid_post", "blocks.1.mlp.hook_post"],
                        "Q4_K_M")


class AttributionPatching(unittest.TestCase):
    """Attribution patching against real activation patching (run_with_hooks, one patch at a time) on small
    patches, where the first-order estimate must hold: corrupt + 0.02 (clean - corrupt) at one position."""

    def test_against_activation_patching(self):
        m = vocablens.load_model(GPT2)
        clean = IDS
        corrupt = IDS[:4] + [8765 + 1] + IDS[5:]          # one token changed
        names = ["blocks.1.hook_resid_pre", "blocks.2.attn.hook_z", "blocks.0.hook_mlp_out"]
        alpha = 0.02
        # the estimate for the small patch is alpha times attribution patching's (it is linear in the patch)
        est = m.attribution_patching(clean, corrupt, metric, names)
        self.assertEqual(tuple(est["blocks.1.hook_resid_pre"].shape), (1, 10))
        self.assertEqual(tuple(est["blocks.2.attn.hook_z"].shape), (1, 10, 4))
        _, cc = m.run_with_cache(clean, names_filter=names)
        base = metric(m.forward(corrupt)).item()
        checked = 0
        for name in names:
            sites = [(p,) for p in (4, 6, 9)] if est[name].dim() == 2 else [(9, h) for h in range(4)]
            for site in sites:
                def patch(act, hook, site=site):
                    src = cc[name][(0,) + site]
                    act[(0,) + site] += alpha * (src - act[(0,) + site])
                real = metric(m.run_with_hooks(corrupt, fwd_hooks=[(name, patch)])).item() - base
                guess = alpha * est[name][(0,) + site].item()
                self.assertLess(abs(real - guess), 2e-3 * abs(guess) + 2e-5, "{} {}: {} vs {}".format(
                    name, site, real, guess))
                checked += 1
        self.assertEqual(checked, 3 + 4 + 3)
        # and the full patch: the estimate has the sign of the real effect where the effect is large
        big = [(name, (p,)) for name in ("blocks.1.hook_resid_pre", "blocks.0.hook_mlp_out") for p in (4, 9)]
        for name, site in big:
            def full(act, hook, site=site, name=name):
                act[(0,) + site] = cc[name][(0,) + site]
            real = metric(m.run_with_hooks(corrupt, fwd_hooks=[(name, full)])).item() - base
            if abs(real) > 0.05:
                self.assertEqual(real > 0, est[name][(0,) + site].item() > 0, "{} {}".format(name, site))


if __name__ == "__main__":
    unittest.main(verbosity=2)
