"""Model, tokenizer and run_with_cache from Python, checked against the fixtures' independent references
(NumPy float64 / llm.c for gpt2-tiny, llama2.c run.c / model.py for stories260K; see their READMEs)."""
import os
import unittest

import numpy as np
import torch

from support import SOURCE, fixture, vocablens

GPT2 = fixture("gpt2-tiny")
STORIES = fixture("stories260K/stories260K.bin")
ATOL = 1e-4  # fp32 tolerance stated in the fixtures' READMEs


def ref(model_dir, name):
    return torch.from_numpy(np.load(os.path.join(model_dir, "reference", name)))


class Gpt2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(GPT2)

    def test_config_and_tokenizer(self):
        c = self.m.config
        self.assertEqual((c["architecture"], c["n_layers"], c["d_model"], c["n_heads"], c["d_vocab"]),
                         ("GPT2LMHeadModel", 3, 64, 4, 50257))
        ids = self.m.tokenize("The Eiffel Tower is in the city of")
        self.assertEqual(ids, ref(GPT2, "seq1_eiffel_ids.npy").tolist())   # fixture README: GPT-2's own ids
        self.assertEqual(self.m.decode(ids), "The Eiffel Tower is in the city of")
        self.assertEqual(self.m.token_strings(ids[:2]), ["The", "␣E"])
        self.assertEqual(self.m.tokenizer.kind, "gpt2-bpe")

    def test_run_with_cache_matches_reference(self):
        ids = ref(GPT2, "seq1_eiffel_ids.npy")
        names = ["blocks.%d.hook_%s" % (l, h) for l in range(3) for h in ("resid_pre", "resid_mid", "resid_post")]
        names += ["blocks.1.attn.hook_pattern", "ln_final.hook_normalized", "resid_post.2"]
        logits, cache = self.m.run_with_cache(ids, names=names)
        self.assertEqual(tuple(logits.shape), (1, 10, 50257))
        self.assertLess((logits[0] - ref(GPT2, "seq1_eiffel_logits.npy")).abs().max().item(), ATOL)
        for h in ("resid_pre", "resid_mid", "resid_post"):
            r = ref(GPT2, "seq1_eiffel_%s.npy" % h)
            for l in range(3):
                got = cache["blocks.%d.hook_%s" % (l, h)]
                self.assertEqual(tuple(got.shape), (1, 10, 64))
                self.assertLess((got[0] - r[l]).abs().max().item(), ATOL, "%s %d" % (h, l))
        pat = ref(GPT2, "seq1_eiffel_attn_pattern.npy")
        self.assertLess((cache["blocks.1.attn.hook_pattern"][0] - pat[1]).abs().max().item(), ATOL)
        self.assertLess((cache["ln_final.hook_normalized"][0] - ref(GPT2, "seq1_eiffel_ln_f.npy")).abs().max().item(), ATOL)
        # our own names are accepted and give the same tensor
        self.assertTrue(torch.equal(cache["resid_post.2"], cache["blocks.2.hook_resid_post"]))
        self.assertEqual(set(cache), set(names))

    def test_run_with_cache_text_and_batch(self):
        # text is tokenised as TransformerLens does (BOS first); the reference ids have none
        logits, cache = self.m.run_with_cache("The Eiffel Tower is in the city of", names="blocks.0.hook_resid_post",
                                              prepend_bos=False)
        self.assertLess((logits[0] - ref(GPT2, "seq1_eiffel_logits.npy")).abs().max().item(), ATOL)
        with_bos, _ = self.m.run_with_cache("The Eiffel Tower is in the city of", names="blocks.0.hook_resid_post")
        self.assertEqual(tuple(with_bos.shape), (1, 11, 50257))
        batch = torch.stack([ref(GPT2, "seq1_eiffel_ids.npy"), ref(GPT2, "seq1_eiffel_ids.npy")])
        logits2, cache2 = self.m.run_with_cache(batch, names=["resid_pre.0"])
        self.assertEqual(tuple(logits2.shape), (2, 10, 50257))
        self.assertLess((logits2[0] - logits2[1]).abs().max().item(), 1e-5)
        _, every = self.m.run_with_cache([464, 412])
        self.assertIn("blocks.2.attn.hook_pattern", every)
        self.assertIn("ln_final.hook_normalized", every)

    def test_weights_share_memory(self):
        W_E = self.m.W_E
        self.assertEqual(tuple(W_E.shape), (50257, 64))
        self.assertEqual(W_E.dtype, torch.float32)
        # views of the loaded (memory-mapped) tensor, not copies: the same address every time
        self.assertEqual(W_E.data_ptr(), self.m.W_E.data_ptr())
        self.assertEqual(self.m.weights()["embed.W_E"].data_ptr(), W_E.data_ptr())
        self.assertEqual(self.m.W_U.data_ptr(), W_E.data_ptr())     # tied: W_U is W_E's transpose, no copy
        self.assertTrue(torch.equal(self.m.W_U, W_E.t()))
        w = self.m.weights()
        self.assertEqual(tuple(w["blocks.0.attn.W_Q"].shape), (4, 64, 16))
        self.assertEqual(tuple(self.m.W_O[2].shape), (4, 16, 64))       # stacked, TransformerLens's shapes
        self.assertEqual(tuple(self.m.W_O.shape), (3, 4, 16, 64))
        self.assertEqual(tuple(w["blocks.2.mlp.W_in"].shape), (64, 256))
        self.assertIsNone(self.m.W_gate)
        self.assertEqual(tuple(self.m.W_pos.shape), (128, 64))

    def test_final_norm_and_unembed(self):
        ids = ref(GPT2, "seq1_eiffel_ids.npy")
        logits, cache = self.m.run_with_cache(ids, names=["blocks.2.hook_resid_post"])
        x = self.m.unembed(self.m.final_norm(cache["blocks.2.hook_resid_post"]))
        self.assertLess((x - logits).abs().max().item(), 1e-5)


