"""vocablens.graph against a float64 NumPy attribution graph written from circuit-tracer's definitions.

The reference recomputes everything from the fixture's weights with nothing of vocablens: the model's forward
(gpt2_numpy.py), the transcoders read from their safetensors files (tests/fixtures/graph/gpt2-tiny, skip
connections included), the frozen replacement model as explicit Jacobian matrices over the flattened residual
stream [T·d] (norms with frozen denominators as block-diagonal matrices, attention through OV only as
Σ_h kron(pattern_h, (W_V,h W_O,h)ᵀ)), then the nodes, the salient logits, the adjacency, node influence,
pruning and the replacement / completeness scores as circuit-tracer's graph.py defines them. Compared: the
node set, every adjacency entry (1e-6 of the largest), the pruned node and edge sets, the scores (1e-6).
"""
import json
import os
import struct
import unittest

import numpy as np

import gpt2_numpy
from support import SOURCE, cli, fixture, tempdir, vocablens

GPT2 = fixture("gpt2-tiny")
TRANSCODERS = os.path.join(SOURCE, "tests", "fixtures", "graph", "gpt2-tiny")
IDS = [50256, 464, 412, 733, 8765, 318, 287]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").reshape(info["shape"]).astype(np.float64)
    return out


def frozen_norm(s, w, d):
    """The frozen LayerNorm as a [T·d, T·d] matrix: position p maps x to w ⊙ (x − mean x) / s_p."""
    C = np.eye(d) - np.ones((d, d)) / d
    return np.kron(np.diag(1.0 / s), np.diag(w) @ C)


