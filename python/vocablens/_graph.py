"""Attribution graphs as Python objects (docs/graph.md, "From Python: the Graph object").

    g = vocablens.attribution_graph(model, "The Eiffel Tower is in", "tests/fixtures/graph/gpt2-tiny")
    g.nodes                     # pandas DataFrame, one row per node (Neuronpedia's fields)
    g.rows, g.row_nodes         # [F + K, S] float32 and the node of each row: every edge that can be nonzero
    g.adjacency                 # torch sparse COO [N, N], row = target, column = source
    p = g.prune(0.8, 0.98)      # a new Graph: circuit-tracer's pruning, the CLI's kept nodes and edges
    p.to_neuronpedia("graph.neuronpedia.json")
    logits = g.intervene("1_17_5", 0.0)   # the real model with that feature's activation set to 0

The graph itself is the declared `graph` analysis's (the C++ engine, the options of `vocablens graph`); this
module only holds it, prunes it (float64, circuit-tracer's definitions) and intervenes with hooks on the model.
"""
import json
import math
import numbers
import os
import tempfile

import torch

from . import _vocablens as _core
from ._analyses import derived
from ._model import Model

_FEATURE, _ERROR, _EMBEDDING, _LOGIT = ("cross layer transcoder", "mlp reconstruction error", "embedding", "logit")
# output-only flags of the declaration: the Graph always holds the rows and never needs [N, N]
_NOT_OPTIONS = ("save_rows", "save_adjacency")


def _influence(rows_norm, row_nodes, n_nodes, n_sources, weights):
    """circuit-tracer's compute_influence on the [F + K, S] rows: w A + w A² + ... with A the (normalised) [N, N]
    adjacency that is zero outside those rows and columns. The graph is acyclic, so the terms vanish after at most
    its depth; the loop stops there (and, against a cycle, after N terms)."""
    total = torch.zeros(n_nodes, dtype=torch.float64)
    cur = weights
    for _ in range(n_nodes + 1):
        step = torch.zeros(n_nodes, dtype=torch.float64)
        step[:n_sources] = cur[row_nodes] @ rows_norm
        if not bool(step.any()):
            break
        total += step
        cur = step
    return total


def _normalise(m):
    a = m.abs()
    return a / a.sum(dim=1, keepdim=True).clamp(min=1e-10)


def _cut(scores, threshold):
    """circuit-tracer's find_threshold: the score at which the descending cumulative share reaches `threshold`.
    `scores` holds the nonzero scores only; the zeros of the full matrix sort after them and change no cut above
    0 (a cut past the last nonzero score is 0)."""
    if scores.numel() == 0:
        return 0.0
    s = torch.sort(scores, descending=True).values
    cum = torch.cumsum(s, 0) / s.sum()
    i = int(torch.searchsorted(cum, torch.tensor([float(threshold)], dtype=cum.dtype))[0])
    return float(s[i]) if i < s.numel() else 0.0