class Stories(unittest.TestCase):
    def test_llama2c_forward_matches_runc(self):
        m = vocablens.load_model(STORIES)
        ids = ref(os.path.dirname(STORIES), "ids_first32.npy")
        logits, cache = m.run_with_cache(ids.tolist(), names=["blocks.4.hook_resid_post", "ln_final.hook_normalized"])
        self.assertLess((logits[0] - ref(os.path.dirname(STORIES), "logits_first32.npy")).abs().max().item(), ATOL)
        self.assertLess((cache["blocks.4.hook_resid_post"][0] - ref(os.path.dirname(STORIES), "resid_post_first32.npy")[4])
                        .abs().max().item(), ATOL)
        self.assertEqual(m.config["family"], "llama")
        self.assertEqual(tuple(m.W_gate.shape), (5, 64, 172))
        self.assertEqual(m.tokenize("Once")[0], m.tokenizer.bos_id)   # llama2.c adds BOS, as run.c does
        self.assertNotEqual(m.tokenize("Once", bos=False)[0], m.tokenizer.bos_id)


class ComputeDtype(unittest.TestCase):
    """set_dtype / get_dtype: the CLI's --dtype from Python (process-wide)."""

    def tearDown(self):
        vocablens.set_dtype("float32")

    def test_bfloat16_changes_quantized_products_only(self):
        ids = ref(GPT2, "seq1_eiffel_ids.npy").tolist()
        q8 = vocablens.load_model(os.path.join(SOURCE, "tests", "data", "gguf", "gpt2-tiny-q8_0.gguf"))
        f32 = vocablens.load_model(GPT2)   # float32 safetensors: multiplied in float32 whatever the setting
        self.assertEqual(vocablens.get_dtype(), "float32")
        a, fa = q8(ids), f32(ids)
        vocablens.set_dtype("bfloat16")
        self.assertEqual(vocablens.get_dtype(), "bfloat16")
        b, fb = q8(ids), f32(ids)
        diff, scale = (a - b).abs().max().item(), a.abs().max().item()
        self.assertGreater(diff, 0.0)              # bf16 rounding did happen
        self.assertLess(diff, 5e-2 * scale)        # ~1e-2 relative, as documented (docs/runner.md)
        self.assertTrue(torch.equal(fa, fb))
        vocablens.set_dtype("float32")
        self.assertTrue(torch.equal(q8(ids), a))   # back to the exact products, bit for bit

    def test_bad_dtype_is_a_usage_error(self):
        with self.assertRaises(vocablens.UsageError) as e:
            vocablens.set_dtype("float64")
        self.assertIn("float32, bfloat16 or int8", str(e.exception))
        self.assertEqual(vocablens.get_dtype(), "float32")

    def test_int8_is_llama_cpp_numerics_and_results_say_so(self):
        """set_compute('int8'): quantized products in llama.cpp's int8 arithmetic; float weights stay exact."""
        ids = ref(GPT2, "seq1_eiffel_ids.npy").tolist()
        q8 = vocablens.load_model(os.path.join(SOURCE, "tests", "data", "gguf", "gpt2-tiny-q8_0.gguf"))
        f32 = vocablens.load_model(GPT2)
        a, fa = q8(ids), f32(ids)
        vocablens.set_compute("int8")
        self.assertEqual(vocablens.get_compute(), "int8")
        self.assertEqual(vocablens.get_dtype(), "int8")   # the older name reads the same setting
        b, fb = q8(ids), f32(ids)
        diff = (a - b).abs().max().item()
        self.assertGreater(diff, 0.0)                      # activations were quantized
        self.assertLess(diff, 0.2)                         # docs/runner.md: 0.055 on this model
        self.assertTrue(torch.equal(fa, fb))
        self.assertEqual(vocablens.lens(q8, "The cat sat").provenance["compute"], "int8")
        vocablens.set_compute("float32")
        self.assertTrue(torch.equal(q8(ids), a))


if __name__ == "__main__":
    unittest.main(verbosity=2)
