"""SAEs and transcoders (docs/features.md): load_sae(path) and feature_logits(model, sae, top_k=...).

    sae = vocablens.load_sae("saes/res-1")      # SAELens / Gemma Scope / Llama Scope / circuit-tracer
    f = sae.encode(x)                            # torch.Tensor [..., d_in] -> [..., d_sae]
    xhat = sae.forward(x)                        # decode(encode(x), x)
    r = vocablens.feature_logits(model, sae, top_k=8)
    r.arrays["top_ids"]                          # [d_sae, 8] token ids each feature promotes
"""
from . import _vocablens as _core
from ._analyses import _DECLARED

Sae = _core.Sae


def load_sae(path, *, hook_name=None):
    """Reads an SAE or transcoder: an SAELens folder (cfg.json + sae_weights.safetensors), Gemma Scope
    params.npz / params.safetensors, a Llama Scope folder (hyperparams.json + checkpoints/final.safetensors)
    or a circuit-tracer layer_N.safetensors. hook_name overrides the hook the file names (or the one
    guessed from its path). Returns a vocablens.Sae: encode / decode / forward on torch tensors, W_enc,
    W_dec, b_enc, b_dec, threshold as tensors (stored dtype kept), cfg (dict), hook_name."""
    return _core.load_sae(str(path), hook_name or "")


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


# The feature analyses are declared in the library (analyses/features_entry.cpp); their functions, with the real
# defaults in the signature, are made from the declaration (vocablens._analyses).
feature_logits = _DECLARED["feature_logits"]
feature_lens = _DECLARED["feature_lens"]
feature_corpus = _DECLARED["feature_corpus"]


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
