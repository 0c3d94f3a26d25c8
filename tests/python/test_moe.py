"""Mixtures of experts from Python: the router's hook points in run_with_cache and run_with_hooks, on the Mixtral
and Qwen2-MoE fixtures (tests/fixtures/families/, random weights in the real HF layout). The experts chosen are
compared with llama.cpp's own choice (llama_router.order.i32, its graph's ffn_moe_argsort captured by
tests/llama_ref/lcpp_logits.cpp), not with our C++ output."""
import os
import unittest

import numpy as np
import torch

from support import SOURCE, vocablens

FAMILIES = os.path.join(SOURCE, "tests", "fixtures", "families")


def ids_of(family):
    with open(os.path.join(FAMILIES, family, "ids.txt")) as f:
        return [int(x) for x in f.read().split()]


def llama_order(family, layers, T, E):
    path = os.path.join(FAMILIES, family, "llama_router.order.i32")
    return np.fromfile(path, dtype="<i4").reshape(layers, T, E)


class Moe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = vocablens.load_model(os.path.join(FAMILIES, "mixtral"))
        cls.ids = ids_of("mixtral")

    def test_cache_names_and_llama_cpp_choice(self):
        names = self.m.hook_names()
        self.assertIn("blocks.1.mlp.hook_router_logits", names)
        self.assertIn("blocks.0.mlp.hook_expert_indices", names)
        self.assertNotIn("blocks.0.mlp.hook_post", names)  # no dense MLP: the experts are the MLP
        _, cache = self.m.run_with_cache(self.ids)
        order = llama_order("mixtral", 2, len(self.ids), 8)
        for layer in range(2):
            idx = cache[f"blocks.{layer}.mlp.hook_expert_indices"]
            self.assertEqual(idx.dtype, torch.int64)
            self.assertEqual(tuple(idx.shape), (1, len(self.ids), 2))
            self.assertTrue(np.array_equal(idx[0].numpy(), order[layer, :, :2]))
            w = cache[f"blocks.{layer}.mlp.hook_expert_weights"][0]
            self.assertTrue(torch.allclose(w.sum(-1), torch.ones(len(self.ids)), atol=1e-6))  # Mixtral renormalises
            self.assertEqual(tuple(cache[f"blocks.{layer}.mlp.hook_router_logits"].shape), (1, len(self.ids), 8))

    def test_weights_by_expert(self):
        w = self.m.weights()
        self.assertEqual(tuple(w["blocks.0.mlp.W_router"].shape), (64, 8))
        self.assertEqual(tuple(w["blocks.1.mlp.experts.7.W_in"].shape), (64, 32))
        self.assertEqual(tuple(w["blocks.1.mlp.experts.7.W_out"].shape), (32, 64))
        self.assertNotIn("blocks.0.mlp.W_in", w)

    def test_router_edit_reroutes(self):
        def prefer_6(logits, hook):
            logits[..., 6] += 50.0

        base = self.m.run_with_hooks(self.ids)
        logits, cache = self.m.run_with_cache(self.ids, fwd_hooks=[("blocks.1.mlp.hook_router_logits", prefer_6)])
        self.assertTrue(bool((cache["blocks.1.mlp.hook_expert_indices"][0, :, 0] == 6).all()))
        self.assertGreater(float((logits - base).abs().max()), 1e-3)

    def test_index_out_of_range_is_a_usage_error(self):
        def bad(idx, hook):
            idx[..., 0] = 8

        with self.assertRaises(vocablens.UsageError) as cm:
            self.m.run_with_hooks(self.ids, fwd_hooks=[("blocks.0.mlp.hook_expert_indices", bad)])
        self.assertIn("blocks.0.mlp.hook_expert_indices: expert index 8 is out of range [0, 8)", str(cm.exception))

    def test_shared_expert_neurons(self):
        q2 = vocablens.load_model(os.path.join(FAMILIES, "qwen2moe"))
        _, cache = q2.run_with_cache(ids_of("qwen2moe"), names_filter=["blocks.0.mlp.hook_post", "blocks.0.mlp.hook_expert_weights"])
        self.assertEqual(tuple(cache["blocks.0.mlp.hook_post"].shape), (1, 12, 64))  # the shared expert's width
        w = cache["blocks.0.mlp.hook_expert_weights"][0]
        self.assertTrue(bool((w.sum(-1) < 1).all()))  # Qwen2-MoE keeps the softmax's top-k as they are


if __name__ == "__main__":
    unittest.main()
