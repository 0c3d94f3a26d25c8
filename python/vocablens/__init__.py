"""vocablens from Python: read a transformer's internals in vocabulary space.

    import vocablens
    model = vocablens.load_model("../shared/fixtures/gpt2-tiny")
    ids = model.tokenize("The Eiffel Tower is in the city of")
    logits, cache = model.run_with_cache(ids, names=["blocks.0.hook_resid_post"])
    lens = vocablens.lens(model, "The Eiffel Tower is in the city of", top_k=5)
    lens.arrays["top_probs"]          # numpy [layers, T, k]
    lens.tables["top_k"]              # pandas DataFrame
    lens.save("runs/eiffel")          # the run directory `vocablens lens --out runs/eiffel` writes

The numbers are the C++ library's (the same code the `vocablens` CLI runs); tensors are torch.Tensor
objects sharing memory with the loaded model. See docs/python.md.
"""
from . import _vocablens as _core
from ._vocablens import Error, FormatError, UsageError, Tokenizer, Model, __version__
from ._result import Result, load_results, report
from ._model import load_model
from ._analyses import (run, analyses, lens, lens_corpus, project, heads, neurons, spectrum, neighbours, knn,
                        positions, patch, ablate, attribute, steer, tuned_lens_eval, lens_batch, compare_embeddings,
                        compare)
from ._sae import Sae, load_sae, feature_logits, feature_lens, splice_hook

__all__ = ["load_model", "Model", "Tokenizer", "Result", "load_results", "report", "run", "analyses", "lens",
           "lens_corpus", "project", "heads", "neurons", "spectrum", "neighbours", "knn", "positions", "patch", "ablate",
           "attribute", "steer", "tuned_lens_eval", "lens_batch", "compare_embeddings", "compare", "Error",
           "FormatError", "UsageError", "__version__", "Sae", "load_sae", "feature_logits", "feature_lens", "splice_hook"]