class Graph:
    """An attribution graph (docs/graph.md). Nodes in circuit-tracer's order: F features (the selected active
    features), L·T errors (layer-major), T embeddings, K logits; N = F + (L + 1)·T + K, S = F + (L + 1)·T sources.

    Fields (torch tensors): ids [T] int64 (the prompt, BOS first); features [F, 3] int64 (layer, position,
    feature) and feature_activations [F] float32; active_features [A, 3], activations [A] (every active feature,
    with or without a row); logit_ids [K] int64 and logit_probs [K] float64 (most probable first); rows [F + K, S]
    float32 (row r: the target row_nodes[r]; column s: the source node s) — the adjacency's only nonzero block;
    node_influence [N] float64 and cumulative [N] float64 (the share of total influence of the nodes at least as
    influential, Neuronpedia's `influence`); node_mask [N] bool and edge_mask [F + K, S] bool (what a pruning kept;
    all nonzero entries before pruning). node_threshold / edge_threshold are None before pruning.
    """

    def __init__(self, state, node_mask=None, edge_mask=None, thresholds=(None, None)):
        self._s = state
        for k in ("ids", "features", "feature_activations", "active_features", "activations", "logit_ids",
                  "logit_probs", "rows", "row_nodes", "node_influence", "cumulative"):
            setattr(self, k, state[k])
        self.n_layers, self.n_pos = state["n_layers"], state["n_pos"]
        self.n_nodes, self.n_sources = state["n_nodes"], state["n_sources"]
        self.node_mask = node_mask if node_mask is not None else torch.ones(self.n_nodes, dtype=torch.bool)
        self.edge_mask = edge_mask if edge_mask is not None else self.rows != 0
        self.node_threshold, self.edge_threshold = thresholds
        self.result = state["result"]  # the declared graph analysis's Result (scores, labels of its pruning)

    # ---- structure --------------------------------------------------------------------------------------------
    @property
    def n_features(self):
        return int(self.features.shape[0])

    @property
    def n_logits(self):
        return int(self.logit_ids.shape[0])

    def _kind(self, n):
        F, L, T = self.n_features, self.n_layers, self.n_pos
        if n < F:
            return _FEATURE
        if n < F + L * T:
            return _ERROR
        if n < F + (L + 1) * T:
            return _EMBEDDING
        return _LOGIT

    def node_id(self, n):
        """Neuronpedia's node_id of node index n (circuit-tracer's spelling)."""
        F, L, T = self.n_features, self.n_layers, self.n_pos
        kind = self._kind(n)
        if kind == _FEATURE:
            layer, pos, feat = (int(v) for v in self.features[n])
            return "{}_{}_{}".format(layer, feat, pos)
        if kind == _ERROR:
            return "{}_-1_{}".format((n - F) // T, (n - F) % T)
        if kind == _EMBEDDING:
            pos = n - F - L * T
            return "E_{}_{}".format(int(self.ids[pos]), pos)
        return "{}_{}_{}".format(L + 1, int(self.logit_ids[n - self.n_sources]), T - 1)

    @property
    def adjacency(self):
        """The kept edges as a coalesced torch sparse COO tensor [N, N] float32: row = target, column = source."""
        r, c = self.edge_mask.nonzero(as_tuple=True)
        idx = torch.stack([self.row_nodes[r], c])
        return torch.sparse_coo_tensor(idx, self.rows[r, c], (self.n_nodes, self.n_nodes)).coalesce()

    def _labels(self, nodes):
        """clerp of each node index in `nodes` (features through the library's labels, once per feature)."""
        cache = self._s["labels"]
        want = [n for n in nodes if self._kind(n) == _FEATURE and n not in cache]
        if want:
            fs = self.features[want]
            got = self._s["tcs"].feature_labels(fs[:, 0].tolist(), fs[:, 2].tolist(), self._s["label_tokens"])
            cache.update(zip(want, got))
        toks, out = self._s["prompt_tokens"], []
        for n in nodes:
            kind = self._kind(n)
            if kind == _FEATURE:
                out.append(cache[n])
            elif kind == _ERROR:
                out.append("error at " + toks[(n - self.n_features) % self.n_pos])
            elif kind == _EMBEDDING:
                out.append(toks[n - self.n_features - self.n_layers * self.n_pos])
            else:
                k = n - self.n_sources
                out.append('Output "{}" (p={:.3f})'.format(self._s["logit_tokens"][k], float(self.logit_probs[k])))
        return out

    @property
    def nodes(self):
        """pandas DataFrame of the kept nodes (all N before pruning), in node order: node (index), node_id,
        feature_type, layer (logits: L + 1, as Neuronpedia; embeddings: <NA>), ctx_idx, feature (the transcoder's
        feature index; Neuronpedia's JSON adds 10^k · layer), token_id, activation (features), influence (the
        cumulative share, Neuronpedia's), node_influence, clerp (labels: each feature's top tokens through W_U,
        computed on first use), is_target_logit, token_prob."""
        import pandas as pd
        kept = self.node_mask.nonzero().flatten().tolist()
        F, L, T = self.n_features, self.n_layers, self.n_pos
        rows = []
        for n, clerp in zip(kept, self._labels(kept)):
            kind = self._kind(n)
            layer = ctx = feat = act = None
            tok, prob, target = None, 0.0, False
            if kind == _FEATURE:
                layer, ctx, feat = (int(v) for v in self.features[n])
                act, tok = float(self.feature_activations[n]), int(self.ids[ctx])
            elif kind == _ERROR:
                layer, ctx = (n - F) // T, (n - F) % T
                tok = int(self.ids[ctx])
            elif kind == _EMBEDDING:
                ctx = n - F - L * T
                tok = int(self.ids[ctx])
            else:
                k = n - self.n_sources
                layer, ctx, tok = L + 1, T - 1, int(self.logit_ids[k])
                prob, target = float(self.logit_probs[k]), k == 0
            rows.append({"node": n, "node_id": self.node_id(n), "feature_type": kind, "layer": layer, "ctx_idx": ctx,
                         "feature": feat, "token_id": tok, "activation": act,
                         "influence": float(self.cumulative[n]), "node_influence": float(self.node_influence[n]),
                         "clerp": clerp, "is_target_logit": target, "token_prob": prob})
        df = pd.DataFrame(rows, columns=["node", "node_id", "feature_type", "layer", "ctx_idx", "feature", "token_id",
                                         "activation", "influence", "node_influence", "clerp", "is_target_logit",
                                         "token_prob"])
        for c in ("layer", "ctx_idx", "feature", "token_id"):
            df[c] = df[c].astype("Int64")
        return df

    def node_index(self, node):
        """The node index of `node`: an index (int), Neuronpedia's node_id (str), or (layer, position, feature) of
        a selected feature. ValueError when the graph has no such node (or the id names two: a feature of layer 0
        and an error share circuit-tracer's spelling), TypeError for other types."""
        if isinstance(node, bool) or not isinstance(node, (numbers.Integral, str, tuple)):
            raise TypeError("Graph: a node is an int index, a node_id str or a (layer, position, feature) tuple, "
                            "not " + type(node).__name__)
        if isinstance(node, numbers.Integral):
            if not 0 <= int(node) < self.n_nodes:
                raise ValueError("Graph: no node {} (the graph has {} nodes)".format(int(node), self.n_nodes))
            return int(node)
        if isinstance(node, tuple):
            if len(node) != 3 or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in node):
                raise TypeError("Graph: a feature is (layer, position, feature), three ints; got {!r}".format(node))
            hit = ((self.features == torch.tensor([int(v) for v in node])).all(1)).nonzero().flatten()
            if hit.numel() == 0:
                raise ValueError("Graph: no feature node (layer, position, feature) = {} in this graph".format(tuple(node)))
            return int(hit[0])
        ids = self._s.get("id_index")
        if ids is None:
            ids = {}
            for n in range(self.n_nodes):
                ids.setdefault(self.node_id(n), []).append(n)
            self._s["id_index"] = ids
        hits = ids.get(node, [])
        if not hits:
            raise ValueError("Graph: no node with node_id '{}'".format(node))
        return hits[0]  # circuit-tracer's ids are unique: an error's has -1 where a feature's has its index

    # ---- pruning ----------------------------------------------------------------------------------------------
    def prune(self, node_threshold=0.8, edge_threshold=0.98):
        """A new Graph with circuit-tracer's pruning of this graph's full adjacency (the CLI's definitions,
        docs/graph.md "Pruning", computed here in float64): nodes kept down to the influence whose cumulative
        share reaches node_threshold (embeddings and logits always), edges scored on the node-pruned matrix and
        kept to edge_threshold, then features and errors without a kept outgoing edge and features without a
        kept incoming one dropped until nothing changes. Node ids and indices stay those of the full graph."""
        for name, v in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError("Graph.prune(): {} must be a number, not {}".format(name, type(v).__name__))
            if not (math.isfinite(v) and 0 <= v <= 1):
                raise ValueError("Graph.prune(): {} must be in [0, 1], not {}".format(name, v))
        N, S, F, K = self.n_nodes, self.n_sources, self.n_features, self.n_logits
        n_keep_always = K + self.n_pos  # embeddings and logits, the last nodes
        rows = self.rows.to(torch.float64)
        w = torch.zeros(N, dtype=torch.float64)
        w[S:] = self.logit_probs
        node_mask = self.node_influence >= _cut(self.node_influence[self.node_influence != 0], node_threshold)
        node_mask[N - n_keep_always:] = True
        pruned = rows * node_mask[self.row_nodes][:, None] * node_mask[:S][None, :]
        norm = _normalise(pruned)
        infl = _influence(norm, self.row_nodes, N, S, w) + w
        scores = norm * infl[self.row_nodes][:, None]
        cut = _cut(scores[scores != 0], edge_threshold)
        edge_mask = scores >= cut
        first = N - n_keep_always  # features and errors: [0, first)

        def drop(node_mask, edge_mask):
            out = edge_mask.any(0)                       # source columns with a kept outgoing edge
            node_mask[:first] &= out[:first]
            node_mask[:F] &= edge_mask[:F].any(1)        # features with a kept incoming edge
            return node_mask

        old = node_mask.clone()
        node_mask = drop(node_mask, edge_mask)
        while not torch.equal(node_mask, old):
            old = node_mask.clone()
            edge_mask &= node_mask[self.row_nodes][:, None]
            edge_mask &= node_mask[:S][None, :]
            node_mask = drop(node_mask, edge_mask)
        return Graph(self._s, node_mask, edge_mask, (float(node_threshold), float(edge_threshold)))

    # ---- Neuronpedia ------------------------------------------------------------------------------------------
    def to_neuronpedia(self, path):
        """Writes Neuronpedia's graph JSON of this pruned graph to `path` (the JSON `vocablens graph --out RUN`
        writes as RUN/graph.neuronpedia.json for the same thresholds), atomically: nothing is left at `path` if
        it fails. Returns the JSON as a dict."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError("Graph.to_neuronpedia(): path must be a str or os.PathLike, not " + type(path).__name__)
        if self.node_threshold is None:
            raise ValueError("Graph.to_neuronpedia(): Neuronpedia's graphs are pruned; write "
                             "graph.prune(node_threshold, edge_threshold).to_neuronpedia(path)")
        path = os.fspath(path)
        doc = self._neuronpedia()
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise ValueError("Graph.to_neuronpedia(): no directory {}".format(d))
        fd, tmp = tempfile.mkstemp(prefix=".graph-", suffix=".json.tmp", dir=d)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2, sort_keys=True, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return doc

    def _neuronpedia(self):
        kept = self.node_mask.nonzero().flatten().tolist()
        L, T = self.n_layers, self.n_pos
        nodes, ids = [], []
        for n, clerp in zip(kept, self._labels(kept)):
            kind = self._kind(n)
            j = {"node_id": self.node_id(n), "feature_type": kind, "influence": float(self.cumulative[n]),
                 "activation": None, "token_prob": 0.0, "is_target_logit": False, "run_idx": 0, "reverse_ctx_idx": 0,
                 "clerp": clerp}
            if kind == _FEATURE:
                layer, pos, feat = (int(v) for v in self.features[n])
                j.update(feature=(layer + feat) * (layer + feat + 1) // 2 + feat, layer=str(layer), ctx_idx=pos,
                         jsNodeId="{}_{}-0".format(layer, feat), activation=float(self.feature_activations[n]))
            elif kind == _ERROR:
                layer, pos = (n - self.n_features) // T, (n - self.n_features) % T
                j.update(feature=-1, layer=str(layer), ctx_idx=pos, jsNodeId="{}_-1-{}".format(layer, pos))
            elif kind == _EMBEDDING:
                pos = n - self.n_features - L * T
                j.update(feature=pos, layer="E", ctx_idx=pos, jsNodeId="E_{}-{}".format(int(self.ids[pos]), pos))
            else:
                k = n - self.n_sources
                tok = int(self.logit_ids[k])
                j.update(feature=tok, layer=str(L + 1), ctx_idx=T - 1, jsNodeId="L_{}-{}".format(tok, T - 1),
                         influence=None, token_prob=float(self.logit_probs[k]), is_target_logit=k == 0)
            nodes.append(j)
            ids.append(j["node_id"])
        pos_of = {n: i for i, n in enumerate(kept)}
        # links target-major over the kept nodes, as the CLI writes them
        r, c = self.edge_mask.nonzero(as_tuple=True)
        tgt = self.row_nodes[r]
        keep = self.node_mask[tgt] & self.node_mask[c]
        r, c, tgt = r[keep], c[keep], tgt[keep]
        order = torch.argsort(tgt * self.n_nodes + c)
        links, linked = [], set()
        for i in order.tolist():
            t, s = int(tgt[i]), int(c[i])
            links.append({"source": ids[pos_of[s]], "target": ids[pos_of[t]], "weight": float(self.rows[r[i], s])})
            linked.update((t, s))
        used = [j for n, j in zip(kept, nodes) if n in linked or j["feature_type"] in (_EMBEDDING, _LOGIT)]
        meta = dict(self._s["metadata"])
        meta["node_threshold"] = self.node_threshold
        return {"metadata": meta, "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "",
                                              "sg_pos": ""}, "nodes": used, "links": links}

    # ---- interventions ----------------------------------------------------------------------------------------
    def intervene(self, nodes, value, *, freeze_attention=False, direct_effects=False):
        """Reruns the model on the graph's prompt with each feature in `nodes` (one node or a list: node_id str,
        node index, or (layer, position, feature)) set to `value` (a number, or one per node), as circuit-tracer's
        feature interventions do: at every block the feature writes to, (value − its activation in this run) ×
        its decoder row is added to the MLP output at its position. Returns the logits [1, T, vocab] float32.

        freeze_attention: every attention pattern held at the clean run's. direct_effects: the frozen
        (constrained) replacement model the graph's edges are exact in — patterns, every norm's denominator and
        every MLP output frozen at the clean run's, the transcoders' skip connections following their inputs —
        so a change δ of a feature's activation a moves each target by δ / a × its edge weight (a logit: the
        demeaned logit, logit − mean of the logits). circuit-tracer's feature_intervention freezes attention by
        default; here the default is the real model. Hooks this thread entered (model.hooks, add_hook) apply too."""
        idx = self._intervention_nodes(nodes)
        values = self._intervention_values(value, len(idx))
        for name, v in (("freeze_attention", freeze_attention), ("direct_effects", direct_effects)):
            if not isinstance(v, bool):
                raise TypeError("Graph.intervene(): {} must be a bool, not {}".format(name, type(v).__name__))
        model, tcs = self._s["model"], self._s["tcs"]
        ids = self.ids[None]
        hooks = []
        if freeze_attention or direct_effects:
            clean = self._clean_cache()
            frozen = [n for n in clean if n.endswith("hook_pattern") or
                      (direct_effects and (n.endswith("hook_scale") or n.endswith("hook_mlp_out")))]
            hooks += [(n, lambda act, hook, v=clean[n]: v.clone()) for n in frozen]
            if direct_effects:
                hooks += self._skip_hooks(clean) + self._post_attn_hooks(clean)
        for n, v in zip(idx, values):
            layer, pos, feat = (int(x) for x in self.features[n])
            state = {}

            def read(x, hook, layer=layer, pos=pos, feat=feat, state=state):
                state["a"] = float(tcs.encode(layer, x[0].float())[pos, feat])

            hooks.append(("blocks.{}.{}".format(layer, tcs.input), read))
            f = torch.tensor([feat])
            for out in range(layer, self.n_layers):
                if not tcs.writes(layer, out):
                    continue
                row = tcs.decoder_rows(layer, out, f)[0]

                def add(act, hook, row=row, pos=pos, v=v, state=state):
                    act = act.clone()
                    act[0, pos] += (v - state["a"]) * row.to(act.dtype)
                    return act

                hooks.append(("blocks.{}.hook_mlp_out".format(out), add))
        return model.run_with_hooks(ids, fwd_hooks=hooks)

    def _intervention_nodes(self, nodes):
        many = isinstance(nodes, list)
        idx = [self.node_index(n) for n in (nodes if many else [nodes])]
        if not idx:
            raise ValueError("Graph.intervene(): no nodes given")
        for n in idx:
            if self._kind(n) != _FEATURE:
                raise ValueError("Graph.intervene(): node {} ({}) is a {} node; only features can be set".format(
                    n, self.node_id(n), self._kind(n)))
        return idx

    @staticmethod
    def _intervention_values(value, n):
        vals = value if isinstance(value, (list, tuple)) else [value] * n
        if len(vals) != n:
            raise ValueError("Graph.intervene(): {} values for {} nodes".format(len(vals), n))
        out = []
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError("Graph.intervene(): value must be a number, not " + type(v).__name__)
            if not math.isfinite(float(v)):
                raise ValueError("Graph.intervene(): value must be finite, not {}".format(v))
            out.append(float(v))
        return out

    def _clean_cache(self):
        c = self._s.get("clean")
        if c is None:
            inputs = {"blocks.{}.{}".format(l, self._s["tcs"].input) for l in range(self.n_layers)}

            post = self._post_attn_norm()

            def wanted(n):
                return (n.endswith(("hook_pattern", "hook_scale", "hook_mlp_out")) or n in inputs or
                        (post and n.endswith("attn.hook_z")))

            _, cache = self._s["model"].run_with_cache(self.ids[None], names_filter=wanted)
            c = {n: cache[n].clone() for n in cache.keys()}
            self._s["clean"] = c
        return c

    def _skip_hooks(self, clean):
        """The frozen MLP output plus its skip connection's change: skip(x) − skip(x_clean), x the transcoder's
        input in this run (linear there, its norm's denominator frozen)."""
        tcs, hooks = self._s["tcs"], []
        for l in range(self.n_layers):
            W = tcs.skip(l)
            if W is None:
                continue
            name_in = "blocks.{}.{}".format(l, tcs.input)
            state = {}

            def read(x, hook, state=state):
                state["x"] = x.clone()

            def add(act, hook, state=state, x0=clean[name_in], W=W):
                return act + ((state["x"] - x0) @ W.to(act.dtype))

            hooks += [(name_in, read), ("blocks.{}.hook_mlp_out".format(l), add)]
        return hooks

    def _post_attn_norm(self):
        # Gemma-2 and Gemma 3 normalise the attention's output before adding it (post_attention_layernorm), a
        # norm without a hook_scale point: _post_attn_hooks freezes it
        return self._s["model"].config["family"] in ("gemma2", "gemma3")

    def _post_attn_hooks(self, clean):
        """The post-attention norm frozen at the clean run's denominator, as the graph's engine freezes it: the
        norm's output in this run × s / s_clean, s the RMS of what it normalises (hook_z through W_O) in this run
        and in the clean one."""
        if not self._post_attn_norm():
            return []
        model, hooks = self._s["model"], []
        eps = model.config["eps"]
        for l in range(self.n_layers):
            def rms(z, W_O=model._layer_weight(l, "W_O"), b_O=model._layer_weight(l, "b_O")):
                x = torch.einsum("...hd,hdm->...m", z.float(), W_O)
                x = x + b_O if b_O is not None else x
                return (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()

            state = {}

            def read(z, hook, state=state, rms=rms):
                state["s"] = rms(z)

            def scale(act, hook, state=state, s0=rms(clean["blocks.{}.attn.hook_z".format(l)])):
                return act * (state["s"] / s0).to(act.dtype)

            hooks += [("blocks.{}.attn.hook_z".format(l), read), ("blocks.{}.hook_attn_out".format(l), scale)]
        return hooks

    def __repr__(self):
        pruned = ("pruned at {:g} / {:g}, ".format(self.node_threshold, self.edge_threshold)
                  if self.node_threshold is not None else "")
        top = self._s["logit_tokens"][0] if self._s["logit_tokens"] else "?"
        return ("<vocablens.Graph {!r}: {} positions, {} layers, {} of {} active features with rows, {} logits "
                "(top {!r}, p={:.3g}); {}{} nodes, {} edges; replacement {:.3f}, completeness {:.3f}>").format(
            self._s["metadata"].get("prompt", ""), self.n_pos, self.n_layers, self.n_features,
            int(self.active_features.shape[0]), self.n_logits, top, float(self.logit_probs[0]), pruned,
            int(self.node_mask.sum()), int(self.edge_mask.sum()), self._s["scores"][0], self._s["scores"][1])


def _attribution_graph_stub(spec, signature):
    """attribution_graph: the graph declaration's options but its output-only flags, returning a Graph."""
    kept = dict(spec, name="attribution_graph", options=[o for o in spec["options"] if o["name"] not in _NOT_OPTIONS])
    return signature(kept, returns="Graph")


@derived("graph", _attribution_graph_stub)
def _make_attribution_graph(declared):
    import inspect
    sig = declared.__signature__
    params = [p for p in sig.parameters.values() if p.name not in _NOT_OPTIONS]
    sig = inspect.Signature(params)

    def attribution_graph(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError("attribution_graph(): {}".format(e)) from None
        a = dict(bound.arguments)
        model = a["model"]
        if not isinstance(model, Model):
            raise TypeError("attribution_graph(): model must be a vocablens.Model (from vocablens.load_model), not "
                            + type(model).__name__)
        tdir = a.get("transcoders")
        if not isinstance(tdir, (str, os.PathLike)):
            raise TypeError("attribution_graph(): transcoders must be a folder (str or os.PathLike), not "
                            + type(tdir).__name__)
        a["transcoders"] = os.fspath(tdir)
        r = declared(**a, save_rows=True)
        return _graph_of(model, r, a)

    attribution_graph.__signature__ = sig
    attribution_graph.__module__ = "vocablens"
    attribution_graph.__doc__ = (
        "The attribution graph of a prompt through transcoders as a vocablens.Graph (docs/graph.md): the declared "
        "`graph` analysis (its options, below, and its C++ engine), held unpruned with its rows, node table, "
        "prune(), to_neuronpedia() and intervene().\n\n" + declared.__doc__.split("\n", 2)[-1])
    attribution_graph.__name__ = attribution_graph.__qualname__ = "attribution_graph"
    return attribution_graph


def _graph_of(model, r, options):
    A = r.arrays
    rows = torch.from_numpy(A["rows"].copy())
    af = torch.from_numpy(A["active_features"].copy())
    acts = torch.from_numpy(A["activations"].copy())
    sel = torch.from_numpy(A["selected"].copy())
    L, T = int(r.summary["n_layers"]), int(r.summary["n_pos"])
    F, K = int(sel.shape[0]), int(A["logit_ids"].shape[0])
    S = rows.shape[1]
    N = S + K
    tcs = _core.load_graph_transcoders(model, options["transcoders"])
    row_nodes = torch.cat([torch.arange(F), torch.arange(S, S + K)])
    logit_probs = torch.from_numpy(A["logit_probs"].copy())
    w = torch.zeros(N, dtype=torch.float64)
    w[S:] = logit_probs
    influence = _influence(_normalise(rows.to(torch.float64)), row_nodes, N, S, w)
    order = torch.sort(influence, descending=True)
    cumulative = torch.zeros(N, dtype=torch.float64)
    cumulative[order.indices] = torch.cumsum(order.values, 0) / order.values.sum()
    np_doc = r.summary["neuronpedia"]
    meta = {k: v for k, v in np_doc["metadata"].items()}
    state = {
        "ids": torch.from_numpy(A["ids"].copy()), "features": af[sel], "feature_activations": acts[sel],
        "active_features": af, "activations": acts, "logit_ids": torch.from_numpy(A["logit_ids"].copy()),
        "logit_probs": logit_probs, "rows": rows, "row_nodes": row_nodes, "node_influence": influence,
        "cumulative": cumulative, "n_layers": L, "n_pos": T, "n_nodes": N, "n_sources": S, "result": r,
        "model": model, "tcs": tcs, "labels": {}, "label_tokens": int(options.get("label_tokens", 5)),
        "prompt_tokens": list(meta["prompt_tokens"]), "logit_tokens": [x["token"] for x in r.summary["logits"]],
        "metadata": meta, "max_features": max(tcs.n_features(l) for l in range(L)),
        "scores": (float(r.summary["replacement_score"]), float(r.summary["completeness_score"])),
    }
    return Graph(state)
