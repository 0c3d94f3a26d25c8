"""run_with_cache's ActivationCache: all 23 hook kinds against the independent float64 NumPy forward
(gpt2_numpy.py) and the fixture's residual references; the helpers against the same sums done by hand."""
import os
import unittest

import numpy as np
import torch

from support import fixture, tempdir, vocablens
import gpt2_numpy

GPT2 = fixture("gpt2-tiny")
REF = os.path.join(GPT2, "reference")
ATOL = 1e-4
IDS = [464, 412, 733, 417, 8765, 318, 287, 262, 1748, 286]


def ref(name):
    return np.load(os.path.join(REF, name)).astype(np.float64)


class Cache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        cls.np = gpt2_numpy.load(GPT2)
        cls.acts = gpt2_numpy.forward(cls.np, IDS)
        cls.logits, cls.cache = cls.m.run_with_cache(IDS)
        cls.w = cls.np["w"]

    def close(self, got, want, what, atol=ATOL):
        got = got.detach().numpy() if isinstance(got, torch.Tensor) else got
        self.assertEqual(got.shape, want.shape, what)
        self.assertLess(np.abs(got - want).max(), atol, what)

    def test_every_kind_recorded(self):
        c = self.cache
        self.assertIsInstance(c, vocablens.ActivationCache)
        self.assertEqual(set(c.keys()), set(self.m.hook_names()))
        self.assertEqual(len(c), 4 + 19 * 3)
        for name in c.keys():
            got = c[name][0].numpy()
            want = self.acts[name]
            finite = np.isfinite(want)
            self.assertTrue(np.array_equal(finite, np.isfinite(got)), name)
            self.assertLess(np.abs(got[finite] - want[finite]).max(), ATOL, name)
        self.assertEqual(tuple(c["blocks.0.attn.hook_z"].shape), (1, 10, 4, 16))
        self.assertEqual(tuple(c["blocks.2.mlp.hook_post"].shape), (1, 10, 256))
        self.assertEqual(tuple(c["blocks.1.attn.hook_attn_scores"].shape), (1, 4, 10, 10))
        self.close(self.logits[0], self.acts["logits"], "logits")
        # residual points are the forward's own tensors, not copies: the stream leaving block 1 is the very
        # tensor entering block 2
        self.assertEqual(c["resid_post", 1].data_ptr(), c["resid_pre", 2].data_ptr())

    def test_keys_and_spellings(self):
        c = self.cache
        self.assertTrue(torch.equal(c["resid_pre", 1], c["blocks.1.hook_resid_pre"]))
        self.assertTrue(torch.equal(c["z", 2], c["blocks.2.attn.hook_z"]))
        self.assertTrue(torch.equal(c["post", 0], c["blocks.0.mlp.hook_post"]))
        self.assertTrue(torch.equal(c["pattern", 1, "attn"], c["blocks.1.attn.hook_pattern"]))
        self.assertTrue(torch.equal(c["z.2"], c["blocks.2.attn.hook_z"]))
        self.assertTrue(torch.equal(c["embed"], c["hook_embed"]))
        self.assertIn("blocks.0.attn.hook_q", c)
        self.assertIn("mlp_post.1", c)
        self.assertIn(("resid_mid", 2), c)
        self.assertNotIn("blocks.7.hook_resid_pre", c)
        with self.assertRaises(KeyError):
            c["resid_pre", 7]
        # names filter: a callable, a list (keys as given), the older names= keyword
        _, only = self.m.run_with_cache(IDS, names_filter=lambda n: n.endswith("hook_z"))
        self.assertEqual(list(only.keys()), ["blocks.%d.attn.hook_z" % l for l in range(3)])
        _, some = self.m.run_with_cache(IDS, ["z.1", "blocks.0.mlp.hook_pre"])
        self.assertEqual(set(some.keys()), {"z.1", "blocks.0.mlp.hook_pre"})
        self.assertTrue(torch.equal(some["blocks.1.attn.hook_z"], some["z.1"]))
        _, old = self.m.run_with_cache(IDS, names=["blocks.1.attn.hook_z", "attn_scores.0", "hook_embed"])
        self.assertEqual(len(old), 3)
        with self.assertRaises(ValueError) as cm:
            self.m.run_with_cache(IDS, names_filter=["blocks.0.attn.hook_nothing"])
        self.assertIn("names_filter", str(cm.exception))

    def test_accumulated_resid(self):
        acc, labels = self.cache.accumulated_resid(return_labels=True)
        self.assertEqual(tuple(acc.shape), (4, 1, 10, 64))               # [n_layers + 1, batch, pos, d_model]
        self.assertEqual(labels, ["0_pre", "1_pre", "2_pre", "final_post"])
        pre = ref("seq1_eiffel_resid_pre.npy")
        for l in range(3):
            self.close(acc[l, 0], pre[l], "resid_pre %d" % l)
        self.close(acc[3, 0], ref("seq1_eiffel_resid_final.npy"), "final")
        mid, labels = self.cache.accumulated_resid(layer=2, incl_mid=True, return_labels=True)
        self.assertEqual(labels, ["0_pre", "0_mid", "1_pre", "1_mid", "2_pre"])
        self.close(mid[1, 0], ref("seq1_eiffel_resid_mid.npy")[0], "resid_mid 0")
        # apply_ln: the final norm of each entry (the logit lens); the last one is ln_final's output
        ln = self.cache.accumulated_resid(apply_ln=True)
        self.close(ln[3, 0], ref("seq1_eiffel_ln_f.npy"), "ln_f")
        for l in range(3):
            want = gpt2_numpy.layer_norm(pre[l], self.w["ln_f.weight"], self.w["ln_f.bias"], 1e-5)
            self.close(ln[l, 0], want, "logit lens input %d" % l)
        self.close(self.m.unembed(ln[3]).detach()[0], self.acts["logits"], "unembed(last)")
        last = self.cache.accumulated_resid(pos_slice=-1)
        self.assertEqual(tuple(last.shape), (4, 1, 64))

    def _scale(self, x):
        mu = x.mean(-1, keepdims=True)
        return np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)

    def test_decompose_and_apply_ln(self):
        parts, labels = self.cache.decompose_resid(return_labels=True)
        self.assertEqual(labels, ["embed", "pos_embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out",
                                  "2_attn_out", "2_mlp_out"])
        final = ref("seq1_eiffel_resid_final.npy")
        self.close(parts.sum(0)[0], final, "pieces sum to the stream")
        a = self.acts
        hand = [a["hook_embed"], a["hook_pos_embed"]] + [a["blocks.%d.hook_%s" % (l, k)] for l in range(3)
                                                          for k in ("attn_out", "mlp_out")]
        self.close(parts[:, 0], np.stack(hand), "pieces")
        # apply_ln_to_stack: centred, divided by the final residual's scale, times ln_f's weight
        ln = self.cache.apply_ln_to_stack(parts)
        s = self._scale(final)
        g = self.w["ln_f.weight"]
        want = np.stack([(p - p.mean(-1, keepdims=True)) / s * g for p in hand])
        self.close(ln[:, 0], want, "apply_ln_to_stack")
        self.close(ln.sum(0)[0] + torch.from_numpy(self.w["ln_f.bias"]).float(), ref("seq1_eiffel_ln_f.npy"),
                   "sum + ln_f bias = ln_final output")
        # layer 1: the stream entering block 1, and with mlp_input the one entering its MLP
        p1 = self.cache.decompose_resid(layer=1)
        self.close(p1.sum(0)[0], ref("seq1_eiffel_resid_pre.npy")[1], "resid_pre 1")
        p1m, lab = self.cache.decompose_resid(layer=1, mlp_input=True, return_labels=True)
        self.assertEqual(lab[-1], "1_attn_out")
        self.close(p1m.sum(0)[0], ref("seq1_eiffel_resid_mid.npy")[1], "resid_mid 1")
        ln1 = self.cache.decompose_resid(layer=1, mlp_input=True, apply_ln=True)
        mid1 = ref("seq1_eiffel_resid_mid.npy")[1]
        self.close(ln1.sum(0)[0] + torch.from_numpy(self.w["h.1.ln_2.bias"]).float(),
                   gpt2_numpy.layer_norm(mid1, self.w["h.1.ln_2.weight"], self.w["h.1.ln_2.bias"], 1e-5), "ln2 input")
        attn_only = self.cache.decompose_resid(mode="attn", incl_embeds=False)
        self.assertEqual(tuple(attn_only.shape), (3, 1, 10, 64))

    def test_stack_head_results(self):
        heads, labels = self.cache.stack_head_results(return_labels=True)
        self.assertEqual(tuple(heads.shape), (12, 1, 10, 64))
        self.assertEqual(labels[:5], ["L0H0", "L0H1", "L0H2", "L0H3", "L1H0"])
        for l in range(3):
            r = self.acts["blocks.%d.attn.hook_result" % l]                # [pos, head, d_model]
            for h in range(4):
                self.close(heads[4 * l + h, 0], r[:, h], "L%dH%d" % (l, h))
        with_rest, labels = self.cache.stack_head_results(layer=2, incl_remainder=True, return_labels=True)
        self.assertEqual(labels[-1], "remainder")
        self.close(with_rest.sum(0)[0], ref("seq1_eiffel_resid_post.npy")[1], "heads + remainder")
        # without cached results they come from hook_z @ W_O
        _, zs = self.m.run_with_cache(IDS, names_filter=lambda n: n.endswith("hook_z"))
        self.close(zs.stack_head_results(), heads.detach().numpy(), "from hook_z", atol=1e-5)

    def test_neuron_results(self):
        nr = self.cache.get_neuron_results(1)
        self.assertEqual(tuple(nr.shape), (1, 10, 256, 64))
        post, W_out = self.acts["blocks.1.mlp.hook_post"], self.w["h.1.mlp.c_proj.weight"]
        self.close(nr[0, :, 7], post[:, 7:8] * W_out[7], "neuron 1.7")
        self.close(nr.sum(-2)[0] + torch.from_numpy(self.w["h.1.mlp.c_proj.bias"]).float(),
                   self.acts["blocks.1.hook_mlp_out"], "neurons + b_out = mlp_out")
        some, labels = self.cache.stack_neuron_results(2, neuron_slice=[3, 5], return_labels=True, incl_remainder=True)
        self.assertEqual(labels, ["L0N3", "L0N5", "L1N3", "L1N5", "remainder"])
        self.close(some.sum(0)[0], ref("seq1_eiffel_resid_pre.npy")[2], "neurons + remainder")
        self.close(some[3, 0], self.acts["blocks.1.mlp.hook_post"][:, 5:6] * W_out[5], "L1N5")
        stacked = self.cache.stack_activation("z")
        self.assertEqual(tuple(stacked.shape), (3, 1, 10, 4, 16))
        self.assertTrue(torch.equal(stacked[2], self.cache["blocks.2.attn.hook_z"]))

    def test_logit_attrs(self):
        parts = self.cache.decompose_resid()
        tok, wrong = 1748, 262
        attrs = self.cache.logit_attrs(parts, tok)
        self.assertEqual(tuple(attrs.shape), (8, 1, 10))
        final = ref("seq1_eiffel_resid_final.npy")
        s, g, W = self._scale(final), self.w["ln_f.weight"], self.w["wte.weight"]
        a = self.acts
        hand = [a["hook_embed"], a["hook_pos_embed"]] + [a["blocks.%d.hook_%s" % (l, k)] for l in range(3)
                                                          for k in ("attn_out", "mlp_out")]
        want = np.stack([((p - p.mean(-1, keepdims=True)) / s * g) @ W[tok] for p in hand])
        self.close(attrs[:, 0], want, "logit_attrs")
        # the attributions plus the norm's bias term give the logit
        logit = self.acts["logits"][:, tok]
        self.close(attrs.sum(0)[0] + float(self.w["ln_f.bias"] @ W[tok]), logit, "sum = logit")
        diff = self.cache.logit_attrs(parts, " city", incorrect_tokens=" the")
        self.close(diff[:, 0], want - np.stack([((p - p.mean(-1, keepdims=True)) / s * g) @ W[wrong] for p in hand]),
                   "logit difference")
        last = self.cache.logit_attrs(parts[:, :, -1], tok, pos_slice=-1)
        self.close(last[:, 0], want[:, -1], "last position")

    def test_save_and_load(self):
        d = tempdir("cache")
        _, c = self.m.run_with_cache(IDS, names_filter=["blocks.1.attn.hook_z", "resid_post.2", "hook_embed"])
        c.save(d)
        back = vocablens.load_cache(d, model=self.m)
        self.assertEqual(set(back.keys()), set(c.keys()))
        for k in c.keys():
            self.assertTrue(torch.equal(back[k], c[k]), k)
            self.assertTrue(np.array_equal(np.load(os.path.join(d, k + ".npy")), c[k].numpy()))
        self.assertTrue(torch.equal(back["z", 1], c["z.1"]))
        bare = vocablens.load_cache(d)
        with self.assertRaises(ValueError):
            bare.stack_head_results()
        with self.assertRaises(vocablens.FormatError):
            vocablens.load_cache(tempdir("empty"))


