"""Coming from TransformerLens (docs/python.md): every row of the table, each checked against TransformerLens's
documented behaviour or an independent computation — the fixtures' own config.json / llama2.c header, the weights
read from model.safetensors by gpt2_numpy.py (nothing from vocablens), its float64 forward; plus the one-line
errors of TransformerLens-style calls, hooks that stay in their thread, and patch()'s warning."""
import json
import os
import shutil
import struct
import subprocess
import threading
import unittest
import warnings

import numpy as np
import torch

from support import SOURCE, cli, fixture, tempdir, vocablens
import gpt2_numpy

GPT2 = fixture("gpt2-tiny")
STORIES = fixture("stories260K/stories260K.bin")
IDS = [464, 412, 733, 417, 8765, 318, 287, 262, 1748, 286]   # "The Eiffel Tower is in the city of"
BOS = 50256                                                 # GPT-2's <|endoftext|>: its BOS and EOS
ATOL = 1e-4


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)
        cls.np = gpt2_numpy.load(GPT2)
        cls.w = cls.np["w"]

    def close(self, got, want, what, atol=ATOL):
        got = got.detach().double().numpy() if isinstance(got, torch.Tensor) else got
        self.assertEqual(got.shape, np.shape(want), what)
        self.assertLess(np.abs(got - want).max(), atol, what)

    def one_line(self, exc_type, fn, *args, **kwargs):
        with self.assertRaises(exc_type) as cm:
            fn(*args, **kwargs)
        msg = str(cm.exception)
        self.assertNotIn("\n", msg)
        self.assertNotIn("incompatible function arguments", msg)
        self.assertNotIn("Unable to cast", msg)
        return msg


