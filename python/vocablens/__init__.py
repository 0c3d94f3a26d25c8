"""vocablens from Python: read a transformer's internals in vocabulary space.

    import vocablens
    model = vocablens.load_model("../shared/fixtures/gpt2-tiny")
    ids = model.tokenize("The Eiffel Tower is in the city of")
    logits, cache = model.run_with_cache(ids)                       # cache: ActivationCache, 23 hook kinds
    logits = model.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_z", lambda z, hook: z.zero_())])
    model.cfg.n_layers, model.W_O[0]    # TransformerLens's names (docs/python.md, "Coming from TransformerLens")
    lens = vocablens.lens(model, "The Eiffel Tower is in the city of", top_k=5)
    lens.arrays["top_probs"]          # numpy [layers, T, k]
    lens.tables["top_k"]              # pandas DataFrame
    lens.save("runs/eiffel")          # the run directory `vocablens lens --out runs/eiffel` writes

The numbers are the C++ library's (the same code the `vocablens` CLI runs); tensors are torch.Tensor
objects sharing memory with the loaded model. See docs/python.md.
"""
import os as _os


def _omp_passive():
    """OpenMP's idle threads sleep instead of spinning (as the CLI arranges, src/cli/blas_kernels.hpp): on a busy
    machine a spinning thread burns the time its descheduled partner needs (2 threads: 4x the CPU of one). libgomp
    reads OMP_WAIT_POLICY once, when it loads: this takes effect when vocablens is imported before torch or
    numpy's OpenMP users; otherwise set OMP_WAIT_POLICY=PASSIVE before starting Python (docs/python.md)."""
    if "OMP_WAIT_POLICY" in _os.environ or "GOMP_SPINCOUNT" in _os.environ:
        return
    try:
        with open("/proc/self/maps") as f:
            if "libgomp" in f.read():
                return  # already loaded: too late to matter, and the user's environment stays as it is
    except OSError:
        return
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


_omp_passive()
from ._interpreter import check as _check_interpreter  # noqa: E402

_check_interpreter()  # a clear ImportError naming the right interpreter, before the extension fails to load
from . import _vocablens as _core  # noqa: E402
from ._vocablens import Error, FormatError, UsageError, Tokenizer, Model, __version__  # noqa: E402
from ._guard import guard_class as _guard_class, guard_function as _guard_function  # noqa: E402

# A C++ method given a wrong type raises one line naming the argument, not pybind's list of overloads.
for _cls, _label in ((Model, "Model"), (Tokenizer, "Tokenizer"), (_core.Sae, "Sae")):
    _guard_class(_cls, _label)
set_dtype = _guard_function(_core.set_dtype, "set_dtype")
get_dtype = _guard_function(_core.get_dtype, "get_dtype")
set_compute = _guard_function(_core.set_compute, "set_compute")
get_compute = _guard_function(_core.get_compute, "get_compute")
from ._result import Result, load_results, report  # noqa: E402
from ._model import load_model  # noqa: E402
from ._cache import ActivationCache, load_cache  # noqa: E402
from ._hooks import HookPoint, install as _install_hooks  # noqa: E402
from ._tokens import install as _install_tokens  # noqa: E402
from ._tl import install as _install_tl  # noqa: E402

if _os.environ.get("VOCABLENS_THREADS"):
    # The user's thread count, as the CLI honours it (a bad value is said on stderr and ignored); unset, torch's
    # own default stands (docs/python.md).
    _core._init_runtime()
_install_hooks(Model)
_install_tokens(Model)
_install_tl(Model)
from ._analyses import run, analyses, estimate, Estimate, _install as _install_analyses  # noqa: E402
from ._sae import Sae, load_sae, TranscoderSet, load_transcoders, splice_hook, steer_feature_hook  # noqa: E402
from ._graph import Graph  # noqa: E402
from . import utils  # noqa: E402  TransformerLens's utils.get_act_name

__all__ = ["load_model", "set_dtype", "get_dtype", "set_compute", "get_compute", "Model", "Tokenizer", "Result",
           "load_results", "report", "run", "estimate", "Estimate", "analyses", "Graph", "Error", "FormatError",
           "UsageError", "__version__", "ActivationCache", "load_cache", "HookPoint", "Sae", "load_sae",
           "TranscoderSet", "load_transcoders", "splice_hook", "steer_feature_hook", "utils"]
# Every declared analysis (vocablens.analyses()) as vocablens.X, in __all__ and as Model.X, with what Python adds
# on top of a declaration (vocablens.compare, vocablens.attribution_graph): made from the library's registry.
_install_analyses(globals())
