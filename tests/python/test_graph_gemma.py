"""vocablens.graph on Gemma-2 blocks against a float64 NumPy attribution graph written from circuit-tracer's definitions.

The model is the families' gemma2 fixture (norms after attention and after the MLP, attention and final soft-caps, a
sliding window, embeddings × sqrt(d_model)); its forward is gemma2_numpy.py, checked here against llama.cpp's logits
of the fixture. The transcoders are random per-layer JumpReLU ones written here as Gemma Scope's are read
(`ln2.hook_normalized` -> `hook_mlp_out`, after the post-MLP norm). The frozen replacement model is explicit
Jacobian matrices over the flattened stream [T·d] as in test_graph.py, with the post-attention norm frozen at its
forward denominator (so linear) between the attention's OV path and the stream; the MLP with its post-norm is what
the transcoder and the error replace. The logits' probabilities are the soft-capped ones, their vectors the demeaned
W_U columns (circuit-tracer's). Compared (test_graph.ReferenceChecks): the node set, every adjacency entry (1e-6 of
the largest), the pruned node and edge sets, the scores (1e-6); and Graph.intervene's direct effects against the edges.
"""
import json
import os
import struct
import unittest

import numpy as np
import torch

import gemma2_numpy
from support import SOURCE, tempdir, vocablens
from test_graph import ReferenceChecks, assemble, salient_logits

GEMMA2 = os.path.join(SOURCE, "tests", "fixtures", "families", "gemma2")
IDS = [319, 17, 200, 45, 88, 131, 9, 31, 256, 77]  # BOS first; longer than the sliding window (4)
N_FEATURES = 48


def write_safetensors(path, tensors):
    header, data = {}, b""
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def write_transcoders(folder, L, d):
    """Random JumpReLU transcoders (float32 values, returned as float64): pre-activations of order 1 on the
    unit-RMS normalised input, about a third past their thresholds."""
    rng = np.random.default_rng(20261130)
    tcs = []
    for l in range(L):
        t = {"W_enc": rng.normal(0, 1 / np.sqrt(d), (N_FEATURES, d)), "b_enc": rng.uniform(-0.6, 0, N_FEATURES),
             "W_dec": rng.normal(0, 0.2, (N_FEATURES, d)), "b_dec": rng.normal(0, 0.05, d),
             "activation_function.threshold": rng.uniform(0.05, 0.3, N_FEATURES)}
        t = {k: v.astype(np.float32) for k, v in t.items()}
        write_safetensors(os.path.join(folder, "layer_%d.safetensors" % l), t)
        tcs.append({k: v.astype(np.float64) for k, v in t.items()})
    with open(os.path.join(folder, "config.yaml"), "w") as f:
        f.write("model_kind: transcoder_set\nfeature_input_hook: ln2.hook_normalized\nfeature_output_hook: hook_mlp_out\n")
    return tcs


def frozen_rms(s, g):
    """A frozen RMSNorm as a [T·d, T·d] matrix: position p maps x to g ⊙ x / s_p."""
    return np.kron(np.diag(1.0 / s.ravel()), np.diag(g))