class Llama(unittest.TestCase):
    """A rotary, RMSNorm, gated-MLP, grouped-query model (stories260K): the shapes as the model holds them,
    and the helpers' sums, against the fixture's run.c reference where it has one."""

    def test_stories260k(self):
        path = fixture("stories260K/stories260K.bin")
        m = vocablens.load_model(path)
        c = m.config
        ids = np.load(os.path.join(os.path.dirname(path), "reference", "ids_first32.npy")).tolist()
        logits, cache = m.run_with_cache(ids)
        self.assertNotIn("hook_pos_embed", cache)                         # rotary: no position embedding
        self.assertEqual(len(cache), 3 + 19 * c["n_layers"])                 # embed, final scale and norm
        T = len(ids)
        self.assertEqual(tuple(cache["k", 0].shape), (1, T, c["n_kv_heads"], c["d_head"]))   # not repeated
        self.assertEqual(tuple(cache["q", 0].shape), (1, T, c["n_heads"], c["d_head"]))
        self.assertEqual(tuple(cache["blocks.0.mlp.hook_post"].shape), (1, T, c["d_mlp"]))
        resid = np.load(os.path.join(os.path.dirname(path), "reference", "resid_post_first32.npy"))
        acc = cache.accumulated_resid()
        self.assertEqual(tuple(acc.shape), (c["n_layers"] + 1, 1, T, c["d_model"]))
        for l in range(c["n_layers"]):
            self.assertLess(np.abs(acc[l + 1, 0].numpy() - resid[l]).max(), ATOL, "resid %d" % l)
        parts = cache.decompose_resid()
        self.assertLess((parts.sum(0) - acc[-1]).abs().max().item(), 1e-4)
        # RMSNorm: no centring; the pieces through the final norm add up to its output (no bias)
        ln = cache.apply_ln_to_stack(parts)
        self.assertLess((ln.sum(0) - cache["ln_final.hook_normalized"]).abs().max().item(), 1e-4)
        fin = cache.accumulated_resid(apply_ln=True)[-1]
        self.assertLess((m.unembed(fin) - logits).abs().max().item(), 1e-4)
        heads = cache.stack_head_results(incl_remainder=True)
        self.assertLess((heads.sum(0) - acc[-1]).abs().max().item(), 1e-4)
        # a hook at k edits the kv head for every query head that reads it: the pattern changes for both
        before = cache["pattern", 0][0, :, -1].clone()
        _, after = m.run_with_cache(ids, names_filter=["blocks.0.attn.hook_pattern"],
                                    fwd_hooks=[("blocks.0.attn.hook_k", lambda k, hook: k.mul_(3.0))])
        changed = (after["pattern", 0][0, :, -1] - before).abs().amax(-1) > 1e-6
        self.assertEqual(int(changed.sum()), c["n_heads"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
