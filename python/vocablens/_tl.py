"""TransformerLens's names on a vocablens.Model (docs/python.md, "Coming from TransformerLens"): model.cfg with
HookedTransformerConfig's field names, the stacked weights model.W_Q ... b_out as tensors, model.blocks[l].attn.W_O,
model.ln_final / model.unembed / model.embed / model.pos_embed, and generate(max_new_tokens=, return_type=).

Shapes are TransformerLens's: W_Q/W_K/W_V [n_layers, n_heads, d_model, d_head] (grouped-query k/v heads repeated
per query head, as TransformerLens's W_K property does), W_O [n_layers, n_heads, d_head, d_model], W_in / W_gate
[n_layers, d_model, d_mlp], W_out [n_layers, d_mlp, d_model], b_Q/b_K/b_V [n_layers, n_heads, d_head], b_O / b_out
[n_layers, d_model], b_in [n_layers, d_mlp]. As in TransformerLens each access stacks the layers (a new float32
tensor); model.blocks[l].attn.W_O gives one layer without stacking the others.
"""
import operator
import os

import torch

_POSITIONS = {"learned": "standard", "rope": "rotary", "alibi": "alibi", "sinusoidal": "sinusoidal", "none": "none"}


class Config:
    """model.cfg: the model's shape under TransformerLens's HookedTransformerConfig field names, as attributes
    (model.cfg.n_layers). Read-only; to_dict() gives them all. model.config (a dict of vocablens's own names)
    stays as it was."""

    def __init__(self, fields):
        object.__setattr__(self, "_fields", dict(fields))

    def __getattr__(self, name):
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        raise AttributeError("model.cfg has no field '{}' (it has: {})".format(name, ", ".join(sorted(fields))))

    def __setattr__(self, name, value):
        raise AttributeError("model.cfg is read-only (it describes the loaded weights)")

    def __dir__(self):
        return sorted(self._fields) + ["to_dict"]

    def to_dict(self):
        return dict(self._fields)

    def __repr__(self):
        return "vocablens.Config(" + ", ".join("{}={!r}".format(k, v) for k, v in self._fields.items()) + ")"


def _prepends_bos(model):
    """Whether the tokenizer adds BOS by itself (TransformerLens's cfg.tokenizer_prepends_bos)."""
    tok = model.tokenizer
    if tok is None or tok.bos_id is None or tok.bos_id < 0:
        return False
    ids = model.tokenize("a")
    return bool(ids) and ids[0] == tok.bos_id


def cfg(self):
    c = self.config
    fields = {
        "model_name": os.path.basename(self.source.rstrip("/")),
        "original_architecture": c["architecture"],
        "n_layers": c["n_layers"], "d_model": c["d_model"], "n_ctx": c["n_ctx"], "d_head": c["d_head"],
        "n_heads": c["n_heads"], "d_mlp": c["d_mlp"], "d_vocab": c["d_vocab"], "d_vocab_out": c["d_vocab"],
        # TransformerLens leaves n_key_value_heads None unless the model uses grouped-query attention.
        "n_key_value_heads": c["n_kv_heads"] if c["n_kv_heads"] != c["n_heads"] else None,
        "act_fn": c["act_fn"], "eps": c["eps"],
        "normalization_type": "LN" if c["normalization"] == "layernorm" else "RMS",
        "final_rms": c["normalization"] == "rmsnorm",
        "positional_embedding_type": _POSITIONS.get(c["positions"], c["positions"]),
        "rotary_dim": c["rotary_dim"] if c["positions"] == "rope" else None,
        "rotary_base": c["rope_theta"], "rotary_adjacent_pairs": c["rope_interleaved"],
        "gated_mlp": c["gated_mlp"], "parallel_attn_mlp": c["parallel_residual"],
        # TransformerLens's MoE fields, None for a dense model as there.
        "num_experts": c["n_experts"] or None, "experts_per_token": c["n_experts_used"] or None,
        "tie_word_embeddings": c["tied_embeddings"], "attn_only": False,
        "use_local_attn": c["sliding_window"] > 0, "window_size": c["sliding_window"] or None,
        "attn_scores_soft_cap": c["attn_softcap"] if c["attn_softcap"] > 0 else -1.0,
        "output_logits_soft_cap": c["final_softcap"] if c["final_softcap"] > 0 else -1.0,
        "default_prepend_bos": True, "tokenizer_prepends_bos": _prepends_bos(self),
        "device": "cpu", "dtype": torch.float32, "n_devices": 1,
        "use_attn_result": self.__dict__.get("_use_attn_result", True),
    }
    return Config(fields)


# ---- weights --------------------------------------------------------------------------------------------------

def _zeros_for(model, key):
    """TransformerLens's zero bias where the model has none (Llama's b_Q, ...)."""
    c = model.config
    shape = {"b_Q": (c["n_heads"], c["d_head"]), "b_K": (c["n_heads"], c["d_head"]),
             "b_V": (c["n_heads"], c["d_head"]), "b_O": (c["d_model"],), "b_in": (c["d_mlp"],),
             "b_out": (c["d_model"],)}.get(key)
    return torch.zeros(shape) if shape is not None else None


def _layer(model, layer, key):
    t = model._layer_weight(layer, key)
    return _zeros_for(model, key) if t is None else t


