"""ActivationCache: what run_with_cache returns, with TransformerLens's helpers (docs/python.md, "The cache").

    logits, cache = model.run_with_cache(ids)
    cache["blocks.1.attn.hook_z"]              # [batch, pos, head, d_head]
    cache["resid_pre", 1]                      # the same as cache["blocks.1.hook_resid_pre"]
    resid, labels = cache.accumulated_resid(return_labels=True)   # [n_layers + 1, batch, pos, d_model]
    parts = cache.decompose_resid()            # embed, pos_embed, 0_attn_out, 0_mlp_out, ...: they sum to the stream
    heads = cache.stack_head_results()         # [n_layers * n_heads, batch, pos, d_model]
    attrs = cache.logit_attrs(parts, " Paris") # [components, batch, pos]: direct logit attribution

The model is not LayerNorm-folded (TransformerLens folds by default), so the norm helpers apply the
norm's weight as well as its scale: apply_ln_to_stack(stack) is stack centred (LayerNorm), divided by the
norm's scale at this run's residual (one number per position, shared by the components) and multiplied by
the norm's weight; its bias is left out, as folding moves it into b_U. Hence for a pre-norm model

    cache.apply_ln_to_stack(cache.decompose_resid()).sum(0) + ln_final.b == cache["ln_final.hook_normalized"]
    cache.logit_attrs(cache.decompose_resid(), t).sum(0) + ln_final.b @ W_U[:, t] + b_U[t] == logits[..., t]
"""
import json
import os

import numpy as np
import torch

from . import _vocablens as _core
from .utils import get_act_name

def _slice(t, s, dim):
    """TransformerLens's Slice on dimension `dim`: None keeps all, an int selects (the dimension goes), a
    slice / list / tensor of indices keeps the dimension."""
    if s is None:
        return t
    if isinstance(s, int):
        return t.select(dim, s)
    if isinstance(s, slice):
        idx = torch.arange(t.shape[dim])[s]
    else:
        idx = torch.as_tensor(s, dtype=torch.int64)
    return t.index_select(dim if dim >= 0 else t.dim() + dim, idx)


