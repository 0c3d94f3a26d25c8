"""SAEs and transcoders (docs/features.md): load_sae(path) and feature_logits(model, sae, top_k=...).

    sae = vocablens.load_sae("saes/res-1")      # SAELens / Gemma Scope / Llama Scope / circuit-tracer
    f = sae.encode(x)                            # torch.Tensor [..., d_in] -> [..., d_sae]
    xhat = sae(x)                                # = sae.forward(x) = decode(encode(x), x), as SAELens's forward
    sae.cfg.d_sae, sae.cfg.hook_name             # SAELens's field names as attributes (cfg is still a dict)
    r = vocablens.feature_logits(model, sae, top_k=8)
    r.arrays["top_ids"]                          # [d_sae, 8] token ids each feature promotes
"""
import os

from . import _vocablens as _core

Sae = _core.Sae
TranscoderSet = _core.TranscoderSet


class SaeConfig(dict):
    """sae.cfg: the file's configuration (a dict, as before) whose keys also read as attributes, with SAELens's
    fields as the loader resolved them: d_in, d_sae, d_out, hook_name (the one the SAE is used at: the file's,
    the one guessed from its path, or load_sae's hook_name=), architecture, apply_b_dec_to_input,
    normalize_activations, dtype (as stored), device."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError("sae.cfg has no field '{}' (it has: {})".format(
                name, ", ".join(sorted(self)))) from None


def _cfg(self):
    c = SaeConfig(self._cfg if isinstance(self._cfg, dict) else {})
    # What the SAE is used with wins over what the file said (a hook_name given to load_sae, a guessed one).
    c.update(d_in=self.d_in, d_sae=self.d_sae, d_out=self.d_out, hook_name=self.hook_name)
    for k, v in (("architecture", self.architecture), ("apply_b_dec_to_input", self.apply_b_dec_to_input),
                 ("normalize_activations", self.normalize_activations), ("dtype", self.stored_dtype),
                 ("device", "cpu")):
        c.setdefault(k, v)
    return c


Sae.cfg = property(_cfg, doc=SaeConfig.__doc__)
# SAELens's sae(x): the reconstruction, decode(encode(x)) (sae.forward).
Sae.__call__ = lambda self, x: self.forward(x)


def load_transcoders(path):
    """Reads a transcoder folder as circuit-tracer does (docs/features.md, "Transcoder sets"): config.yaml with
    model_kind transcoder_set (layer_{i}.safetensors or a transcoders: list) or cross_layer_transcoder
    (W_enc_{i} / W_dec_{i}.safetensors, mapped, never read whole). Returns a vocablens.TranscoderSet:
    encode(layer, x), decoder_rows(layer, feature) [n_outputs(layer), d_out], decode(block, features, x),
    layer(l) (a vocablens.Sae), input_hook(l) / output_hook(l) (the config's points under our names),
    check_fits(model)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("load_transcoders(): path must be a str or os.PathLike, not " + type(path).__name__)
    return _core.load_transcoders(os.fspath(path))


def load_sae(path, *, hook_name=None):
    """Reads an SAE or transcoder: an SAELens folder (cfg.json + sae_weights.safetensors), Gemma Scope
    params.npz / params.safetensors, a Llama Scope folder (hyperparams.json + checkpoints/final.safetensors)
    or a circuit-tracer layer_N.safetensors. hook_name overrides the hook the file names (or the one
    guessed from its path). Returns a vocablens.Sae: encode / decode / forward on torch tensors, W_enc,
    W_dec, b_enc, b_dec, threshold as tensors (stored dtype kept), cfg (a dict whose keys are also attributes:
    sae.cfg.d_sae), hook_name; sae(x) is sae.forward(x)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("load_sae(): path must be a str or os.PathLike, not " + type(path).__name__)
    if hook_name is not None and not isinstance(hook_name, str):
        raise TypeError("load_sae(): hook_name must be a str, not " + type(hook_name).__name__)
    return _core.load_sae(os.fspath(path), hook_name or "")


def splice_hook(sae, *, error_term=False):
    """(hook_name, fn) for a forward with hooks: fn(activation, *args) returns the SAE's reconstruction of the
    activation (with error_term=True, the reconstruction plus the SAE's error x - x̂, which leaves the
    forward unchanged while the features can be read or edited)."""
    if not sae.hook_name:
        raise ValueError("splice_hook(): this SAE names no hook point; load it with load_sae(path, hook_name=...)")

    def fn(activation, *args, **kwargs):
        xhat = sae.forward(activation)
        if error_term:
            return xhat + (activation - xhat.to(activation.dtype))
        return xhat.to(activation.dtype)

    return sae.hook_name, fn


def steer_feature_hook(sae, feature, scale=4.0):
    """(hook_name, fn) steering with a feature (`vocablens generate --steer-feature`): fn adds
    scale * W_dec[feature] to the activation at the point the SAE writes (a transcoder: its output hook).
    Use as model.run_with_hooks(ids, fwd_hooks=[steer_feature_hook(sae, 12, 8.0)]); a negative scale
    subtracts the direction."""
    name = sae.hook_name_out or sae.hook_name
    if not name:
        raise ValueError("steer_feature_hook(): this SAE names no hook point; load it with load_sae(path, hook_name=...)")
    if not 0 <= int(feature) < sae.d_sae:
        raise ValueError(f"steer_feature_hook(): feature {feature} is out of range (0..{sae.d_sae - 1})")
    direction = sae.W_dec[int(feature)].float() * float(scale)

    def fn(activation, *args, **kwargs):
        return activation + direction.reshape(activation.shape[2:]).to(activation.dtype)

    return name, fn