def _stacked(key):
    def get(self):
        layers = [_layer(self, l, key) for l in range(self.config["n_layers"])]
        if any(t is None for t in layers):
            return None  # W_gate of a model without a gated MLP (TransformerLens: None)
        return torch.stack(layers)
    get.__name__ = key
    get.__doc__ = "TransformerLens's {}: every layer's, stacked on a new first axis (a new float32 tensor).".format(key)
    return property(get)


class _Part:
    """model.blocks[l].attn / .mlp / .ln1 / .ln2: one layer's weights by TransformerLens's names."""

    def __init__(self, model, layer, part, keys, prefix=""):
        self._model, self._layer, self._keys, self._prefix = model, layer, keys, prefix
        self._where = "blocks[{}].{}".format(layer, part)

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._keys:
            raise AttributeError("{} has no weight '{}' (it has: {})".format(self._where, name, ", ".join(self._keys)))
        return _layer(self._model, self._layer, self._prefix + name)

    def __dir__(self):
        return list(self._keys)

    def __repr__(self):
        return "<vocablens {}: {}>".format(self._where, ", ".join(self._keys))


class _Block:
    def __init__(self, model, layer):
        self.layer = layer
        self.attn = _Part(model, layer, "attn", ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"))
        self.mlp = _Part(model, layer, "mlp", ("W_in", "b_in", "W_gate", "b_gate", "W_out", "b_out"))
        self.ln1 = _Part(model, layer, "ln1", ("w", "b"), "ln1.")
        self.ln2 = _Part(model, layer, "ln2", ("w", "b"), "ln2.")

    def __repr__(self):
        return "<vocablens blocks[{}]: attn, mlp, ln1, ln2>".format(self.layer)


class _Blocks:
    """model.blocks: the layers as a sequence (negative indices and slices as a list's)."""

    def __init__(self, model):
        self._model = model
        self._n = model.config["n_layers"]

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(self._n)[i]]
        if isinstance(i, bool) or not hasattr(i, "__index__"):
            raise TypeError("blocks[i]: i must be an int or a slice, not " + type(i).__name__)
        i = operator.index(i)   # numpy and torch integers too
        if not -self._n <= i < self._n:
            raise IndexError("blocks[{}]: the model has {} layers".format(i, self._n))
        return _Block(self._model, i % self._n)

    def __iter__(self):
        return (self[i] for i in range(self._n))


class _FinalNorm:
    """model.ln_final: callable (the final norm of x, scale and bias) with .w and .b (None where absent)."""

    def __init__(self, model):
        self._model = model

    @property
    def w(self):
        return self._model._final_norm_weight("w")

    @property
    def b(self):
        return self._model._final_norm_weight("b")

    def __call__(self, x):
        return self._model.final_norm(x)


class _Unembed:
    """model.unembed: callable (x @ W_U + b_U, x [..., d_model]) with .W_U and .b_U."""

    def __init__(self, model):
        self._model = model

    @property
    def W_U(self):
        return self._model.W_U

    @property
    def b_U(self):
        return self._model.b_U

    def __call__(self, x):
        return self._model._unembed(x)


class _Weights:
    def __init__(self, model, **props):
        self._model = model
        self._props = props

    def __getattr__(self, name):
        props = self.__dict__.get("_props", {})
        if name not in props:
            raise AttributeError("no weight '{}' here (it has: {})".format(name, ", ".join(props)))
        return getattr(self._model, props[name])


def set_use_attn_result(self, use_attn_result):
    """TransformerLens's switch for the per-head outputs blocks.L.attn.hook_result. vocablens computes them
    whenever they are hooked or cached, and run_with_cache() with no names_filter caches them unless this was
    set to False (TransformerLens leaves them out until it is set to True)."""
    if not isinstance(use_attn_result, bool):
        raise TypeError("set_use_attn_result(): use_attn_result must be True or False, not " +
                        type(use_attn_result).__name__)
    self._use_attn_result = use_attn_result


# ---- install ----------------------------------------------------------------------------------------------------

def install(Model):
    from ._generate import generate
    Model.cfg = property(cfg, doc=Config.__doc__)
    for key in ("W_Q", "W_K", "W_V", "W_O", "W_in", "W_gate", "W_out", "b_Q", "b_K", "b_V", "b_O", "b_in", "b_out"):
        setattr(Model, key, _stacked(key))
    stored_b_U = Model.__dict__["b_U"].fget

    def b_U(self):
        """TransformerLens's b_U [d_vocab]: zeros when the model has no unembedding bias (GPT-2, Llama)."""
        t = stored_b_U(self)
        return torch.zeros(self.config["d_vocab"]) if t is None else t
    Model.b_U = property(b_U, doc=b_U.__doc__)
    Model.blocks = property(_Blocks, doc=_Blocks.__doc__)
    Model.ln_final = property(_FinalNorm, doc=_FinalNorm.__doc__)
    Model.unembed = property(_Unembed, doc=_Unembed.__doc__)
    Model.embed = property(lambda self: _Weights(self, W_E="W_E"), doc="model.embed.W_E (= model.W_E)")
    Model.pos_embed = property(lambda self: _Weights(self, W_pos="W_pos"), doc="model.pos_embed.W_pos (= model.W_pos)")
    Model.generate = generate
    Model.set_use_attn_result = set_use_attn_result
