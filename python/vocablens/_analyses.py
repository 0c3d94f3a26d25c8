"""The analyses, as functions of a model (and as methods of vocablens.Model).

Each one calls the C++ analysis the CLI command of the same name calls and returns a Result whose
save(dir) writes the same run directory. Keyword arguments left at None take the CLI's defaults (listed in
each docstring). Unknown keywords, wrong types and impossible values raise TypeError / ValueError naming
the argument; problems found by the library raise vocablens.UsageError / FormatError with its message.

progress: None (default) shows a tqdm bar when tqdm is installed, False shows nothing, True forces a bar
(a plain stderr line without tqdm), a callable is called as f(done, total). Ctrl-C stops the long
analyses (heads, neurons, lens_corpus) between steps with KeyboardInterrupt.
"""
import os

from . import _vocablens as _core
from ._model import Model
from ._result import Result


def run(name, model, **kwargs):
    """Runs the analysis `name` (see analyses()) with keyword options, e.g. run("lens", m, prompt="Hi")."""
    if not isinstance(name, str):
        raise TypeError("run(): name must be a str, not " + type(name).__name__)
    if not isinstance(model, Model):
        raise TypeError("{}(): model must be a vocablens.Model (from vocablens.load_model), not {}".format(
            name, type(model).__name__))
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return Result(_core.run(name, model, kwargs))


def analyses():
    """[(name, description)] of every analysis the module offers."""
    return _core.analyses()


def _call(name, model, loc):
    kw = {k: v for k, v in loc.items() if k != "model"}
    return run(name, model, **kw)


def lens(model, prompt, *, top_k=None, target=None, resid_mid=None, unembed=None, decoder_blocks=None, bos=None,
         tuned=None, save_probs=None):
    """Logit lens (`vocablens lens`). prompt: text or token ids. top_k=10, target: a token (str) or id
    (default: the next token), resid_mid=False, unembed="model"|"pinv", decoder_blocks=0, bos: None (the
    tokenizer's convention) / True / False, tuned: a tuned lens directory (`vocablens lens --tuned`),
    save_probs=False (keep log_probs [layers, T, V] for compare()'s KL).
    Result kind "logit_lens"."""
    return _call("lens", model, locals())


def lens_batch(model, prompts, *, top_k=None, resid_mid=None, unembed=None, decoder_blocks=None, bos=None, tuned=None):
    """Logit lens over many prompts (`vocablens lens --prompts`). prompts: a list of str or of
    {"prompt": str, "target": str} dicts, or the path of a prompts file (plain lines or JSON Lines). tuned: a
    tuned-lens directory (`lens --prompts --tuned`; settings["lens"] == "tuned"). Result kind
    "logit_lens_batch" (arrays with a prompt axis, table "by_layer")."""
    return _call("lens_batch", model, locals())


def compare_embeddings(model, model_b, *, matrix=None, k=None, moved=None, spectrum_k=None, spectra=None):
    """Two embedding spaces on their shared tokens (`vocablens compare-embeddings`): model is aligned onto
    model_b (another model, or a later checkpoint of one run). matrix="W_E"|"W_U", k=10, moved=50, spectrum_k=32,
    spectra=True. Result kind "compare_embeddings"."""
    return _call("compare_embeddings", model, locals())


def compare(a, b, *, align=None):
    """Two logit-lens runs side by side (`vocablens compare`): a, b are lens() Results or run directories.
    align: None (token counts must be equal) / "start" / "end". KL needs both made with save_probs=True.
    Result kind "lens_compare"."""
    def core(x, arg):
        if isinstance(x, Result):
            return x._core
        if isinstance(x, (str, os.PathLike)):
            return os.fspath(x)
        raise TypeError("compare(): {} must be a vocablens.Result (from lens()) or a run directory, not {}".format(
            arg, type(x).__name__))
    if align is not None and not isinstance(align, str):
        raise TypeError("compare(): align must be None, \"start\" or \"end\", not " + type(align).__name__)
    return Result(_core.compare_runs(core(a, "a"), core(b, "b"), align or "none"))


def lens_corpus(model, path, *, window=None, max_tokens=None, resid_mid=None, unembed=None, decoder_blocks=None,
                progress=None, tuned=None):
    """Logit lens statistics per layer over a text file (`vocablens lens --corpus`). window=n_ctx,
    max_tokens=0 (all). Result kind "logit_lens_corpus"."""
    return _call("lens_corpus", model, locals())


def tuned_lens_eval(model, path, tuned, *, window=None, max_tokens=None, progress=None):
    """Logit lens and tuned lens on held-out text (`vocablens tuned-lens eval`): per-layer cross-entropy,
    entropy and KL in bits per byte, KL by window position. Result kind "tuned_lens_eval"."""
    return _call("tuned_lens_eval", model, locals())