class Config(Base):
    def test_cfg_fields_from_config_json(self):
        with open(os.path.join(GPT2, "config.json")) as f:
            hf = json.load(f)
        c = self.m.cfg
        self.assertEqual((c.n_layers, c.d_model, c.n_heads, c.d_vocab, c.n_ctx),
                         (hf["n_layer"], hf["n_embd"], hf["n_head"], hf["vocab_size"], hf["n_positions"]))
        self.assertEqual(c.d_head, hf["n_embd"] // hf["n_head"])
        self.assertEqual(c.d_mlp, 4 * hf["n_embd"])                      # n_inner null: GPT-2's 4 * d_model
        self.assertEqual(c.act_fn, hf["activation_function"])
        self.assertEqual(c.eps, hf["layer_norm_epsilon"])
        self.assertEqual(c.normalization_type, "LN")
        self.assertEqual(c.positional_embedding_type, "standard")      # TransformerLens's word for learned
        self.assertIsNone(c.n_key_value_heads)                          # no grouped-query attention
        self.assertTrue(c.default_prepend_bos)
        self.assertFalse(c.tokenizer_prepends_bos)
        self.assertEqual(c.to_dict()["n_layers"], 3)
        self.assertEqual(self.m.config["n_layers"], 3)                  # model.config stays a dict
        msg = self.one_line(AttributeError, getattr, c, "n_layer")
        self.assertIn("n_layer", msg)
        self.one_line(AttributeError, setattr, c, "n_layers", 4)

    def test_cfg_llama2c_from_header(self):
        with open(STORIES, "rb") as f:
            dim, hidden, layers, heads, kv_heads, vocab, seq = struct.unpack("<7i", f.read(28))
        c = vocablens.load_model(STORIES).cfg
        self.assertEqual((c.d_model, c.d_mlp, c.n_layers, c.n_heads, c.d_vocab, c.n_ctx),
                         (dim, hidden, layers, heads, abs(vocab), seq))
        self.assertEqual(c.n_key_value_heads, kv_heads)
        self.assertEqual((c.normalization_type, c.positional_embedding_type, c.act_fn, c.gated_mlp),
                         ("RMS", "rotary", "silu", True))
        self.assertEqual(c.rotary_dim, dim // heads)
        self.assertTrue(c.tokenizer_prepends_bos)                       # llama2.c's tokenizer adds BOS itself


class Weights(Base):
    def test_stacked_weights_have_transformerlens_shapes_and_values(self):
        m, w, d, H = self.m, self.w, 64, 4
        dh = d // H
        for l in range(3):
            p = "h.%d." % l
            qkv, qkv_b = w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"]
            for i, key in enumerate(("W_Q", "W_K", "W_V")):
                # TransformerLens: W_Q[l, h] = c_attn[:, h*dh:(h+1)*dh] of the query third
                want = qkv[:, i * d:(i + 1) * d].reshape(d, H, dh).transpose(1, 0, 2)
                self.close(getattr(m, key)[l], want, key)
                self.close(getattr(m, "b_" + key[-1])[l], qkv_b[i * d:(i + 1) * d].reshape(H, dh), "b_" + key[-1])
            self.close(m.W_O[l], w[p + "attn.c_proj.weight"].reshape(H, dh, d), "W_O")
            self.close(m.b_O[l], w[p + "attn.c_proj.bias"], "b_O")
            self.close(m.W_in[l], w[p + "mlp.c_fc.weight"], "W_in")
            self.close(m.b_in[l], w[p + "mlp.c_fc.bias"], "b_in")
            self.close(m.W_out[l], w[p + "mlp.c_proj.weight"], "W_out")
            self.close(m.b_out[l], w[p + "mlp.c_proj.bias"], "b_out")
            blk = m.blocks[l]
            self.assertTrue(torch.equal(blk.attn.W_O, m.W_O[l]))
            self.close(blk.ln1.w, w[p + "ln_1.weight"], "ln1.w")
            self.close(blk.ln2.b, w[p + "ln_2.bias"], "ln2.b")
        self.assertEqual(tuple(m.W_Q.shape), (3, H, d, dh))
        self.assertEqual(tuple(m.W_O.shape), (3, H, dh, d))
        self.assertEqual(tuple(m.W_in.shape), (3, d, 256))
        self.assertEqual(tuple(m.b_O.shape), (3, d))
        self.assertIsNone(m.W_gate)                                     # TransformerLens: None without a gated MLP
        self.close(m.W_E, w["wte.weight"], "W_E")
        self.close(m.W_pos, w["wpe.weight"], "W_pos")
        self.close(m.W_U, w["wte.weight"].T, "W_U")
        self.close(m.b_U, np.zeros(50257), "b_U")                       # GPT-2 has none: TransformerLens's zeros
        self.close(m.ln_final.w, w["ln_f.weight"], "ln_final.w")
        self.assertTrue(torch.equal(m.blocks[-1].attn.W_Q, m.W_Q[2]))
        self.assertEqual(len(m.blocks), 3)
        self.assertTrue(torch.equal(m.embed.W_E, m.W_E) and torch.equal(m.unembed.W_U, m.W_U))

    def test_callable_parts(self):
        x = torch.from_numpy(np.random.RandomState(1).normal(0, 1, (2, 5, 64)).astype(np.float32))
        want = gpt2_numpy.layer_norm(x.double().numpy(), self.w["ln_f.weight"], self.w["ln_f.bias"], 1e-5)
        self.close(self.m.ln_final(x), want, "ln_final(x)")
        self.close(self.m.unembed(x), x.double().numpy() @ self.w["wte.weight"].T, "unembed(x)", 1e-3)

    def test_llama_zero_biases_and_gqa(self):
        m = vocablens.load_model(STORIES)
        self.assertEqual(tuple(m.b_Q.shape), (5, 8, 8))
        self.assertEqual(float(m.b_Q.abs().max()), 0.0)                 # no biases: TransformerLens's zeros
        self.assertEqual(tuple(m.W_gate.shape), (5, 64, 172))
        self.assertIsNone(m.blocks[0].ln1.b)                            # RMSNorm has no bias
        # grouped-query attention: 8 query heads over 4 kv heads, kv head h // 2 repeated (TransformerLens's W_K)
        for h in range(0, 8, 2):
            self.assertTrue(torch.equal(m.W_K[0, h], m.W_K[0, h + 1]))
        self.assertFalse(torch.equal(m.W_K[0, 0], m.W_K[0, 2]))


class ActNames(Base):
    def test_get_act_name_as_transformerlens_documents(self):
        g = vocablens.utils.get_act_name
        # the examples of TransformerLens's docstring
        self.assertEqual(g("k", 6, "a"), "blocks.6.attn.hook_k")
        self.assertEqual(g("pre", 2), "blocks.2.mlp.hook_pre")
        self.assertEqual(g("embed"), "hook_embed")
        self.assertEqual(g("k6"), "blocks.6.attn.hook_k")
        self.assertEqual(g("pre5"), "blocks.5.mlp.hook_pre")
        # and every kind of point a vocablens model has
        for short, want in [("resid_pre", "hook_resid_pre"), ("resid_mid", "hook_resid_mid"),
                            ("resid_post", "hook_resid_post"), ("attn_out", "hook_attn_out"),
                            ("mlp_out", "hook_mlp_out"),
                            ("q", "attn.hook_q"), ("k", "attn.hook_k"), ("v", "attn.hook_v"), ("z", "attn.hook_z"),
                            ("result", "attn.hook_result"), ("pattern", "attn.hook_pattern"),
                            ("attn", "attn.hook_pattern"),
                            ("attn_scores", "attn.hook_attn_scores"), ("attn_logits", "attn.hook_attn_scores"),
                            ("pre", "mlp.hook_pre"), ("post", "mlp.hook_post"), ("mlp_post", "mlp.hook_post")]:
            self.assertEqual(g(short, 1), "blocks.1." + want)
            self.assertIn(g(short, 1), self.m.hook_names())
        self.assertEqual(g("pos_embed"), "hook_pos_embed")
        self.assertEqual(g("normalized"), "ln_final.hook_normalized")
        self.assertEqual(g("scale"), "ln_final.hook_scale")
        self.assertEqual(g("blocks.0.hook_resid_pre"), "blocks.0.hook_resid_pre")   # a full name as given
        # the norms' points, TransformerLens's docstring examples
        self.assertEqual(g("scale4ln1"), "blocks.4.ln1.hook_scale")
        self.assertEqual(g("normalized", 2, "ln2"), "blocks.2.ln2.hook_normalized")
        self.assertEqual(g("scale", 1, "ln2"), "blocks.1.ln2.hook_scale")
        for n in ("blocks.1.ln2.hook_normalized", "blocks.1.ln1.hook_scale", "ln_final.hook_scale"):
            self.assertIn(n, self.m.hook_names())
        # TransformerLens's points vocablens does not hook: a clear error naming the point
        self.assertIn("blocks.3.hook_scale", self.one_line(ValueError, g, "scale", 3))
        self.assertIn("rot_q", self.one_line(ValueError, g, "rot_q", 0))
        self.assertIn("name", self.one_line(TypeError, g, 5))
        self.assertIn("-1", self.one_line(ValueError, g, "resid_post", -1))

    def test_cache_negative_layers(self):
        _, cache = self.m.run_with_cache(IDS)
        self.assertTrue(torch.equal(cache["resid_post", -1], cache["blocks.2.hook_resid_post"]))
        self.assertTrue(torch.equal(cache["z", -3], cache["blocks.0.attn.hook_z"]))
        self.assertTrue(torch.equal(cache["pattern", -2, "attn"], cache["blocks.1.attn.hook_pattern"]))
        self.assertTrue(torch.equal(cache["pattern", 0], cache["blocks.0.attn.hook_pattern"]))
        self.assertTrue(torch.equal(cache["resid_pre1"], cache["blocks.1.hook_resid_pre"]))
        self.assertTrue(torch.equal(cache[vocablens.utils.get_act_name("mlp_out", 0)], cache["mlp_out", 0]))
        with self.assertRaises(KeyError):
            cache["resid_post", -4]


class AttnResult(Base):
    def test_set_use_attn_result(self):
        m = self.m
        _, cache = m.run_with_cache(IDS)
        self.assertIn("blocks.0.attn.hook_result", cache)               # vocablens caches it by default
        m.set_use_attn_result(False)
        try:
            self.assertFalse(m.cfg.use_attn_result)
            logits, cache = m.run_with_cache(IDS)
            self.assertNotIn("blocks.0.attn.hook_result", cache)
            self.assertTrue(torch.equal(logits, m(IDS)))                 # per-head sums not taken: forward's logits
            self.assertIn("blocks.0.attn.hook_result", m.run_with_cache(IDS, names_filter="result.0")[1])
        finally:
            m.set_use_attn_result(True)
        self.assertIn("blocks.0.attn.hook_result", m.run_with_cache(IDS)[1])
        self.assertIn("use_attn_result", self.one_line(TypeError, m.set_use_attn_result, "yes"))


class Tokens(Base):
    def test_bos_as_transformerlens(self):
        m = self.m
        # TransformerLens's default_prepend_bos is True for every model: GPT-2's <|endoftext|> first
        self.assertEqual(m.to_tokens("Hello").tolist(), [[BOS, 15496]])
        self.assertEqual(m.to_tokens("Hello", prepend_bos=False).tolist(), [[15496]])
        self.assertEqual(m.to_str_tokens("Hello"), ["<|endoftext|>", "Hello"])
        self.assertEqual(m.to_tokens(["Hello world", "Hi"]).tolist(), [[BOS, 15496, 995], [BOS, 17250, BOS]])
        self.assertEqual(m.to_string(m.to_tokens("Hello")[0]), "<|endoftext|>Hello")   # decode keeps specials
        self.assertEqual(m.to_single_token(" city"), 1748)              # GPT-2's id (fixture README)
        s = vocablens.load_model(STORIES)
        bos = s.tokenizer.bos_id
        self.assertEqual(s.to_tokens("Once")[0].tolist().count(bos), 1)  # a tokenizer that adds BOS: still once
        self.assertNotIn(bos, s.to_tokens("Once", prepend_bos=False)[0].tolist())

    def test_model_of_text_and_lists(self):
        m = self.m
        plain = gpt2_numpy.forward(self.np, [BOS] + IDS)["logits"]
        text = "The Eiffel Tower is in the city of"
        self.close(m(text)[0], plain, "model(text)")
        self.assertTrue(torch.equal(m(text), m(m.to_tokens(text))))
        self.close(m(text, prepend_bos=False)[0], gpt2_numpy.forward(self.np, IDS)["logits"], "prepend_bos=False")
        both = m([text, "Hi"])
        self.assertEqual(tuple(both.shape), (2, 11, 50257))
        self.close(both[0], plain, "row 0")
        self.close(both[1, :2], gpt2_numpy.forward(self.np, [BOS, 17250])["logits"], "row 1 before its padding")
        loss = m(text, return_type="loss")
        lp = plain - plain.max(-1, keepdims=True)
        lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
        ids = [BOS] + IDS
        self.assertAlmostEqual(loss.item(), -np.mean([lp[t, ids[t + 1]] for t in range(len(ids) - 1)]), places=4)
        _, cache = m.run_with_cache(text, names_filter="blocks.0.hook_resid_pre")
        self.assertEqual(cache["blocks.0.hook_resid_pre"].shape[1], 11)


class AddedHooks(Base):
    def tearDown(self):
        self.m.reset_hooks(including_permanent=True)

    def test_add_hook_reset_hooks_hook_dict(self):
        m = self.m
        plain = m(IDS)

        def zero(z, hook):
            z[:, :, 2] = 0.0

        def ref_zero(z):
            z[:, 2] = 0.0
            return z
        want = gpt2_numpy.forward(self.np, IDS, {"blocks.1.attn.hook_z": ref_zero})["logits"]
        m.add_hook("blocks.1.attn.hook_z", zero)
        self.close(m(IDS)[0], want, "add_hook")
        self.close(m(IDS)[0], want, "still there on the next call")
        m.reset_hooks()
        self.assertTrue(torch.equal(m(IDS), plain))
        m.add_hook(lambda n: n == "blocks.1.attn.hook_z", zero, is_permanent=True)     # a filter, permanent
        m.reset_hooks()
        self.close(m(IDS)[0], want, "a permanent hook outlives reset_hooks()")
        m.reset_hooks(including_permanent=True)
        self.assertTrue(torch.equal(m(IDS), plain))
        hd = m.hook_dict
        self.assertEqual(list(hd), m.hook_names())
        hd["blocks.1.attn.hook_z"].add_hook(zero)
        self.close(m(IDS)[0], want, "hook_dict[name].add_hook")
        hd["blocks.1.attn.hook_z"].remove_hooks()
        self.assertTrue(torch.equal(m(IDS), plain))
        order = []
        m.add_hook("blocks.0.hook_mlp_out", lambda x, hook: order.append("second"))
        m.add_hook("blocks.0.hook_mlp_out", lambda x, hook: order.append("first"), prepend=True)
        m(IDS)
        self.assertEqual(order, ["first", "second"])

    def test_backward_hook_added(self):
        m = self.m
        grads = {}

        def keep(g, hook):
            grads[hook.name] = g.clone()
        m.add_hook("blocks.1.hook_resid_post", keep, dir="bwd")
        logits = m(IDS)
        self.assertTrue(logits.requires_grad)
        logits[0, -1, 42].backward()
        m.reset_hooks()
        want = m.gradients(IDS, lambda lg: lg[0, -1, 42], "blocks.1.hook_resid_post")["blocks.1.hook_resid_post"]
        self.assertLess((grads["blocks.1.hook_resid_post"] - want).abs().max().item(), 1e-6)

    def test_bad_hook_calls_are_one_line(self):
        m = self.m
        self.assertIn("blocks.9", self.one_line(ValueError, m.add_hook, "blocks.9.hook_resid_pre",
                                                lambda x, hook: None))
        self.assertIn("callable", self.one_line(TypeError, m.add_hook, "blocks.0.hook_resid_pre", "not a function"))
        self.assertIn("dir", self.one_line(ValueError, m.add_hook, "blocks.0.hook_resid_pre", lambda x, h: None,
                                           dir="sideways"))
        self.assertIn("direction", self.one_line(ValueError, m.reset_hooks, direction="up"))


class Threads(Base):
    def test_hooks_stay_in_their_thread(self):
        m = self.m
        plain = m(IDS)
        vec = torch.full((64,), 3.0)
        entered, checked = threading.Event(), threading.Event()
        inside = {}

        def other():
            with m.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", lambda x, hook: x + vec)]):
                m.add_hook("blocks.0.attn.hook_z", lambda z, hook: z.zero_())
                inside["logits"] = m(IDS)
                entered.set()
                checked.wait(60)
            m.reset_hooks()

        t = threading.Thread(target=other)
        t.start()
        try:
            self.assertTrue(entered.wait(60))
            # the other thread's block is open and its added hook in place: this thread's forwards are plain
            for _ in range(3):
                self.assertTrue(torch.equal(m(IDS), plain))
                _, cache = m.run_with_cache(IDS, names_filter="blocks.1.hook_resid_pre")
                self.assertTrue(torch.equal(m.run_with_hooks(IDS), plain))
        finally:
            checked.set()
            t.join()
        want = gpt2_numpy.forward(self.np, IDS, {"blocks.0.attn.hook_z": lambda z: z * 0.0,
                                                 "blocks.1.hook_resid_pre": lambda x: x + 3.0})["logits"]
        self.close(inside["logits"][0], want, "the hooks applied in their own thread")
        self.assertTrue(torch.equal(m(IDS), plain))


class Generate(Base):
    def greedy_reference(self, ids, n):
        """Greedy continuation by the float64 reference, stopping after EOS as TransformerLens's stop_at_eos."""
        ids = list(ids)
        for _ in range(n):
            ids.append(int(np.argmax(gpt2_numpy.forward(self.np, ids)["logits"][-1])))
            if ids[-1] == BOS:
                break
        return ids

    def test_greedy_and_return_types(self):
        m = self.m
        want = self.greedy_reference([BOS] + IDS[:6], 6)                 # BOS + "The Eiffel Tower is"
        got = m.generate("The Eiffel Tower is", max_new_tokens=6, do_sample=False, return_type="tokens")
        self.assertEqual(got.tolist(), [want])
        text = m.generate("The Eiffel Tower is", max_new_tokens=6, do_sample=False, return_type="str")
        self.assertEqual(text, m.decode(want[1:]))                       # special tokens left out, as TransformerLens
        self.assertEqual(m.generate("The Eiffel Tower is", max_new_tokens=6, do_sample=False), text)   # "input"
        as_ids = m.generate(torch.tensor([want[:7]]), max_new_tokens=6, do_sample=False)
        self.assertEqual(as_ids.tolist(), [want])
        # with a hook in place every step runs in Python; a no-op hook gives the same tokens
        m.add_hook("blocks.0.hook_resid_pre", lambda x, hook: None)
        try:
            again = m.generate("The Eiffel Tower is", max_new_tokens=6, do_sample=False, return_type="tokens")
        finally:
            m.reset_hooks()
        self.assertEqual(again.tolist(), [want])
        self.assertEqual(m.generate("The Eiffel Tower is", steps=6, do_sample=False, return_type="tokens").tolist(),
                         [want])
        # SentencePiece: the text as the whole sequence decodes (<s> is empty text and takes the space after it)
        s = vocablens.load_model(STORIES)
        toks = s.generate("Once upon a time", max_new_tokens=8, do_sample=False, return_type="tokens")
        self.assertEqual(toks[0, 0].item(), s.tokenizer.bos_id)
        self.assertEqual(s.generate("Once upon a time", max_new_tokens=8, do_sample=False), s.to_string(toks[0]))
        self.assertTrue(s.to_string(toks[0]).startswith("Once upon a time"))
        self.assertEqual(len(want), 13)                                  # six new tokens, none of them EOS
        stop = want[9]                                                   # a later token as EOS: stops at its first
        first = 7 + want[7:].index(stop)
        short = m.generate("The Eiffel Tower is", max_new_tokens=6, do_sample=False, eos_token_id=stop,
                           return_type="tokens")
        self.assertEqual(short.tolist(), [want[:first + 1]])

    def test_sampling(self):
        m = self.m
        prompt = "The Eiffel Tower is"
        greedy = m.generate(prompt, max_new_tokens=5, do_sample=False, return_type="tokens")
        self.assertTrue(torch.equal(m.generate(prompt, max_new_tokens=5, top_k=1, return_type="tokens"), greedy))
        torch.manual_seed(7)
        a = m.generate(prompt, max_new_tokens=5, top_k=3, return_type="tokens")
        torch.manual_seed(7)
        b = m.generate(prompt, max_new_tokens=5, top_k=3, return_type="tokens")
        self.assertTrue(torch.equal(a, b))
        seq = a[0].tolist()
        start = m.to_tokens(prompt).shape[1]
        for t in range(start, len(seq)):                                 # each draw is among the 3 likeliest
            logits = gpt2_numpy.forward(self.np, seq[:t])["logits"][-1]
            self.assertIn(seq[t], np.argsort(-logits)[:3].tolist())
        # temperature 0 and a top_p below the top token's probability leave only the argmax (TransformerLens's rules)
        self.assertTrue(torch.equal(m.generate(prompt, max_new_tokens=5, temperature=0.0, return_type="tokens"),
                                    greedy))
        self.assertTrue(torch.equal(m.generate(prompt, max_new_tokens=5, top_p=1e-9, return_type="tokens"), greedy))
        # freq_penalty subtracts penalty * count: a huge one never draws a token already in the sequence
        torch.manual_seed(3)
        fresh = m.generate(prompt, max_new_tokens=8, freq_penalty=1e4, return_type="tokens")[0].tolist()
        for t in range(start, len(fresh)):
            self.assertNotIn(fresh[t], fresh[:t])

    def test_bad_arguments(self):
        m = self.m
        self.assertIn("max_new_tokens", self.one_line(TypeError, m.generate, "Hi", max_new_tokens="5"))
        self.assertIn("return_type", self.one_line(ValueError, m.generate, "Hi", return_type="embeds"))
        self.assertIn("temperature", self.one_line(ValueError, m.generate, "Hi", temperature=-1.0))
        self.assertIn("different lengths", self.one_line(ValueError, m.generate, ["Hello world", "Hi"]))


class SaeNames(Base):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.fx = tempdir("tl-sae")
        subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "tests", "fixtures", "sae", "make_saes.py"), cls.fx,
                        GPT2], check=True)

    def test_cfg_attributes_and_call(self):
        sae = vocablens.load_sae(os.path.join(self.fx, "saelens_standard"))
        self.assertEqual((sae.cfg.d_in, sae.cfg.d_sae, sae.cfg.hook_name), (64, 96, "blocks.1.hook_resid_pre"))
        self.assertIsInstance(sae.cfg, dict)
        self.assertEqual(sae.cfg["d_sae"], 96)
        x = torch.from_numpy(np.load(os.path.join(self.fx, "x.npy")))
        ref = np.load(os.path.join(self.fx, "ref", "saelens_standard.recon.npy"))
        self.assertLessEqual(np.abs(sae(x).numpy() - ref).max(), 1e-5)  # SAELens's forward: decode(encode(x))
        self.assertIn("hook_nam", self.one_line(AttributeError, getattr, sae.cfg, "hook_nam"))
        self.assertIn("x must be a torch.Tensor", self.one_line(TypeError, sae, "not a tensor"))

    def test_width_mismatch_is_a_usage_error(self):
        bad = vocablens.load_sae(os.path.join(self.fx, "bad_din"))
        with self.assertRaises(vocablens.UsageError) as cm:
            vocablens.feature_logits(self.m, bad, progress=False)
        self.assertNotIsInstance(cm.exception, vocablens.FormatError)
        self.assertIn("d_in 32 does not match", str(cm.exception))

    def test_hook_name_of_the_wrong_type(self):
        d = os.path.join(tempdir("tl-sae-hook"), "sae")
        shutil.copytree(os.path.join(self.fx, "saelens_standard"), d)
        with open(os.path.join(d, "cfg.json")) as f:
            cfg = json.load(f)
        cfg["hook_name"] = 5
        with open(os.path.join(d, "cfg.json"), "w") as f:
            json.dump(cfg, f)
        msg = self.one_line(vocablens.FormatError, vocablens.load_sae, d)
        self.assertIn("hook_name", msg)
        self.assertIn("cfg.json", msg)


