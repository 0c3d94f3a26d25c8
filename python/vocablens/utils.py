"""TransformerLens's `utils` helpers that code written for it calls (docs/python.md, "Coming from TransformerLens").

    from vocablens import utils
    utils.get_act_name("resid_post", 3)      # "blocks.3.hook_resid_post"
    utils.get_act_name("z", 0)               # "blocks.0.attn.hook_z"
    utils.get_act_name("pre5")               # "blocks.5.mlp.hook_pre"
    utils.get_act_name("normalized", 2, "ln2")   # "blocks.2.ln2.hook_normalized"
"""
import re

# The hook points a vocablens model has (python/src/bind_hooks.cpp, hook_names): TransformerLens's names without
# the "blocks.L." prefix, and the model-level ones.
_BLOCK_POINTS = ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "hook_attn_out", "hook_mlp_out",
                 "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z", "attn.hook_result", "attn.hook_pattern",
                 "attn.hook_attn_scores", "mlp.hook_pre", "mlp.hook_post", "ln1.hook_scale", "ln1.hook_normalized",
                 "ln2.hook_scale", "ln2.hook_normalized", "mlp.hook_in")
_MODEL_POINTS = ("hook_embed", "hook_pos_embed", "ln_final.hook_scale", "ln_final.hook_normalized")

# TransformerLens's spellings (its get_act_name's documented aliases).
_LAYER_TYPES = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q", "value": "v",
            "mlp_pre": "pre", "mlp_mid": "mid", "mlp_post": "post"}
_ATTN = ("k", "v", "q", "z", "rot_k", "rot_q", "result", "pattern", "attn_scores")
_MLP = ("pre", "post", "mid", "pre_linear")
_NORM = ("scale", "normalized")


def _supported(full):
    m = re.fullmatch(r"blocks\.(\d+)\.(.+)", full)
    return full in _MODEL_POINTS if m is None else m.group(2) in _BLOCK_POINTS


def get_act_name(name, layer=None, layer_type=None):
    """The full hook name of TransformerLens's shorthand, with its rules: get_act_name("resid_post", 3) is
    "blocks.3.hook_resid_post"; "q", "k", "v", "z", "result", "pattern" (alias "attn"), "attn_scores" (alias
    "attn_logits") are attention points, "pre" and "post" MLP points; "embed" is "hook_embed", "pos_embed"
    "hook_pos_embed", "scale" / "normalized" without a layer "ln_final.hook_scale" / "ln_final.hook_normalized",
    with a layer and layer_type "ln1" or "ln2" the block's norm ("blocks.3.ln2.hook_normalized"); a digit in the
    name is the layer ("k6", "pre5"); a full name comes back as given. A name TransformerLens has but vocablens
    does not hook ("rot_q", "mid", ...) is a ValueError naming it. layer must be >= 0 (the cache, which knows
    n_layers, reads cache["resid_post", -1])."""
    if not isinstance(name, str):
        raise TypeError("get_act_name(): name must be a str, not " + type(name).__name__)
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, (int, str))):
        raise TypeError("get_act_name(): layer must be an int, not " + type(layer).__name__)
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError("get_act_name(): layer_type must be a str, not " + type(layer_type).__name__)
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        full = name
    else:
        m = re.match(r"([a-z_]*[a-z])(\d+)(.*)$", name)
        if m is not None and layer is None:
            name, layer, layer_type = m.group(1), m.group(2), m.group(3) or layer_type
        if isinstance(layer, str):
            if not layer.isdigit():
                raise ValueError("get_act_name(): layer {!r} is not a layer number".format(layer))
            layer = int(layer)
        if layer is not None and layer < 0:
            raise ValueError("get_act_name(): layer {} is negative; get_act_name has no model to count from "
                             "(cache[{!r}, {}] resolves it)".format(layer, name, layer))
        name = _ALIASES.get(name, name)
        if name in _ATTN:
            layer_type = "attn"
        elif name in _MLP:
            layer_type = "mlp"
        elif layer_type in _LAYER_TYPES:
            layer_type = _LAYER_TYPES[layer_type]
        full = "blocks.{}.".format(layer) if layer is not None else ""
        if layer_type:
            full += layer_type + "."
        full += "hook_" + name
        if name in _NORM and layer is None:
            full = "ln_final." + full
    if not _supported(full):
        if full in _BLOCK_POINTS:
            raise ValueError("get_act_name(): '{}' needs a layer, e.g. get_act_name({!r}, 0)".format(full, name))
        raise ValueError("get_act_name(): '{}' is not a hook point of vocablens models (they have {} and "
                         "blocks.L.{{{}}})".format(full, ", ".join(_MODEL_POINTS), ", ".join(_BLOCK_POINTS)))
    return full