def project(model, prompt, *, hook=None, layer=None, top_k=None, positions=None, final_norm=None, read=None,
            inverse=None, pinv_rtol=None, alpha_only=None, allow=None, bos=None):
    """Hidden states projected to tokens (`vocablens project`). hook="resid_post" (or "resid_mid.2",
    "final_norm", ...), layer=-1 (all), top_k=10, positions=all, final_norm=False, read=False,
    inverse="pinv". Result kind "projection"."""
    return _call("project", model, locals())


def heads(model, *, layers=None, heads=None, kind=None, top_k=None, tokens=None, per_token_k=None, inverse=None,
          pinv_rtol=None, drop_same_token=None, drop_same_word=None, alpha_only=None, allow=None, spectra=None,
          prune=None, progress=None):
    """Attention heads' OV / QK circuits in vocabulary space (`vocablens heads`). layers/heads: int, list or
    "0,2-3" (default all), kind="both"|"ov"|"qk", top_k=50, tokens: per-token lists for these tokens,
    inverse="pinv"|"transpose"|"embed". Result kind "heads"."""
    return _call("heads", model, locals())


def neurons(model, layer, *, neurons=None, top_k=None, inverse=None, pinv_rtol=None, keys=None, gates=None,
            values=None, bottom=None, alpha_only=None, allow=None, block=None, progress=None):
    """MLP neurons' keys, gates and values in vocabulary space (`vocablens neurons`). neurons: default all,
    top_k=30; block=256 neurons per step (progress and Ctrl-C between steps). Result kind "neurons"."""
    return _call("neurons", model, locals())


def spectrum(model, *, matrix=None, k=None, method=None, ncv=None, loadings=None, left_vectors=None,
             anisotropy=None, remove_top=None):
    """Singular spectrum, PCA, effective rank and anisotropy (`vocablens spectrum`). matrix="W_E" (or "W_U",
    "W_pos", "W_in.L", "W_out.L", a .npy path, or a 2-D torch.Tensor), k=32, method="auto". Result kind
    "spectrum"."""
    return _call("spectrum", model, locals())


def neighbours(model, query, *, k=None, space=None, matrix=None, compose=None, raw=None, include_inputs=None,
               prefix_space=None):
    """Nearest tokens by cosine to a token, word or expression such as "king - man + woman"
    (`vocablens neighbours`). k=20, space="E"|"E+", matrix="W_E"|"W_U", compose="mean". Result kind
    "neighbours"."""
    return _call("neighbours", model, locals())


def knn(model, *, k=None, space=None, matrix=None, block=None, edges=None):
    """Exact k-NN graph of the vocabulary (`vocablens knn`). k=10. Result kind "knn"."""
    return _call("knn", model, locals())


def positions(model, *, kind=None, max_positions=None, k=None, components=None):
    """Geometry of the positional encoding (`vocablens positions`). kind="auto"|"learned"|"sinusoidal"|
    "rotary". Result kind "positions"."""
    return _call("positions", model, locals())


def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    m.__name__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


for _f in (lens, lens_corpus, project, heads, neurons, spectrum, neighbours, knn, positions, lens_batch,
           compare_embeddings):
    setattr(Model, _f.__name__, _method(_f))


# ---- interventions (issue #22, docs/interventions.md) ----

def patch(model, clean, corrupt, target, *, wrong=None, over=None, position=None, bos=None):
    """Activation patching (`vocablens patch`): each activation of the clean run patched into the corrupted
    run; the restored metric (logit[target] - logit[wrong]) normalised so 0 = corrupted, 1 = clean.
    clean/corrupt: text or ids of the same length; over="resid"|"attn"|"mlp"|"heads"; position=-1 (last).
    Result kind "activation_patching"."""
    return _call("patch", model, locals())


def ablate(model, prompt, *, head=None, neuron=None, resid=None, hook=None, mode=None, target=None,
           position=None, top_k=None, bos=None):
    """Ablation (`vocablens ablate`): head="L.H", neuron="L.N", resid="L.P" or hook=<hook name> (each a str or
    a list of them), mode="zero"|"mean"; predictions before and after at `position` (-1: last), target
    followed (default: the unablated top-1), top_k=10. Result kind "ablation"."""
    return _call("ablate", model, locals())


def attribute(model, prompt, target, *, wrong=None, position=None, bos=None):
    """Direct logit attribution (`vocablens attribute`): logit[target] (- logit[wrong]) at `position` (-1:
    last) split into embedding, every head, every MLP and the biases, final norm frozen at this run's scale.
    Result kind "logit_attribution"."""
    return _call("attribute", model, locals())


def steer(model, prompt, plus, minus, *, layer=None, scale=None, steps=None, bos=None):
    """Steering (`vocablens generate --steer PLUS-MINUS`): greedy generation of `steps` (20) tokens with
    scale (4.0) * (W_E[plus] - W_E[minus]) added to blocks.<layer>.hook_resid_pre (layer: n_layers // 2), and
    the same without steering. Result kind "steering": summary steered_ids/plain_ids (and texts)."""
    return _call("steer", model, locals())


for _f in (patch, ablate, attribute, steer):
    setattr(Model, _f.__name__, _method(_f))