def reference_graph(m, tcs, max_n_logits=10, desired_logit_prob=0.95):
    w, L, H, Hkv, dh, d, eps = m["w"], m["n_layers"], m["n_heads"], m["n_kv"], m["d_head"], m["d_model"], m["eps"]
    T = len(IDS)
    acts = gemma2_numpy.forward(m, IDS)
    rms = lambda x: gemma2_numpy.rms(x, eps)  # noqa: E731
    A_map, LN2, feats, errs = [], [], [], []
    for l in range(L):
        p, b = "model.layers.%d." % l, "blocks.%d." % l
        LN1 = frozen_rms(rms(acts[b + "hook_resid_pre"]), 1 + w[p + "input_layernorm.weight"])
        POST = frozen_rms(rms(acts[b + "attn.hook_out_pre_norm"]), 1 + w[p + "post_attention_layernorm.weight"])
        LN2.append(frozen_rms(rms(acts[b + "hook_resid_mid"]), np.ones(d)))  # ln2.hook_normalized: no weight
        W_V = w[p + "self_attn.v_proj.weight"]
        W_O = w[p + "self_attn.o_proj.weight"]
        ov = [W_V[(h // (H // Hkv)) * dh:(h // (H // Hkv) + 1) * dh].T @ W_O[:, h * dh:(h + 1) * dh].T for h in range(H)]
        attn = sum(np.kron(acts[b + "attn.hook_pattern"][h], ov[h].T) for h in range(H))
        A_map.append(np.eye(T * d) + POST @ attn @ LN1)                    # resid_pre -> resid_mid
        x = acts[b + "hook_resid_mid"] / rms(acts[b + "hook_resid_mid"])
        pre = x @ tcs[l]["W_enc"].T + tcs[l]["b_enc"]
        a = np.maximum(pre, 0) * (pre > tcs[l]["activation_function.threshold"])
        e = acts[b + "hook_mlp_out"] - (a @ tcs[l]["W_dec"] + tcs[l]["b_dec"])
        a[0] = 0
        e[0] = 0
        feats.append(a)
        errs.append(e)
    LNf = frozen_rms(rms(acts["blocks.%d.hook_resid_post" % (L - 1)]), 1 + w["model.norm.weight"])

    active = [(l, t, f) for l in range(L) for t, f in zip(*np.nonzero(feats[l]))]
    Fn = len(active)
    # the probabilities of the soft-capped logits, the vectors of the pre-cap ones (W_U)
    logit_ids, logit_p, u = salient_logits(acts["logits"][-1], w["model.embed_tokens.weight"].T, max_n_logits,
                                           desired_logit_prob)
    tok = w["model.embed_tokens.weight"][IDS] * np.sqrt(d)

    # no skip connection: past its sources, the MLP adds nothing to the path (B_map = A_map)
    adj = assemble(active, feats, errs, tcs, LN2, A_map, A_map, LNf, u, tok)
    return dict(active=np.array(active), adj=adj, logit_ids=logit_ids, logit_p=logit_p, F=Fn, L=L, T=T)


class GemmaGraph(ReferenceChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = gemma2_numpy.load(GEMMA2)
        cls.folder = folder = tempdir("graph-gemma2")
        cls.tcs = write_transcoders(folder, cls.m["n_layers"], cls.m["d_model"])
        cls.ref = reference_graph(cls.m, cls.tcs)
        model = vocablens.load_model(GEMMA2)
        cls.r = vocablens.graph(model, IDS, transcoders=folder, save_adjacency=True, progress=False)

    def test_reference_forward_is_llama_cpps(self):
        """The NumPy forward the reference stands on gives llama.cpp's logits of the fixture (its gguf is float16:
        the families' tolerance), and the soft-caps and the window bite (without them it is far off)."""
        with open(os.path.join(GEMMA2, "ids.txt")) as f:
            ids = [int(t) for t in f.read().split()]
        ref = np.fromfile(os.path.join(GEMMA2, "llama_logits.f32"), dtype="<f4").reshape(len(ids), -1)
        self.assertLess(np.abs(gemma2_numpy.forward(self.m, ids)["logits"] - ref).max(), 5e-3)
        for key in ("sliding_window", "attn_logit_softcapping", "final_logit_softcapping"):
            m = dict(self.m, cfg=dict(self.m["cfg"], **{key: None}))
            self.assertGreater(np.abs(gemma2_numpy.forward(m, ids)["logits"] - ref).max(), 0.05, key)

    def test_direct_effects_are_the_edges(self):
        """vocablens.Graph.intervene(direct_effects=True) on Gemma-2 blocks: with the post-attention norm frozen
        too, a change δ of activation a moves each logit target's demeaned pre-cap logit by δ / a × its edge (the
        model's output is soft-capped: c · atanh(logit / c) undoes it). Without freezing that norm it does not."""
        from unittest import mock
        model = vocablens.load_model(GEMMA2)
        g = vocablens.attribution_graph(model, IDS, self.folder)
        cap = self.m["cfg"]["final_logit_softcapping"]

        def demeaned(logits):
            x = cap * torch.atanh(logits[0, -1].double() / cap)
            return x - x.mean()

        clean = demeaned(model(g.ids[None]))
        K, F = g.n_logits, g.n_features
        largest = float(g.rows.abs().max())
        row = g.rows[F, :F]

        def worst():
            w = 0.0
            for f in row.abs().argsort(descending=True)[:3].tolist():
                a = float(g.feature_activations[f])
                got = demeaned(g.intervene(f, 1.5 * a, direct_effects=True)) - clean
                w = max(w, float((got[g.logit_ids] - 0.5 * g.rows[F:F + K, f].double()).abs().max()) / largest)
            return w

        err = worst()
        print("\ngemma2 direct effects: max |Δ demeaned logit − δ/a × edge| / largest edge = %.1e" % err)
        self.assertLess(err, 1e-5)
        with mock.patch.object(type(g), "_post_attn_norm", lambda self: False):
            g._s.pop("clean", None)
            self.assertGreater(worst(), 1e-3)


if __name__ == "__main__":
    unittest.main()