def reference_graph(max_n_logits=10, desired_logit_prob=0.95):
    m = gpt2_numpy.load(GPT2)
    w, L, H, d, eps = m["w"], m["n_layers"], m["n_heads"], m["d_model"], m["eps"]
    dh = d // H
    T = len(IDS)
    acts = gpt2_numpy.forward(m, IDS)
    tcs = [read_safetensors(os.path.join(TRANSCODERS, "layer_%d.safetensors" % l)) for l in range(L)]
    D = d_sae = tcs[0]["W_enc"].shape[0]

    def denom(x):
        return np.sqrt(((x - x.mean(-1, keepdims=True)) ** 2).mean(-1) + eps)

    # the linear maps of the frozen replacement model (row-major flattening, index t·d + i)
    A_map, LN2, B_map = [], [], []
    feats, errs = [], []
    for l in range(L):
        p, b = "h.%d." % l, "blocks.%d." % l
        LN1 = frozen_norm(denom(acts[b + "hook_resid_pre"]), w[p + "ln_1.weight"], d)
        LN2.append(frozen_norm(denom(acts[b + "hook_resid_mid"]), w[p + "ln_2.weight"], d))
        W_V = w[p + "attn.c_attn.weight"][:, 2 * d:].reshape(d, H, dh)
        W_O = w[p + "attn.c_proj.weight"].reshape(H, dh, d)
        pattern = acts[b + "attn.hook_pattern"]
        attn = sum(np.kron(pattern[h], (W_V[:, h, :] @ W_O[h]).T) for h in range(H))
        A_map.append(np.eye(T * d) + attn @ LN1)                                   # resid_pre -> resid_mid
        skip = np.kron(np.eye(T), tcs[l]["W_skip"])                                 # x @ W_skipᵀ per position
        B_map.append((np.eye(T * d) + skip @ LN2[l]) @ A_map[l])                    # resid_pre -> resid_post
        # the transcoder on the MLP's true input; position 0 (BOS) zeroed
        mlp_in = gpt2_numpy.layer_norm(acts[b + "hook_resid_mid"], w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        a = np.maximum(mlp_in @ tcs[l]["W_enc"].T + tcs[l]["b_enc"], 0)
        recon = a @ tcs[l]["W_dec"] + tcs[l]["b_dec"] + mlp_in @ tcs[l]["W_skip"].T
        e = acts[b + "hook_mlp_out"] - recon
        a[0] = 0
        e[0] = 0
        feats.append(a)
        errs.append(e)
    LNf = frozen_norm(denom(acts["blocks.%d.hook_resid_post" % (L - 1)]), w["ln_f.weight"], d)

    active = [(l, t, f) for l in range(L) for t, f in zip(*np.nonzero(feats[l]))]
    Fn = len(active)
    logit_ids, logit_p, u = salient_logits(acts["logits"][-1], w["wte.weight"].T, max_n_logits, desired_logit_prob)

    adj = assemble(active, feats, errs, tcs, LN2, A_map, B_map, LNf, u, w["wte.weight"][IDS])
    return dict(active=np.array(active), adj=adj, logit_ids=logit_ids, logit_p=logit_p, F=Fn, L=L, T=T)


def salient_logits(last, W_U, max_n_logits, desired_logit_prob):
    """circuit-tracer's logit targets: the fewest top next-token probabilities (of the model's output logits
    `last`) reaching desired_logit_prob, at most max_n_logits; their ids, probabilities and demeaned W_U columns."""
    probs = np.exp(last - last.max())
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")[:max_n_logits]
    cut = min(int(np.searchsorted(np.cumsum(probs[order]), desired_logit_prob)) + 1, len(order))
    ids = order[:cut]
    return ids, probs[ids], W_U[:, ids] - W_U.mean(1, keepdims=True)


def assemble(active, feats, errs, tcs, LN2, A_map, B_map, LNf, u, tok):
    """The adjacency [N, N] of the frozen replacement model from its linear maps over the flattened stream [T·d]:
    LN2[l] resid_mid -> what the transcoders read, A_map[l] resid_pre -> resid_mid, B_map[l] resid_pre ->
    resid_post with the MLP's sources frozen (its skip connection alone), LNf the final norm; u [d, K] the logits'
    demeaned unembedding columns, tok [T, d] the embedding nodes' vectors."""
    L, (T, d), Fn, K = len(feats), tok.shape, len(active), u.shape[1]
    N = Fn + L * T + T + K
    adj = np.zeros((N, N))

    def row(g, layer):
        """The row of a target whose gradient g [T·d] sits at resid_post of layer `layer` (-1: the embedding)."""
        r = np.zeros(N)
        for l in range(layer, -1, -1):
            G = g.reshape(T, d)
            for i, (fl, ft, ff) in enumerate(active):
                if fl == l:
                    r[i] = feats[l][ft, ff] * G[ft] @ tcs[l]["W_dec"][ff]
            r[Fn + l * T:Fn + (l + 1) * T] = (G * errs[l]).sum(1)
            g = g @ B_map[l]
        r[Fn + L * T:Fn + L * T + T] = (g.reshape(T, d) * tok).sum(1)
        return r

    for i, (l, t, f) in enumerate(active):
        e = np.zeros(T * d)
        e[t * d:(t + 1) * d] = tcs[l]["W_enc"][f]
        adj[i] = row((e @ LN2[l]) @ A_map[l], l - 1)
    for k in range(K):
        e = np.zeros(T * d)
        e[(T - 1) * d:] = u[:, k]
        adj[N - K + k] = row(e @ LNf, L - 1)
    return adj


# circuit-tracer's graph.py, from its definitions
def normalize(A):
    n = np.abs(A)
    return n / np.maximum(n.sum(1, keepdims=True), 1e-10)


def influence(A, w):
    cur = w @ A
    total = cur.copy()
    while cur.any():
        cur = cur @ A
        total += cur
    return total


def threshold(scores, frac):
    s = np.sort(scores.ravel())[::-1]
    cum = np.cumsum(s) / s.sum()
    return s[min(int(np.searchsorted(cum, frac)), len(s) - 1)]


def prune(g, node_threshold=0.8, edge_threshold=0.98):
    adj, F, T, K = g["adj"], g["F"], g["T"], len(g["logit_ids"])
    N = adj.shape[0]
    w = np.zeros(N)
    w[N - K:] = g["logit_p"]
    inf = influence(normalize(adj), w)
    node = inf >= threshold(inf, node_threshold)
    node[N - K - T:] = True
    pruned = adj.copy()
    pruned[~node] = 0
    pruned[:, ~node] = 0
    An = normalize(pruned)
    scores = An * (influence(An, w) + w)[:, None]
    edge = scores >= threshold(scores, edge_threshold)
    keep = N - K - T
    while True:
        old = node.copy()
        node[:keep] &= edge[:, :keep].any(0)
        node[:F] &= edge[:F].any(1)
        if (node == old).all():
            break
        edge[~node] = False
        edge[:, ~node] = False
    return node, edge, inf


def scores(g):
    adj, F, L, T, K = g["adj"], g["F"], g["L"], g["T"], len(g["logit_ids"])
    N = adj.shape[0]
    w = np.zeros(N)
    w[N - K:] = g["logit_p"]
    An = normalize(adj)
    inf = influence(An, w)
    tok, err = inf[F + L * T:F + L * T + T].sum(), inf[F:F + L * T].sum()
    out = inf + w
    return tok / (tok + err), ((1 - An[:, F:F + L * T].sum(1)) * out).sum() / out.sum()


class ReferenceChecks:
    """vocablens's graph (self.r: save_adjacency) against the NumPy reference (self.ref): the nodes, every adjacency
    entry, the pruned node and edge sets, the scores. Mixed into each test class with its own model."""

    def test_nodes(self):
        a = self.r.arrays
        self.assertGreater(self.ref["F"], 100)
        self.assertTrue(np.array_equal(a["active_features"], self.ref["active"]))
        self.assertTrue(np.array_equal(a["selected"], np.arange(self.ref["F"])))  # every active feature has its row
        self.assertEqual([l["id"] for l in self.r.summary["logits"]], list(self.ref["logit_ids"]))
        self.assertLess(np.abs(np.array([l["prob"] for l in self.r.summary["logits"]]) - self.ref["logit_p"]).max(), 1e-6)

    def test_adjacency(self):
        got, ref = self.r.arrays["full_adjacency"].astype(np.float64), self.ref["adj"]
        self.assertEqual(got.shape, ref.shape)
        scale = np.abs(ref).max()
        err = np.abs(got - ref).max()
        print("\n%s adjacency vs float64 NumPy: max |diff| %.3g = %.3g of the largest entry %.4g"
              % (type(self).__name__, err, err / scale, scale))
        self.assertLessEqual(err, 1e-6 * scale)

    def test_pruning_and_scores(self):
        node, edge, inf = prune(self.ref)
        kept = np.nonzero(node)[0]
        self.assertTrue(np.array_equal(self.r.arrays["nodes"], kept))
        self.assertLess(np.abs(self.r.arrays["node_influence"] - inf).max(), 1e-6 * np.abs(inf).max())
        got_edges = self.r.arrays["adjacency"] != 0
        self.assertTrue(np.array_equal(got_edges, edge[np.ix_(kept, kept)]))
        self.assertEqual(self.r.summary["kept_edges"], int(edge.sum()))
        rep, comp = scores(self.ref)
        self.assertLess(abs(self.r.summary["replacement_score"] - rep), 1e-6)
        self.assertLess(abs(self.r.summary["completeness_score"] - comp), 1e-6)
        # pruning removes something at these thresholds, so the comparison is not of two full sets
        self.assertLess(len(kept), self.r.arrays["full_adjacency"].shape[0])


class Graph(ReferenceChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ref = reference_graph()
        cls.model = vocablens.load_model(GPT2)
        cls.r = vocablens.graph(cls.model, IDS, transcoders=TRANSCODERS, save_adjacency=True, progress=False)

    def test_labels(self):
        """Each kept feature's label tokens: its decoder row's top and bottom logit weights through W_U (tied:
        wteᵀ) and its encoder row's top tokens through E⁺ = pinv(W_Uᵀ), in float64 from the files."""
        m = gpt2_numpy.load(GPT2)
        WU = m["w"]["wte.weight"].T
        E_pinv = np.linalg.pinv(WU.T)
        tcs = [read_safetensors(os.path.join(TRANSCODERS, "layer_%d.safetensors" % l)) for l in range(m["n_layers"])]
        a = self.r.arrays
        k = a["label_top_ids"].shape[1]
        self.assertEqual(k, 5)
        F, checked = len(a["selected"]), 0
        for i, n in enumerate(a["nodes"]):
            if n >= F:
                self.assertTrue((a["label_top_ids"][i] == -1).all())
                continue
            l, _, f = a["active_features"][a["selected"][n]]
            w = tcs[l]["W_dec"][f] @ WU
            order = np.lexsort((np.arange(len(w)), -w))  # value descending, token id ascending
            self.assertEqual(list(a["label_top_ids"][i]), list(order[:k]))
            low = np.lexsort((np.arange(len(w)), w))
            self.assertEqual(list(a["label_bottom_ids"][i]), list(low[:k]))
            e = tcs[l]["W_enc"][f] @ E_pinv
            self.assertEqual(list(a["label_encoder_ids"][i]), list(np.lexsort((np.arange(len(e)), -e))[:k]))
            checked += 1
        self.assertGreater(checked, 10)

    def test_neuronpedia_json(self):
        """The file circuit-tracer's create_graph_files writes: its node ids and feature_type strings."""
        np_graph = self.r.summary["neuronpedia"]
        self.assertEqual(np_graph["metadata"]["schema_version"], 1)
        self.assertEqual(set(np_graph["qParams"]), {"pinnedIds", "supernodes", "linkType", "clickedId", "sg_pos"})
        ids = {n["node_id"] for n in np_graph["nodes"]}
        self.assertEqual(len(ids), len(np_graph["nodes"]), "every node has its own node_id")
        L, T = self.ref["L"], self.ref["T"]
        for n in np_graph["nodes"]:
            ft = n["feature_type"]
            self.assertIn(ft, {"cross layer transcoder", "mlp reconstruction error", "embedding", "logit"})
            if ft == "cross layer transcoder":
                # circuit-tracer's feature_node: node_id {layer}_{feature}_{pos}, feature = cantor(layer, feature)
                layer, feat, pos = (int(v) for v in n["node_id"].split("_"))
                self.assertEqual((str(layer), pos), (n["layer"], n["ctx_idx"]))
                self.assertEqual(n["feature"], (layer + feat) * (layer + feat + 1) // 2 + feat)
                self.assertEqual(n["jsNodeId"], "%d_%d-0" % (layer, feat))
            elif ft == "mlp reconstruction error":
                self.assertEqual(n["node_id"], "%s_-1_%d" % (n["layer"], n["ctx_idx"]))
                self.assertEqual(n["jsNodeId"], "%s_-1-%d" % (n["layer"], n["ctx_idx"]))
            elif ft == "embedding":
                self.assertEqual(n["node_id"], "E_%d_%d" % (IDS[n["ctx_idx"]], n["ctx_idx"]))
            else:
                self.assertEqual(n["node_id"], "%d_%d_%d" % (L + 1, n["feature"], T - 1))
        for link in np_graph["links"]:
            self.assertIn(link["source"], ids)
            self.assertIn(link["target"], ids)
        self.assertEqual(len(np_graph["links"]), self.r.summary["kept_edges"])

    def test_cli_writes_the_same_graph(self):
        out = tempdir("graph-cli")
        prompt = "The Eiffel Tower is in"
        cli("graph", GPT2, "--transcoders", TRANSCODERS, "--prompt", prompt, "--out", out)
        with open(os.path.join(out, "graph.neuronpedia.json")) as f:
            written = json.load(f)
        r = vocablens.graph(self.model, prompt, transcoders=TRANSCODERS, progress=False)
        self.assertEqual(r.arrays["ids"][0], 50256)  # the model's BOS put first
        self.assertEqual(written["metadata"]["prompt"], prompt)
        self.assertEqual([n["node_id"] for n in written["nodes"]], [n["node_id"] for n in r.summary["neuronpedia"]["nodes"]])
        self.assertEqual(len(written["links"]), r.summary["kept_edges"])

    def test_http(self):
        """POST /api/graph: the declaration over HTTP, with the server's own transcoders; a path is refused."""
        import socket
        import subprocess
        import time
        import urllib.error
        import urllib.request
        from support import CLI
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = subprocess.Popen([CLI, "serve", GPT2, "--transcoders", TRANSCODERS, "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def post(body):
                req = urllib.request.Request("http://127.0.0.1:%d/api/graph" % port, json.dumps(body).encode(),
                                             {"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        return r.status, json.load(r)
                except urllib.error.HTTPError as e:
                    return e.code, json.load(e)
            for _ in range(100):
                try:
                    urllib.request.urlopen("http://127.0.0.1:%d/api/status" % port, timeout=5)
                    break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.1)
            status, answer = post({"prompt": IDS, "transcoders": True})
            self.assertEqual(status, 200)
            self.assertEqual(answer["kind"], "graph")
            self.assertEqual([n["node_id"] for n in answer["summary"]["neuronpedia"]["nodes"]],
                             [n["node_id"] for n in self.r.summary["neuronpedia"]["nodes"]])
            status, answer = post({"prompt": IDS, "transcoders": TRANSCODERS})
            self.assertEqual(status, 400)
            self.assertIn("does not open", answer["error"])
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    unittest.main()
