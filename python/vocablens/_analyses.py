"""The analyses, as functions of a model (and as methods of vocablens.Model).

Each one calls the C++ analysis the CLI command of the same name calls and returns a Result whose
save(dir) writes the same run directory. Every function is made from the library's declaration of its
options (`vocablens schema`), so its signature shows the real defaults. Unknown keywords, wrong types and impossible values raise TypeError / ValueError naming
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
    if name not in _DECLARED:
        raise ValueError("no analysis named '{}' (known: {})".format(name, ", ".join(sorted(_DECLARED))))
    return _DECLARED[name](model, **kwargs)


def analyses():
    """[(name, description)] of every analysis the module offers."""
    return [(s["name"], s["summary"]) for s in _core.analyses_schema()]


# ---- the declared analyses: one function each, made from the library's declaration --------------------------
# (vocablens schema; include/vocablens/options.hpp). The signature carries the real defaults, so help() and
# inspect.signature() show them; the .pyi stubs (vocablens/__init__.pyi) are written from the same schema.

def _plain(fn, arg, v):
    """A keyword's value as the declaration's JSON types: integer tensors and arrays of ids become lists
    ([T] or [1, T]); floating ones are a TypeError naming the argument."""
    if hasattr(v, "tolist") and hasattr(v, "dtype") and not isinstance(v, (str, bytes)):
        kind = str(v.dtype)
        if "int" not in kind or "float" in kind:
            raise TypeError("{}(): {} must hold integers (token ids), not {}".format(fn, arg, kind))
        shape = tuple(v.shape)
        if len(shape) == 2 and shape[0] == 1:
            v = v.reshape(-1)
        elif len(shape) > 1:
            raise ValueError("{}(): {} must be 1-D token ids or [1, T], not shape {}".format(fn, arg, list(shape)))
        return v.tolist()
    if isinstance(v, range):
        return list(v)
    if isinstance(v, (tuple, set, frozenset)):
        return [_plain(fn, arg, x) for x in v]
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    return v


def _declared(spec):
    import inspect
    name = spec["name"]
    params = [inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for o in spec["options"]:
        if o["required"]:
            params.append(inspect.Parameter(o["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD))
    for o in spec["options"]:
        if not o["required"]:
            params.append(inspect.Parameter(o["name"], inspect.Parameter.KEYWORD_ONLY, default=o["default"]))
    params.append(inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=None))
    sig = inspect.Signature(params)
    # Model, Sae and Matrix options take Python objects (a vocablens.Model, a vocablens.Sae, a tensor) as they are.
    objects = {o["name"] for o in spec["options"] if o["type"] in ("model", "sae", "matrix")}

    def f(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError("{}(): {}".format(name, e)) from None
        a = bound.arguments
        model = a.pop("model")
        progress = a.pop("progress", None)
        if not isinstance(model, Model):
            raise TypeError("{}(): model must be a vocablens.Model (from vocablens.load_model), not {}".format(
                name, type(model).__name__))
        kw = {k: v if k in objects else _plain(name, k, v) for k, v in a.items()}
        return Result(_core.run_declared(name, model, kw, progress))

    lines = [spec["summary"] + " (`vocablens {}`).".format(spec["command"]) if spec["command"] else spec["summary"], ""]
    for o in spec["options"]:
        extra = " One of: " + ", ".join(o["choices"]) + "." if o.get("choices") else ""
        lines.append("{} ({}{}): {}.{}".format(o["name"], o["type"], ", required" if o["required"] else "",
                                              o["help"], extra))
    lines.append("progress: None (a bar for calls over about a second), False, True, or f(done, total).")
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "\n".join(lines)
    f.__signature__ = sig
    f.__module__ = "vocablens"
    return f


# name -> the public function of every declared analysis, filled by _install() (wrappers applied).
_DECLARED = {}


class Estimate(dict):
    """vocablens.estimate()'s answer, a dict: analysis, what, total_bytes, items and phases ([(what, bytes)]: the
    items are resident together, the largest phase counts), available_bytes and fits (None when the machine does
    not say), reduce (how to need less; when it would not fit, what would: graph's "give max_feature_nodes=N or
    less"), reduce_within (None, or a function limit_bytes -> that advice for another limit), note, and computed
    (what the estimate itself ran: "" for most, graph's forward and encoders). Printed, it is the table the CLI's
    --dry-run prints."""

    def __repr__(self):
        lines = ["{}: expected peak memory".format(self["what"]), self["table"].rstrip("\n")]
        if self["available_bytes"] is not None:
            lines.append("available now: {:.1f} MiB — {}".format(
                self["available_bytes"] / 1048576.0, "it fits" if self["fits"] else "it would NOT fit: " + self["reduce"]))
        if self["note"]:
            lines.append(self["note"])
        if self.get("computed"):
            lines.append("(the estimate computed: {})".format(self["computed"]))
        return "\n".join(lines)


def estimate(name, model, *args, **kwargs):
    """The peak memory the analysis `name` would need with these arguments, from shapes and before any work:
    the figure the CLI's --dry-run prints and refuses a run by, from the same declaration. Arguments as for the
    analysis itself, e.g. estimate("lens", m, "The Eiffel Tower is in", two_pass=True). Returns an Estimate."""
    if not isinstance(name, str):
        raise TypeError("estimate(): name must be a str, not " + type(name).__name__)
    if name not in _DECLARED:
        raise ValueError("no analysis named '{}' (known: {})".format(name, ", ".join(sorted(_DECLARED))))
    sig = _DECLARED[name].__signature__
    try:
        bound = sig.bind(model, *args, **kwargs)
    except TypeError as e:
        raise TypeError("estimate({!r}): {}".format(name, e)) from None
    a = bound.arguments
    model = a.pop("model")
    a.pop("progress", None)
    if not isinstance(model, Model):
        raise TypeError("estimate(): model must be a vocablens.Model (from vocablens.load_model), not {}".format(
            type(model).__name__))
    objects = {o["name"] for s in _core.analyses_schema() if s["name"] == name for o in s["options"]
               if o["type"] in ("model", "sae", "matrix")}
    kw = {k: v if k in objects else _plain(name, k, v) for k, v in a.items()}
    return Estimate(_core.estimate_declared(name, model, kw))



# ---- registration: one _install() makes every declared analysis public --------------------------------------
# The registry's schema is the list; nothing here names an analysis. What Python adds on top of a declaration
# registers itself, once, against the name it wraps (a decorator on the wrapper), and _install() applies it:
#   wraps(name)       a wrapper of the declared function (lens_batch's list of prompts, patch's warning), with
#                     the stub types it widens;
#   derived(name)     another public function made from the declared one (vocablens.attribution_graph);
#   public(stub)      a public function of its own (vocablens.compare: no model to run on).
# Each gives the stub writer (vocablens/_stubs.py) a function stub(spec, signature) -> its line.
_WRAPS = {}      # analysis -> [(wrapper, {option: stub type})]
_DERIVED = []    # (analysis, make, stub(spec, signature) -> line)
_PUBLIC = []     # (function, stub(signature) -> line)


def wraps(name, stub_types=None):
    """Decorator: `wrapper(declared) -> function` becomes analysis `name`'s public function."""
    def deco(wrapper):
        _WRAPS.setdefault(name, []).append((wrapper, dict(stub_types or {})))
        return wrapper
    return deco


def derived(name, stub):
    """Decorator: `make(declared) -> function` is one more public function, made from analysis `name`'s."""
    def deco(make):
        _DERIVED.append((name, make, stub))
        return make
    return deco


def public(stub):
    """Decorator: the function is public in vocablens (and __all__); stub(signature) writes its stub line."""
    def deco(fn):
        _PUBLIC.append((fn, stub))
        return fn
    return deco


def stub_types(name):
    """{option: stub type} that analysis `name`'s wrappers widen (vocablens/_stubs.py)."""
    out = {}
    for _, types in _WRAPS.get(name, ()):
        out.update(types)
    return out


def extra_stubs(schema, signature):
    """The stub lines of the derived and public functions, written with the stub writer's `signature`."""
    by_name = {s["name"]: s for s in schema}
    return ([stub(by_name[name], signature) for name, _, stub in _DERIVED if name in by_name]
            + [stub(signature) for _, stub in _PUBLIC])


def _method(fn):
    def m(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    m.__name__ = m.__qualname__ = fn.__name__
    m.__doc__ = fn.__doc__
    m.__signature__ = fn.__signature__   # a bound method drops the first parameter, the model
    return m


def _install(namespace):
    """Makes every declared analysis public: the module function vocablens.X (its wrappers applied), its name in
    __all__, and the method Model.X. Every registered analysis is a method: its run function is a model's (the
    library's AnalysisRequest::model), which is the first argument of its Python function. Called once, by
    vocablens/__init__.py, after the modules that register wrappers are imported."""
    names = namespace["__all__"]
    for spec in _core.analyses_schema():
        name = spec["name"]
        fn = _declared(spec)
        for wrapper, _ in _WRAPS.get(name, ()):
            fn = wrapper(fn)
            fn.__name__ = fn.__qualname__ = name
            fn.__module__ = "vocablens"
        if name in namespace or (hasattr(Model, name) and name not in _DECLARED):
            raise ImportError("vocablens: the declared analysis '{}' clashes with a name the package already "
                              "has".format(name))
        _DECLARED[name] = fn
        namespace[name] = fn
        names.append(name)
        setattr(Model, name, _method(fn))
    for name, make, _ in _DERIVED:
        fn = make(_DECLARED[name])
        namespace[fn.__name__] = fn
        names.append(fn.__name__)
    for fn, _ in _PUBLIC:
        namespace[fn.__name__] = fn
        names.append(fn.__name__)

@wraps("lens_batch", {"prompts": "Union[str, os.PathLike, Sequence[Union[str, Dict[str, str]]]]"})
def _prompt_list(declared):
    """lens_batch reads a prompts file (its declaration); from Python the prompts may also be a list of str or of
    {"prompt": str, "target": str} dicts, written for the call to a temporary JSON Lines file (settings'
    prompts_file names it)."""
    import json
    import tempfile

    def f(model, prompts, *args, **kwargs):
        if not isinstance(prompts, (list, tuple)):
            return declared(model, _plain("lens_batch", "prompts", prompts), *args, **kwargs)
        lines = []
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                p = {"prompt": p}
            elif not isinstance(p, dict):
                raise TypeError("lens_batch(): prompts must hold str or dicts, not {} (item {})".format(
                    type(p).__name__, i))
            if not isinstance(p.get("prompt"), str) or not p["prompt"]:
                raise ValueError("lens_batch(): prompts item {} has no non-empty str \"prompt\"".format(i))
            if p.get("target") is not None and not isinstance(p["target"], str):
                raise ValueError("lens_batch(): prompts item {}: \"target\" must be a str".format(i))
            lines.append(json.dumps({k: v for k, v in p.items() if k in ("prompt", "target") and v is not None}))
        if not lines:
            raise ValueError("lens_batch(): prompts is empty")
        with tempfile.TemporaryDirectory(prefix="vocablens-prompts-") as d:
            path = os.path.join(d, "prompts.jsonl")
            with open(path, "w", encoding="utf-8") as out:
                out.write("\n".join(lines) + "\n")
            return declared(model, path, *args, **kwargs)

    f.__name__ = f.__qualname__ = declared.__name__
    f.__doc__ = declared.__doc__ + "\nprompts may also be a list of str or of {\"prompt\", \"target\"} dicts."
    f.__signature__ = declared.__signature__
    f.__module__ = "vocablens"
    return f



# `vocablens patch` warns below this |clean - corrupt| (src/cli/cmd_patch.cpp, kMinMeaningfulDiff): every cell is
# divided by the difference, so the table is mostly noise. tests/python/test_tl_compat.py checks both warn alike.
PATCH_MIN_DIFF = 0.25


class PatchWarning(UserWarning):
    """patch(): the clean and corrupt runs barely differ in the metric."""


@wraps("patch")
def _warned_patch(declared):
    import warnings

    def f(*args, **kwargs):
        r = declared(*args, **kwargs)
        s = r.summary
        diff = s["clean_metric"] - s["corrupt_metric"]
        if not s.get("degenerate") and abs(diff) < PATCH_MIN_DIFF:
            warnings.warn("patch(): the clean and corrupt runs differ by only {:.4f} in the metric (clean {:.4f}, "
                          "corrupt {:.4f}); every cell is divided by this difference, so the table mostly shows "
                          "noise. Choose a corruption that changes the answer more (|clean - corrupt| >= {:g})".format(
                              diff, s["clean_metric"], s["corrupt_metric"], PATCH_MIN_DIFF), PatchWarning, stacklevel=2)
        return r

    f.__name__ = f.__qualname__ = declared.__name__
    f.__doc__ = declared.__doc__ + ("\nWarns (PatchWarning) when |clean - corrupt| < {:g}, as `vocablens patch` "
                                    "does.".format(PATCH_MIN_DIFF))
    f.__signature__ = declared.__signature__
    f.__module__ = "vocablens"
    return f


def _compare():
    """vocablens.compare(a, b, ...): two lens runs, no model; its keywords are made from compare's declaration."""
    import inspect
    spec = _core.compare_schema()
    params = [inspect.Parameter("a", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("b", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(o["name"], inspect.Parameter.KEYWORD_ONLY, default=o["default"]) for o in spec["options"]]
    sig = inspect.Signature(params)

    def core(x, arg):
        if isinstance(x, Result):
            return x._core
        if isinstance(x, (str, os.PathLike)):
            return os.fspath(x)
        raise TypeError("compare(): {} must be a vocablens.Result (from lens()) or a run directory, not {}".format(
            arg, type(x).__name__))

    def compare(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError("compare(): {}".format(e)) from None
        o = bound.arguments
        a, b = o.pop("a"), o.pop("b")
        return Result(_core.compare_runs(core(a, "a"), core(b, "b"), o))

    lines = ["Two logit-lens runs side by side (`vocablens compare`): a, b are lens() Results or run directories.",
             "KL needs both made with save_probs=True. Result kind \"lens_compare\".", ""]
    for o in spec["options"]:
        extra = " One of: " + ", ".join(o["choices"]) + "." if o.get("choices") else ""
        lines.append("{} ({}): {}.{}".format(o["name"], o["type"], o["help"], extra))
    compare.__doc__ = "\n".join(lines)
    compare.__signature__ = sig
    compare.__module__ = "vocablens"
    return compare


def _compare_stub(signature):
    run = "Union[Result, str, os.PathLike]"
    spec = dict(_core.compare_schema(), name="compare")
    return signature(spec, first=("a: " + run, "b: " + run), progress=False)


public(_compare_stub)(_compare())