class ActivationCache:
    """Activations of one forward pass by hook name (a dict-like view: keys(), values(), items(), `in`,
    len()); `cache[name]` takes the name as given to run_with_cache, any other spelling of it
    (TransformerLens's or ours) or TransformerLens's (name, layer) tuple. Tensors are the forward's own (no
    copies). `model` may be None (a cache loaded without one): then the helpers that need weights refuse."""

    def __init__(self, cache_dict, model, has_batch_dim=True):
        if not isinstance(cache_dict, dict):
            raise TypeError("ActivationCache(): cache_dict must be a dict name -> torch.Tensor")
        self.cache_dict = cache_dict
        self.model = model
        self.has_batch_dim = has_batch_dim

    # ---- dict-like ----
    def _key(self, key):
        if isinstance(key, tuple):
            if not 1 <= len(key) <= 3:
                raise KeyError("cache[name, layer(, 'attn' | 'mlp')], not {!r}".format(key))
            if len(key) == 1:
                key = key[0]
            else:
                key = self._tuple_name(*key)
        if not isinstance(key, str):
            raise KeyError("cache keys are hook names (str) or (name, layer) tuples, not {}".format(type(key).__name__))
        if key in self.cache_dict:
            return key
        tl = None
        if self.model is not None:
            try:
                tl = _core._hook_site(self.model, key, "cache key")[0]
            except ValueError:
                tl = None
        if tl is None:
            try:
                tl = get_act_name(key)   # TransformerLens's shorthand: "resid_pre3", "k6", "embed"
            except ValueError:
                tl = None
            if tl is not None and tl in self.cache_dict:
                return tl
        if tl is not None and self.model is not None:
            if tl in self.cache_dict:
                return tl
            for k in self.cache_dict:
                try:
                    if _core._hook_site(self.model, k, "cache key")[0] == tl:
                        return k
                except ValueError:
                    pass
        raise KeyError("'{}' is not in this cache ({} activations; run_with_cache(names_filter=...) chooses "
                       "which are kept)".format(key, len(self.cache_dict)))

    def _tuple_name(self, name, layer, layer_type=None):
        """(name, layer[, layer_type]) as TransformerLens's cache reads it: a negative layer counts from the end
        (cache["resid_post", -1] is the last block's)."""
        if isinstance(layer, int) and not isinstance(layer, bool) and layer < 0:
            if self.model is None:
                raise KeyError("cache[{!r}, {}]: a negative layer needs the model (load_cache(dir, model=...))".format(
                    name, layer))
            n = self.model.config["n_layers"]
            if layer < -n:
                raise KeyError("cache[{!r}, {}]: the model has {} layers".format(name, layer, n))
            layer += n
        try:
            return get_act_name(name, layer, layer_type)
        except (TypeError, ValueError) as e:
            raise KeyError(str(e)) from None

    def __getitem__(self, key):
        return self.cache_dict[self._key(key)]

    def __contains__(self, key):
        try:
            self._key(key)
            return True
        except KeyError:
            return False

    def __iter__(self):
        return iter(self.cache_dict)

    def __len__(self):
        return len(self.cache_dict)

    def keys(self):
        return self.cache_dict.keys()

    def values(self):
        return self.cache_dict.values()

    def items(self):
        return self.cache_dict.items()

    def __repr__(self):
        return "<vocablens.ActivationCache {} activations: {}{}>".format(
            len(self), ", ".join(list(self.cache_dict)[:4]), ", ..." if len(self) > 4 else "")

    def remove_batch_dim(self):
        """The same cache without the batch dimension (batch size 1 only)."""
        if not self.has_batch_dim:
            return self
        for k, v in self.cache_dict.items():
            if v.shape[0] != 1:
                raise ValueError("remove_batch_dim(): {} has batch size {}, not 1".format(k, v.shape[0]))
        return ActivationCache({k: v[0] for k, v in self.cache_dict.items()}, self.model, has_batch_dim=False)

    # ---- the model's shape and norms ----
    def _need_model(self, what):
        if self.model is None:
            raise ValueError("{} needs the model's weights: load_cache(dir, model=...)".format(what))
        return self.model

    def _n_layers(self):
        return self._need_model("this helper").config["n_layers"]

    def _final_layer(self, layer):
        n = self._n_layers()
        if layer is None or layer == -1:
            return n
        if not isinstance(layer, int) or not 0 <= layer <= n:
            raise ValueError("layer must be an int in 0 .. {} (or None / -1: the final residual), not {!r}".format(
                n, layer))
        return layer

    def _pre_norm(self, what):
        if not self._need_model(what).config.get("norm_before", True):
            raise ValueError("{}: this model normalises after each block (post-norm), so its residual stream is "
                             "not the sum of the blocks' outputs".format(what))

    def _norm(self, layer, mlp_input):
        """(input residual name, weight, bias) of the norm that reads the stream at `layer` (n_layers: the
        final norm; None weight: no norm)."""
        m = self._need_model("apply_ln")
        c = m.config
        w = m.weights()
        n = c["n_layers"]
        if layer == n:
            if not c.get("final_norm", True):
                return "blocks.{}.hook_resid_post".format(n - 1), None, None
            return "blocks.{}.hook_resid_post".format(n - 1), w.get("ln_final.w"), w.get("ln_final.b")
        ln = "ln2" if mlp_input else "ln1"
        src = "resid_mid" if mlp_input and not c.get("parallel_residual", False) else "resid_pre"
        return "blocks.{}.hook_{}".format(layer, src), w.get("blocks.{}.{}.w".format(layer, ln)), \
            w.get("blocks.{}.{}.b".format(layer, ln))

    def _center(self, x):
        if self.model.config["normalization"] == "layernorm":
            return x - x.mean(-1, keepdim=True)
        return x

    def _scale(self, resid):
        eps = self.model.config["eps"]
        x = self._center(resid)
        return (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()

    def apply_ln_to_stack(self, residual_stack, layer=None, mlp_input=False, pos_slice=None, batch_slice=None,
                          has_batch_dim=True, recompute_ln=False):
        """A stack of residual-stream pieces [components, (batch,) (pos,) d_model] as they enter the norm of
        `layer` (None / -1 / n_layers: the final norm; else ln1, or ln2 with mlp_input): each piece
        centred (LayerNorm), divided by the norm's scale in this run (its hook_scale when the cache holds it,
        else computed from the residual at that point; so that the pieces still add up) and multiplied by the norm's weight. recompute_ln=True instead normalises each
        piece on its own, bias included (the logit lens). pos_slice / batch_slice: the slices the stack was
        taken with, applied to the cached scale."""
        layer = self._final_layer(layer)
        src, w, b = self._norm(layer, mlp_input)
        if recompute_ln:
            if w is None:
                return residual_stack
            x = self._center(residual_stack)
            x = x / (x.pow(2).mean(-1, keepdim=True) + self.model.config["eps"]).sqrt() * w
            return x + b if b is not None else x
        if w is None:
            return residual_stack
        # The norm's own denominator when the cache holds it (ln1/ln2/ln_final.hook_scale, as TransformerLens reads
        # it; a hook may have edited it), else recomputed from the residual it normalises.
        n = self._need_model("apply_ln").config["n_layers"]
        scale_name = "ln_final.hook_scale" if layer == n else "blocks.{}.{}.hook_scale".format(
            layer, "ln2" if mlp_input else "ln1")
        scale = self[scale_name] if scale_name in self else self._scale(self[src])
        if self.has_batch_dim and has_batch_dim and batch_slice is not None:
            scale = _slice(scale, batch_slice, 0)
        scale = _slice(scale, pos_slice, -2)
        if pos_slice is not None and isinstance(pos_slice, int):
            pass  # the position dimension is gone from both
        return self._center(residual_stack) / scale * w

    def accumulated_resid(self, layer=None, incl_mid=False, apply_ln=False, pos_slice=None, mlp_input=False,
                          return_labels=False):
        """The residual stream as it accumulates: resid_pre of layers 0 .. layer-1 (with resid_mid between
        them if incl_mid) and, for layer=None / -1 / n_layers, the final resid_post: [n_layers + 1, batch,
        pos, d_model] by default. apply_ln: the final norm applied to each (recomputed per entry, bias
        included: unembed() of it is the logit lens; its last entry is ln_final.hook_normalized), or for an
        inner layer its ln1 (ln2 with mlp_input) with this run's scale. Labels "0_pre", "0_mid", ...,
        "final_post"."""
        n = self._n_layers()
        layer = self._final_layer(layer)
        parts, labels = [], []
        for l in range(layer + 1):
            if l == n:
                parts.append(self["resid_post", n - 1])
                labels.append("final_post")
                continue
            parts.append(self["resid_pre", l])
            labels.append("{}_pre".format(l))
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                parts.append(self["resid_mid", l])
                labels.append("{}_mid".format(l))
        stack = torch.stack([_slice(p, pos_slice, -2) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice,
                                           recompute_ln=layer == n)
        return (stack, labels) if return_labels else stack

    def decompose_resid(self, layer=None, mlp_input=False, mode="all", apply_ln=False, pos_slice=None,
                        incl_embeds=True, return_labels=False):
        """The residual stream entering `layer` (None: the final one) split into what wrote it: "embed",
        "pos_embed" (learned or sinusoidal positions), then "L_attn_out" and "L_mlp_out" per block (mode
        "attn" / "mlp": only those); mlp_input adds layer's attn_out. Biases are inside attn_out / mlp_out,
        so the pieces sum to the stream (pre-norm models). [components, batch, pos, d_model]."""
        if mode not in ("all", "attn", "mlp"):
            raise ValueError("decompose_resid(): mode must be 'all', 'attn' or 'mlp', not {!r}".format(mode))
        self._pre_norm("decompose_resid")
        layer = self._final_layer(layer)
        c = self.model.config
        parts, labels = [], []
        if incl_embeds:
            parts.append(self["hook_embed"])
            labels.append("embed")
            if c["positions"] == "learned":
                parts.append(self["hook_pos_embed"])
                labels.append("pos_embed")
            elif c["positions"] == "sinusoidal":
                parts.append(self["resid_pre", 0] - self["hook_embed"])
                labels.append("pos_embed")
        for l in range(layer):
            if mode != "mlp":
                parts.append(self["attn_out", l])
                labels.append("{}_attn_out".format(l))
            if mode != "attn":
                parts.append(self["mlp_out", l])
                labels.append("{}_mlp_out".format(l))
        if mlp_input and mode != "mlp":
            if layer == c["n_layers"]:
                raise ValueError("decompose_resid(): mlp_input needs a layer below n_layers")
            parts.append(self["attn_out", layer])
            labels.append("{}_attn_out".format(layer))
        if not parts:
            raise ValueError("decompose_resid(): nothing to stack (layer 0 without embeddings)")
        stack = torch.stack([_slice(p, pos_slice, -2) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input=mlp_input, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def compute_head_results(self):
        """Adds blocks.L.attn.hook_result [batch, pos, head, d_model] = hook_z[..., h, :] @ W_O[h] for every
        layer that lacks it (needs hook_z)."""
        m = self._need_model("compute_head_results")
        for l in range(self._n_layers()):
            key = "blocks.{}.attn.hook_result".format(l)
            if key not in self:
                self.cache_dict[key] = torch.einsum("...hd,hdm->...hm", self["z", l], m._layer_weight(l, "W_O"))

    def stack_head_results(self, layer=-1, return_labels=False, incl_remainder=False, pos_slice=None,
                           apply_ln=False):
        """Every head's output (hook_result, or hook_z @ W_O) of the blocks below `layer` (-1 / None: all) as
        [layer * n_heads, batch, pos, d_model], labels "L0H0", ...; incl_remainder adds "remainder": the
        rest of the stream (embeddings, MLPs, biases)."""
        self._pre_norm("stack_head_results")
        layer = self._final_layer(layer)
        m = self.model
        parts, labels = [], []
        for l in range(layer):
            key = "blocks.{}.attn.hook_result".format(l)
            r = self[key] if key in self else torch.einsum("...hd,hdm->...hm", self["z", l], m._layer_weight(l, "W_O"))
            r = _slice(r, pos_slice, -3)
            parts.append(r.movedim(-2, 0))
            labels.extend("L{}H{}".format(l, h) for h in range(r.shape[-2]))
        if parts:
            stack = torch.cat(parts, 0)
        else:
            stack = torch.zeros((0,) + tuple(_slice(self["hook_embed"], pos_slice, -2).shape))
        if incl_remainder:
            rest = _slice(self["resid_post", layer - 1], pos_slice, -2) if layer > 0 else \
                _slice(self["resid_pre", 0], pos_slice, -2)
            stack = torch.cat([stack, (rest - stack.sum(0))[None]], 0)
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def stack_activation(self, activation_name, layer=-1, sublayer_type=None):
        """cache[activation_name, l] for every block below `layer` (-1 / None: all), stacked on a new first axis."""
        layer = self._final_layer(layer)
        return torch.stack([self[(activation_name, l) if sublayer_type is None else (activation_name, l, sublayer_type)]
                            for l in range(layer)])

    def get_neuron_results(self, layer, neuron_slice=None, pos_slice=None):
        """What each neuron of block `layer` writes to the stream: mlp.hook_post[..., n] * W_out[n]
        ([batch, pos, neurons, d_model]; without b_out, so the sum over neurons plus b_out is hook_mlp_out)."""
        m = self._need_model("get_neuron_results")
        acts = _slice(self["post", layer], pos_slice, -2)
        W_out = m._layer_weight(layer, "W_out")
        if neuron_slice is not None:
            acts = _slice(acts, [neuron_slice] if isinstance(neuron_slice, int) else neuron_slice, -1)
            W_out = _slice(W_out, [neuron_slice] if isinstance(neuron_slice, int) else neuron_slice, 0)
        return acts[..., None] * W_out

    def stack_neuron_results(self, layer, pos_slice=None, neuron_slice=None, return_labels=False,
                             incl_remainder=False, apply_ln=False):
        """Every neuron's output (get_neuron_results) of the blocks below `layer` as [layer * neurons, batch,
        pos, d_model], labels "L0N0", ...; incl_remainder adds the rest of the stream entering `layer`.
        Memory: neurons * d_model floats per token and layer."""
        self._pre_norm("stack_neuron_results")
        layer = self._final_layer(layer)
        d_mlp = self.model.config["d_mlp"]
        if neuron_slice is None:
            idx = list(range(d_mlp))
        elif isinstance(neuron_slice, int):
            idx = [neuron_slice]
        elif isinstance(neuron_slice, slice):
            idx = list(range(d_mlp))[neuron_slice]
        else:
            idx = [int(i) for i in neuron_slice]
        parts, labels = [], []
        for l in range(layer):
            parts.append(self.get_neuron_results(l, idx, pos_slice).movedim(-2, 0))
            labels.extend("L{}N{}".format(l, i) for i in idx)
        stack = torch.cat(parts, 0) if parts else \
            torch.zeros((0,) + tuple(_slice(self["hook_embed"], pos_slice, -2).shape))
        if incl_remainder:
            rest = _slice(self["resid_post", layer - 1] if layer > 0 else self["resid_pre", 0], pos_slice, -2)
            stack = torch.cat([stack, (rest - stack.sum(0))[None]], 0)
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack

    def _directions(self, tokens):
        m = self._need_model("logit_attrs")
        if isinstance(tokens, str):
            tokens = m.token_id(tokens)
        t = torch.as_tensor(tokens, dtype=torch.int64)
        return m.W_U[:, t.reshape(-1)].T.reshape(tuple(t.shape) + (m.config["d_model"],))

    def logit_attrs(self, residual_stack, tokens, incorrect_tokens=None, pos_slice=None, batch_slice=None,
                    has_batch_dim=True):
        """Direct logit attribution: each stack entry, through the final norm as apply_ln_to_stack does, dotted
        with W_U[:, token] (minus W_U[:, incorrect_token]). tokens: a token (str / id), [batch] ids (one per
        prompt) or [batch, pos]. Returns [components, batch, pos] (without what was sliced away)."""
        d = self._directions(tokens)
        if incorrect_tokens is not None:
            wrong = self._directions(incorrect_tokens)
            if wrong.shape != d.shape:
                raise ValueError("logit_attrs(): tokens and incorrect_tokens must have the same shape ({} vs {})".format(
                    tuple(d.shape[:-1]), tuple(wrong.shape[:-1])))
            d = d - wrong
        x = self.apply_ln_to_stack(residual_stack, None, pos_slice=pos_slice, batch_slice=batch_slice,
                                   has_batch_dim=has_batch_dim)
        if d.dim() == 2 and x.dim() == 4 and d.shape[0] == x.shape[1]:
            d = d[:, None, :]  # one token per prompt, over every position
        return (x * d).sum(-1)

    # ---- files ----
    def save(self, dir):
        """Writes every activation as <dir>/<name>.npy (float32 C order) and <dir>/cache.json (the names,
        shapes and the model's path); load_cache(dir) reads them back."""
        dir = os.fspath(dir)
        os.makedirs(dir, exist_ok=True)
        index = {"format": "vocablens.ActivationCache", "version": 1, "has_batch_dim": self.has_batch_dim,
                 "model": self.model.source if self.model is not None else None, "activations": []}
        for name, t in self.cache_dict.items():
            if "/" in name or name.startswith("."):
                raise ValueError("save(): '{}' cannot be a file name".format(name))
            arr = t.detach().cpu().contiguous().numpy()
            np.save(os.path.join(dir, name + ".npy"), arr)
            index["activations"].append({"name": name, "shape": list(arr.shape), "dtype": str(arr.dtype)})
        with open(os.path.join(dir, "cache.json"), "w") as f:
            json.dump(index, f, indent=1)
        return dir


def load_cache(dir, model=None):
    """An ActivationCache saved by ActivationCache.save(dir); `model` (the same model) enables the helpers
    that need weights."""
    dir = os.fspath(dir)
    path = os.path.join(dir, "cache.json")
    try:
        with open(path) as f:
            index = json.load(f)
    except FileNotFoundError:
        raise _core.FormatError("{}: no cache.json (not a directory written by ActivationCache.save)".format(path))
    except ValueError as e:
        raise _core.FormatError("{}: not JSON ({})".format(path, e))
    if not isinstance(index, dict) or index.get("format") != "vocablens.ActivationCache":
        raise _core.FormatError("{}: not an ActivationCache index".format(path))
    d = {}
    for a in index.get("activations", []):
        name = a.get("name") if isinstance(a, dict) else None
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise _core.FormatError("{}: bad activation entry {!r}".format(path, a))
        file = os.path.join(dir, name + ".npy")
        try:
            arr = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise _core.FormatError("{}: {}".format(file, e))
        if list(arr.shape) != a.get("shape"):
            raise _core.FormatError("{}: shape {} but cache.json says {}".format(file, list(arr.shape), a.get("shape")))
        d[name] = torch.from_numpy(arr)
    return ActivationCache(d, model, has_batch_dim=bool(index.get("has_batch_dim", True)))