class OneLineErrors(Base):
    def test_bindings(self):
        m = self.m
        self.assertIn("x must be a torch.Tensor", self.one_line(TypeError, m.final_norm, "text"))
        self.assertIn("x must be a torch.Tensor", self.one_line(TypeError, m.unembed, [1.0, 2.0]))
        self.assertIn("out of the 64-bit range", self.one_line(TypeError, m.tokenizer.token_bytes, 2 ** 63))
        self.assertIn("must be an int", self.one_line(TypeError, m.tokenizer.token_bytes, "a"))
        self.assertIn("dtype", self.one_line(TypeError, vocablens.set_dtype, 5))
        self.assertIn("top_k", self.one_line(ValueError, vocablens.lens, m, "Hi", top_k=2 ** 63))
        self.assertIn("prompt", self.one_line(ValueError, vocablens.lens, m, [1, 2 ** 64]))
        self.assertIn("n_layers", self.one_line(AttributeError, getattr, m.cfg, "nlayers"))
        self.one_line(IndexError, m.blocks.__getitem__, 3)

    def test_load_results_of_no_run(self):
        self.assertIn("/etc", self.one_line(vocablens.FormatError, vocablens.load_results, "/etc"))
        self.assertIn("no such", self.one_line(vocablens.FormatError, vocablens.load_results, "/nonexistent/run"))


