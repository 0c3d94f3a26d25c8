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


def llama_gguf_py():
    """llama.cpp's gguf-py (scripts/setup_llama_ref.sh): its numpy dequantizer is the reference; missing is a failure."""
    ref = os.environ.get("VOCABLENS_LLAMA_REF") or os.path.expanduser("~/.cache/vocablens/llama-cpp-3.22.1")
    path = os.path.join(ref, "llama.cpp", "gguf-py")
    if not os.path.isdir(path):
        raise AssertionError(f"llama.cpp's gguf-py expected at {path} (run scripts/setup_llama_ref.sh)")
    import sys
    if path not in sys.path:
        sys.path.insert(0, path)
    import gguf
    return gguf


class QuantizedExperts(unittest.TestCase):
    def test_each_expert_view_is_its_slice_of_the_3d_tensor(self):
        # mixtral-q8_0.gguf: llama.cpp's quantizer (tests/llama_ref/lcpp_quantize.cpp) on the F32 twin. Each expert is
        # a packed view of its rows of ffn_*_exps; dequantized (vocablens's decoder) it must equal gguf-py's
        # dequantization of the same slice of the 3-D tensor.
        gguf = llama_gguf_py()
        path = os.path.join(FAMILIES, "mixtral", "mixtral-q8_0.gguf")
        r = gguf.GGUFReader(path)
        w = vocablens.load_model(path).weights()
        names = {"ffn_gate_exps": "W_gate", "ffn_up_exps": "W_in", "ffn_down_exps": "W_out"}
        seen = 0
        for t in r.tensors:
            kind = t.name.split(".")[2] if t.name.startswith("blk.") else ""
            if kind not in names:
                continue
            self.assertEqual(t.tensor_type.name, "Q8_0")
            deq = gguf.quants.dequantize(t.data, t.tensor_type)   # [E, out, in]
            layer = int(t.name.split(".")[1])
            for e in range(deq.shape[0]):
                ours = w[f"blocks.{layer}.mlp.experts.{e}.{names[kind]}"].numpy()   # [in, out]
                self.assertTrue(np.array_equal(ours, deq[e].T), f"{t.name} expert {e}")
                seen += 1
        self.assertEqual(seen, 2 * 3 * 8)


if __name__ == "__main__":
    unittest.main()
