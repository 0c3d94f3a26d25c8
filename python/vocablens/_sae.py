"""SAEs and transcoders (docs/features.md): load_sae(path) and feature_logits(model, sae, top_k=...).

    sae = vocablens.load_sae("saes/res-1")      # SAELens / Gemma Scope / Llama Scope / circuit-tracer
    f = sae.encode(x)                            # torch.Tensor [..., d_in] -> [..., d_sae]
    xhat = sae.forward(x)                        # decode(encode(x), x)
    r = vocablens.feature_logits(model, sae, top_k=10)
    r.arrays["top_ids"]                          # [d_sae, 10] token ids each feature promotes
"""
from . import _vocablens as _core
from ._analyses import run

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


def feature_logits(model, sae, *, top_k=None, features=None, bottom=None, final_norm=None, progress=None):
    """Logit weights of SAE features (`vocablens features`): for every feature (or `features`, e.g. "0,5-9"
    or a list), the top_k=10 tokens its decoder direction W_dec[f] promotes through W_U and, with
    bottom=True (default), the top_k it suppresses; final_norm=True scales each direction by the final
    norm's weight first. Exact and streamed (never d_sae × V at once). Result kind "features": arrays
    top_ids, top_values, bottom_ids, bottom_values [N, top_k], feature_ids, decoder_norms; table top_k."""
    if not isinstance(sae, Sae):
        raise TypeError("feature_logits(): sae must be a vocablens.Sae (from vocablens.load_sae), not "
                        + type(sae).__name__)
    return run("feature_logits", model, sae=sae, top_k=top_k, features=features, bottom=bottom,
               final_norm=final_norm, progress=progress)


def feature_lens(model, sae, prompt, *, top_features=None, top_k=None, final_norm=None):
    """Feature lens (`vocablens features --prompt`): runs the model on prompt (text or ids), encodes the
    activation at sae.hook_name and lists, per position, the top_features=5 strongest features with the
    top_k=5 tokens each promotes. Result kind "feature_lens": arrays ids, l0 [T], top_features,
    top_activations [T, n], shown_features, shown_token_ids; table top_features."""
    if not isinstance(sae, Sae):
        raise TypeError("feature_lens(): sae must be a vocablens.Sae (from vocablens.load_sae), not "
                        + type(sae).__name__)
    return run("feature_lens", model, sae=sae, prompt=prompt, top_features=top_features, top_k=top_k,
               final_norm=final_norm)


def feature_corpus(model, sae, path, *, window=None, max_tokens=None, contexts=None, ce=None, progress=None):
    """An SAE over a text file (`vocablens features --corpus`): streamed in windows of the model's context
    (window), per feature the firing density, a 40-bin log-spaced activation histogram and the contexts=5
    strongest activations; over the corpus L0, MSE, explained variance and (ce=True, default) SAELens's CE
    loss recovered with the reconstruction spliced in vs the hook zeroed. max_tokens bounds the scored
    positions. Result kind "feature_corpus" (docs/results.md)."""
    if not isinstance(sae, Sae):
        raise TypeError("feature_corpus(): sae must be a vocablens.Sae (from vocablens.load_sae), not "
                        + type(sae).__name__)
    return run("feature_corpus", model, sae=sae, path=str(path), window=window, max_tokens=max_tokens,
               contexts=contexts, ce=ce, progress=progress)


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