class PatchWarning(Base):
    def check(self, path, clean, corrupt, target, wrong):
        """(the CLI warned, Python warned) for one patch; the two must agree, with the same difference."""
        _, _, err = cli("patch", path, "--clean", clean, "--corrupt", corrupt, "--target", target, "--wrong", wrong)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            r = vocablens.patch(vocablens.load_model(path), clean, corrupt, target=target, wrong=wrong, progress=False)
        diff = r.summary["clean_metric"] - r.summary["corrupt_metric"]
        ours = [w for w in seen if issubclass(w.category, vocablens._analyses.PatchWarning)]
        cli_warned = "warning: the clean and corrupt runs differ by only" in err
        self.assertEqual(cli_warned, abs(diff) < 0.25)
        self.assertEqual(len(ours), 1 if cli_warned else 0)
        if cli_warned:
            self.assertIn("differ by only {:.4f}".format(diff), str(ours[0].message))
            self.assertIn("{:.4f}".format(diff), err)
        return cli_warned

    def test_warns_where_the_cli_warns(self):
        # gpt2-tiny barely tells John from Mary (|diff| ~0.1): both warn; stories260K's IOI sentence moves the
        # answer by ~1.8: neither does
        self.assertTrue(self.check(GPT2, "When John and Mary went to the store, Mary gave a drink to",
                                   "When John and Mary went to the store, John gave a drink to", " John", " Mary"))
        self.assertFalse(self.check(STORIES, 'Lily said to Tim, "I love you." Tim said to',
                                    'Lily said to Tim, "I love you." Lily said to', " Lily", " Tim"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
