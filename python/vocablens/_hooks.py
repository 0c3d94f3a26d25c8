"""Hooks from Python, with TransformerLens's names and semantics (docs/python.md, "Hooks").

    def zero_head(z, hook):              # z: [batch, pos, head, d_head]
        z[:, :, 3] = 0                   # edit in place ...
    def steer(resid, hook):
        return resid + vec               # ... or return a replacement of the same shape and dtype
    logits = model.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_z", zero_head),
                                                  (lambda n: n.endswith("hook_resid_pre"), steer)])
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", steer)]):
        logits, cache = model.run_with_cache(ids)        # hooks apply to every call inside

Every call runs one C++ forward pass (vocablens._vocablens._run_hooked) with the GIL released; each Python
hook takes the GIL only while it runs. The activation a hook receives shares memory with the pass (no copy).

Hooks entered with model.hooks(...) or model.add_hook(...) belong to the thread that entered them: a forward
in another thread on the same model does not see them (a research result must not depend on what another
thread happens to be doing).
"""
import contextlib
import itertools
import threading

import torch

from . import _vocablens as _core
from ._cache import ActivationCache
from ._tokens import texts as _texts, to_tokens

_RETURN_TYPES = ("logits", "loss", "both", None)


class HookPoint:
    """What a hook function receives as `hook`: the point's TransformerLens name, its layer, and `ctx`, a
    dict the function may use to keep state during one call. The values of model.hook_dict are HookPoints
    too, with TransformerLens's add_hook(fn) / remove_hooks() for their point."""

    __slots__ = ("name", "ctx", "_model")

    def __init__(self, name, model=None):
        self.name = name
        self.ctx = {}
        self._model = model

    def layer(self):
        """The block index of a blocks.L.* point; None for hook_embed, hook_pos_embed, ln_final.hook_normalized."""
        parts = self.name.split(".")
        if parts[0] == "blocks":
            return int(parts[1])
        return None

    def _owner(self, what):
        if self._model is None:
            raise ValueError("HookPoint.{}(): this hook point is a call's argument; use model.hook_dict[{!r}]".format(
                what, self.name))
        return self._model

    def add_hook(self, hook, dir="fwd", is_permanent=False, level=None, prepend=False):
        """model.add_hook(this point's name, hook, ...)."""
        add_hook(self._owner("add_hook"), self.name, hook, dir=dir, is_permanent=is_permanent, level=level,
                 prepend=prepend)

    def remove_hooks(self, dir="fwd", including_permanent=False, level=None):
        """Removes this thread's hooks on this point (dir "fwd", "bwd" or "both"; permanent ones only with
        including_permanent=True)."""
        _check_dir(dir, "remove_hooks", both=True)
        _remove(self._owner("remove_hooks"), dir, including_permanent, level, name=self.name)

    def __repr__(self):
        return "<vocablens.HookPoint {}>".format(self.name)


def _fn_name(fn):
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _shape(t):
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _wrap(fn, hook):
    """The callable the C++ HookFn calls: runs fn(act, hook=hook) and checks what it returns."""

    def call(act):
        r = fn(act, hook=hook)
        if r is None or r is act:
            return None
        if not isinstance(r, torch.Tensor):
            raise TypeError("hook {} ({}) returned {}; a hook returns None (after editing the activation in "
                            "place) or a torch.Tensor".format(hook.name, _fn_name(fn), type(r).__name__))
        if r.shape != act.shape or r.dtype != act.dtype or r.device != act.device:
            raise ValueError("hook {} ({}) returned a tensor of shape {} {} on {}; the activation is {} {} on {}".format(
                hook.name, _fn_name(fn), _shape(r), str(r.dtype).replace("torch.", ""), r.device, _shape(act),
                str(act.dtype).replace("torch.", ""), act.device))
        return r

    return call


def _check_model(model, fn):
    if not isinstance(model, _core.Model):
        raise TypeError("{}(): model must be a vocablens.Model, not {}".format(fn, type(model).__name__))


def hook_names(model):
    """Every hook point of the model, TransformerLens names, in forward order."""
    names = getattr(model, "_hook_names_cache", None)
    if names is None:
        names = tuple(_core._hook_names(model))
        model._hook_names_cache = names
    return list(names)


def _resolve(model, hooks, arg):
    """[(name_or_filter, fn)] -> [(TransformerLens name, fn)], filters expanded over every hook point."""
    if hooks is None:
        return []
    if isinstance(hooks, tuple) and len(hooks) == 2 and (isinstance(hooks[0], str) or callable(hooks[0])) \
            and callable(hooks[1]):
        hooks = [hooks]  # one (name, fn) pair
    if not isinstance(hooks, (list, tuple)):
        raise TypeError("{} must be a list of (name or filter, fn) pairs, not {}".format(arg, type(hooks).__name__))
    out = []
    for i, item in enumerate(hooks):
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise TypeError("{}[{}] must be a (name or filter, fn) pair, not {!r}".format(arg, i, item))
        sel, fn = item
        if not callable(fn):
            raise TypeError("{}[{}]: the hook function must be callable as fn(activation, hook), not {}".format(
                arg, i, type(fn).__name__))
        if isinstance(sel, str):
            tl, _, _ = _core._hook_site(model, sel, "{}[{}]".format(arg, i))
            out.append((tl, fn))
        elif callable(sel):
            matched = [n for n in hook_names(model) if sel(n)]
            out.extend((n, fn) for n in matched)
        else:
            raise TypeError("{}[{}]: the hook point must be a name or a filter callable(name) -> bool, not {}".format(
                arg, i, type(sel).__name__))
    return out


# ---- hooks that outlive a call: model.hooks(...) contexts and model.add_hook(...) -------------------------
# Kept per model and per thread (a threading.local on the model), in the order they were added, as TransformerLens
# keeps them per hook point in registration order. An entry is [name, fn, dir, permanent, level]; level is the
# model.hooks() context that added it (None for add_hook).

_STATE_LOCK = threading.Lock()
_LEVELS = itertools.count(1)


def _state(model):
    """This thread's list of hook entries on `model`."""
    tls = model.__dict__.get("_hook_threads")
    if tls is None:
        with _STATE_LOCK:
            tls = model.__dict__.get("_hook_threads")
            if tls is None:
                tls = threading.local()
                model._hook_threads = tls
    entries = getattr(tls, "entries", None)
    if entries is None:
        entries = tls.entries = []
    return entries


def _check_dir(dir, fn, both=False, arg="dir"):
    allowed = ("fwd", "bwd", "both") if both else ("fwd", "bwd")
    if dir not in allowed:
        raise ValueError("{}(): {} must be {}, not {!r}".format(fn, arg, " or ".join(repr(a) for a in allowed), dir))


def _remove(model, direction, including_permanent, level, name=None):
    entries = _state(model)
    entries[:] = [e for e in entries if not (
        (direction == "both" or e[2] == direction) and (including_permanent or not e[3]) and
        (level is None or e[4] == level) and (name is None or e[0] == name))]


def add_hook(self, name, hook, dir="fwd", is_permanent=False, level=None, prepend=False):
    """TransformerLens's add_hook: `hook` (fn(activation, hook)) runs at `name` (a hook name or a filter
    callable(name) -> bool) in every later forward of this thread on this model, until reset_hooks() (which
    keeps is_permanent ones unless including_permanent=True). dir="bwd": fn(grad, hook) on the gradient, and
    the forwards then run with autograd so that backward() reaches it. prepend=True runs it before the
    point's other hooks. Other threads' forwards do not see it."""
    _check_dir(dir, "add_hook")
    if not isinstance(name, str) and not callable(name):
        raise TypeError("add_hook(): name must be a hook name or a filter callable(name) -> bool, not " +
                        type(name).__name__)
    if not callable(hook):
        raise TypeError("add_hook(): hook must be callable as fn(activation, hook), not " + type(hook).__name__)
    if not isinstance(is_permanent, bool):
        raise TypeError("add_hook(): is_permanent must be a bool, not " + type(is_permanent).__name__)
    resolved = _resolve(self, [(name, hook)], "add_hook")
    entries = _state(self)
    new = [[n, fn, dir, is_permanent, level] for n, fn in resolved]
    if prepend:
        entries[:0] = new
    else:
        entries.extend(new)


def reset_hooks(self, clear_contexts=True, direction="both", including_permanent=False, level=None):
    """TransformerLens's reset_hooks: removes this thread's hooks on this model added with add_hook (and,
    with clear_contexts, those of enclosing model.hooks() blocks); permanent ones only with
    including_permanent=True; direction "fwd", "bwd" or "both"."""
    _check_dir(direction, "reset_hooks", both=True, arg="direction")
    if clear_contexts or level is not None:
        _remove(self, direction, including_permanent, level)
    else:
        entries = _state(self)
        entries[:] = [e for e in entries if e[4] is not None or not (
            (direction == "both" or e[2] == direction) and (including_permanent or not e[3]))]


def hook_dict(self):
    """{TransformerLens name: HookPoint} of every hook point (model.hook_dict["blocks.0.hook_resid_pre"]
    .add_hook(fn) is model.add_hook("blocks.0.hook_resid_pre", fn))."""
    d = self.__dict__.get("_hook_dict")
    if d is None:
        d = {n: HookPoint(n, self) for n in hook_names(self)}
        self._hook_dict = d
    return dict(d)


def _run(model, input, fwd, record=(), logits=True, grad=False, bos=None, bwd=()):
    """One forward pass: this thread's added and context hooks, then `fwd`, then backward hooks (registered
    on the activations as tensor hooks when grad is on), recording `record` (TransformerLens names). Added
    backward hooks turn grad on."""
    ids = _input_ids(model, input, bos)
    entries = list(_state(model))
    fwd = [(e[0], e[1]) for e in entries if e[2] == "fwd"] + list(fwd)
    bwd = [(e[0], e[1]) for e in entries if e[2] == "bwd"] + list(bwd)
    if bwd:
        grad = True
    points = {}
    wrapped = []
    for name, fn in fwd:
        hp = points.setdefault(name, HookPoint(name))
        wrapped.append((name, _wrap(fn, hp)))
    for name, fn in bwd:
        hp = points.setdefault(name, HookPoint(name))
        wrapped.append((name, _backward_registrar(fn, hp)))
    out, cache = _core._run_hooked(model, ids, wrapped, list(record), logits, grad)
    return ids, out, cache


def _input_ids(model, input, prepend_bos):
    """[batch, pos] ids of a forward's input: text is tokenised as to_tokens does (TransformerLens's default:
    BOS prepended unless prepend_bos=False; a list of texts padded on the right), never cut to the context
    (too long is a ValueError); ids and tensors are taken as they are."""
    if _texts(input) is not None:
        input = to_tokens(model, input, prepend_bos, truncate=False)
    return model._batch_ids(input, None)


def _backward_registrar(fn, hook):
    def call(act):
        if not act.requires_grad:
            act.requires_grad_(True)

        def on_grad(g):
            r = fn(g, hook=hook)
            if r is not None and (not isinstance(r, torch.Tensor) or r.shape != g.shape):
                raise ValueError("backward hook {} ({}) must return None or a gradient of shape {}".format(
                    hook.name, _fn_name(fn), _shape(g)))
            return r

        act.register_hook(on_grad)
        return None

    return call


def _loss(logits, ids, per_token=False):
    """Next-token cross-entropy (TransformerLens's return_type="loss"): mean over batch and positions."""
    if ids.shape[1] < 2:
        raise ValueError("return_type='loss' needs at least two tokens")
    lp = torch.log_softmax(logits[:, :-1].to(torch.float32), dim=-1)
    nll = -lp.gather(-1, ids[:, 1:, None])[..., 0]
    return nll if per_token else nll.mean()


def _output(logits, ids, return_type):
    if return_type not in _RETURN_TYPES:
        raise ValueError("return_type must be 'logits', 'loss', 'both' or None, not {!r}".format(return_type))
    if return_type == "logits":
        return logits
    if return_type == "loss":
        return _loss(logits, ids)
    if return_type == "both":
        return logits, _loss(logits, ids)
    return None


# ---- Model methods ----------------------------------------------------------------------------------------

def _bos(fn, prepend_bos, bos):
    """prepend_bos, or its older spelling bos= (the same meaning now)."""
    if bos is not None:
        if prepend_bos is not None:
            raise TypeError("{}(): give prepend_bos or bos, not both".format(fn))
        prepend_bos = bos
    if prepend_bos is not None and not isinstance(prepend_bos, bool):
        raise TypeError("{}(): prepend_bos must be None, True or False, not {}".format(fn, type(prepend_bos).__name__))
    return prepend_bos


def forward(self, input, return_type="logits", *, prepend_bos=None, bos=None):
    """Logits [batch, pos, d_vocab] (float32) of `input`: text or a list of texts (tokenised as to_tokens:
    BOS prepended unless prepend_bos=False, as TransformerLens), ids, or an integer tensor [T] / [B, T];
    with this thread's hooks (model.hooks(...) blocks, add_hook). return_type: "logits", "loss"
    (next-token cross-entropy, mean), "both" or None."""
    bos = _bos("forward", prepend_bos, bos)
    ids, logits, _ = _run(self, input, (), logits=return_type is not None, bos=bos)
    return _output(logits, ids, return_type)


def run_with_hooks(self, input, fwd_hooks=(), bwd_hooks=(), *, return_type="logits", grad=None, prepend_bos=None,
                   bos=None, reset_hooks_end=True, clear_contexts=False):
    """Forward pass with hooks (TransformerLens's run_with_hooks).

    fwd_hooks: [(name or filter, fn)]: name is a hook name (TransformerLens's "blocks.1.attn.hook_z" or ours
    "z.1"), a filter is callable(name) -> bool over every hook point (model.hook_names()). fn(activation,
    hook) edits the activation in place or returns a replacement of the same shape and dtype (else
    ValueError naming the hook and both shapes); hook.name, hook.layer(), hook.ctx. Hooks on one point run
    in list order, after this thread's added and context hooks. An exception in a hook propagates as
    itself; the model stays usable.
    bwd_hooks: [(name or filter, fn)]: fn(grad, hook) is called with the gradient of the activation when the
    returned logits (or loss) are backpropagated; it may return a replacement gradient. Turns grad on.
    grad: run with autograd (default: only with bwd_hooks). Weights never require grad; only activations a
    hook marks with requires_grad_() (or bwd_hooks') build a graph.
    return_type: "logits" [batch, pos, d_vocab], "loss", "both" or None.
    reset_hooks_end / clear_contexts are accepted for TransformerLens compatibility: hooks given here never
    outlive the call."""
    bos = _bos("run_with_hooks", prepend_bos, bos)
    fwd = _resolve(self, fwd_hooks, "fwd_hooks")
    bwd = _resolve(self, bwd_hooks, "bwd_hooks")
    if grad is None:
        grad = bool(bwd)
    ids, logits, _ = _run(self, input, fwd, logits=return_type is not None, grad=bool(grad), bos=bos, bwd=bwd)
    return _output(logits, ids, return_type)


@contextlib.contextmanager
def hooks(self, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True, clear_contexts=False):
    """Context manager: the hooks apply to every forward / run_with_hooks / run_with_cache / gradients /
    generate call of this thread inside the `with` block (nested blocks add theirs after the outer ones) and
    are gone after it (reset_hooks_end=False keeps them, until reset_hooks()). Forwards of other threads
    do not see them. bwd_hooks make the forwards inside run with autograd, so that backward() reaches
    them."""
    fwd = _resolve(self, fwd_hooks, "fwd_hooks")
    bwd = _resolve(self, bwd_hooks, "bwd_hooks")
    level = next(_LEVELS)
    entries = _state(self)
    entries.extend([n, fn, "fwd", False, level] for n, fn in fwd)
    entries.extend([n, fn, "bwd", False, level] for n, fn in bwd)
    try:
        yield self
    finally:
        if reset_hooks_end:
            _remove(self, "both", True, level)


def _names_from_filter(self, names_filter, arg):
    """names_filter -> ([TransformerLens names to record], {key as returned: TransformerLens name})."""
    all_names = hook_names(self)
    if names_filter is None:
        if not self.__dict__.get("_use_attn_result", True):   # set_use_attn_result(False): as TransformerLens
            all_names = [n for n in all_names if not n.endswith("attn.hook_result")]
        return all_names, {n: n for n in all_names}
    if isinstance(names_filter, str):
        names_filter = [names_filter]
    if callable(names_filter):
        chosen = [n for n in all_names if names_filter(n)]
        return chosen, {n: n for n in chosen}
    if not isinstance(names_filter, (list, tuple, set, frozenset)):
        raise TypeError("{} must be a hook name, a list of them or a callable(name) -> bool, not {}".format(
            arg, type(names_filter).__name__))
    keys = {}
    for n in names_filter:
        if not isinstance(n, str):
            raise TypeError("{} must hold str hook names, not {}".format(arg, type(n).__name__))
        tl, _, _ = _core._hook_site(self, n, arg)
        keys[n] = tl
    return sorted(set(keys.values()), key=all_names.index), keys


def run_with_cache(self, input, names_filter=None, *, names=None, return_type="logits", fwd_hooks=(), prepend_bos=None,
                   bos=None, remove_batch_dim=False, incl_bwd=False):
    """(logits, ActivationCache): the forward pass's activations at every hook point (names_filter=None),
    at the names given (TransformerLens's or ours; the cache's keys are the names as given), or at those a
    callable(name) -> bool accepts. `names=` is the older spelling of a list of names. The activations
    are recorded after any hooks (fwd_hooks, model.hooks contexts) on their point. The residual points
    (resid_pre/mid/post, attn_out, mlp_out), hook_pattern and ln_final.hook_normalized are the forward's own
    tensors (no copy); the others are one copy each (hooks.hpp). return_type as forward().
    incl_bwd=True (with return_type="loss", a scalar) also backpropagates the loss and caches each
    activation's gradient as "<name>_grad", as TransformerLens does."""
    bos = _bos("run_with_cache", prepend_bos, bos)
    if names is not None and names_filter is not None:
        raise TypeError("run_with_cache(): give names_filter or names, not both")
    if incl_bwd and return_type != "loss":
        raise ValueError("run_with_cache(): incl_bwd=True backpropagates a scalar: use return_type='loss' "
                         "(or model.gradients(input, metric, names) for another metric)")
    arg = "names" if names is not None else "names_filter"
    record, keys = _names_from_filter(self, names if names is not None else names_filter, arg)
    fwd = _resolve(self, fwd_hooks, "fwd_hooks")
    grads = {}
    bwd = []
    if incl_bwd:
        def keep(g, hook):
            grads[hook.name] = g.detach()
        bwd = [(n, keep) for n in record]
    ids, logits, got = _run(self, input, fwd, record=record, logits=return_type is not None, bos=bos,
                            grad=bool(incl_bwd), bwd=bwd)
    out = _output(logits, ids, return_type)
    d = {k: got[tl].detach() for k, tl in keys.items()}
    if incl_bwd:
        out.backward()
        out = out.detach()
        for k, tl in keys.items():
            d[k + "_grad"] = grads[tl] if tl in grads else torch.zeros_like(d[k])
    cache = ActivationCache(d, self)
    if remove_batch_dim:
        cache = cache.remove_batch_dim()
    return out, cache


def gradients(self, input, metric, names, *, fwd_hooks=(), prepend_bos=None, bos=None, return_metric=False):
    """The gradient of a scalar metric(logits) with respect to each activation in `names` (a hook name, a
    list of them, or a filter callable), as an ActivationCache of gradients with the activations' shapes.
    The weights stay frozen (they never require grad); fwd_hooks and model.hooks contexts apply.
    return_metric=True returns (metric value as a float, gradients)."""
    bos = _bos("gradients", prepend_bos, bos)
    if not callable(metric):
        raise TypeError("gradients(): metric must be callable as metric(logits) -> scalar tensor, not " +
                        type(metric).__name__)
    record, keys = _names_from_filter(self, names, "names")
    acts = {}

    def grab(act, hook):
        if not act.requires_grad:
            act.requires_grad_(True)
        acts[hook.name] = act

    fwd = _resolve(self, fwd_hooks, "fwd_hooks") + [(n, grab) for n in record]
    _, logits, _ = _run(self, input, fwd, logits=True, grad=True, bos=bos)
    with torch.enable_grad():
        value = metric(logits)
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise ValueError("gradients(): metric must return a scalar tensor (one element), got {}".format(
            _shape(value) if isinstance(value, torch.Tensor) else type(value).__name__))
    value = value.reshape(())
    order = [n for n in record if n in acts]
    if not value.requires_grad:
        grads = [torch.zeros_like(acts[n]) for n in order]
    else:
        grads = torch.autograd.grad(value, [acts[n] for n in order], allow_unused=True)
        grads = [torch.zeros_like(acts[n]) if g is None else g for n, g in zip(order, grads)]
    by_tl = dict(zip(order, grads))
    cache = ActivationCache({k: by_tl[tl] for k, tl in keys.items()}, self)
    if return_metric:
        return float(value.detach()), cache
    return cache


def attribution_patching(self, clean, corrupt, metric, names, *, prepend_bos=None, bos=None):
    """Attribution patching (Nanda 2023): the first-order estimate of what patching each clean activation
    into the corrupted run does to metric(logits), (clean - corrupt) * d metric / d activation at the
    corrupted run, summed over the activation's last dimension (d_model, d_head, d_mlp, or the key position
    of a pattern). clean / corrupt: inputs of the same length. Returns an ActivationCache of these
    estimates ([batch, pos] for residual points, [batch, pos, head] for hook_z, ...); one forward and one
    backward pass in all, where activation patching runs one forward per patch."""
    bos = _bos("attribution_patching", prepend_bos, bos)
    record, keys = _names_from_filter(self, names, "names")
    _, clean_cache = self.run_with_cache(clean, names_filter=record, return_type=None, bos=bos)
    _, corrupt_cache = self.run_with_cache(corrupt, names_filter=record, return_type=None, bos=bos)
    for n in record:
        if clean_cache[n].shape != corrupt_cache[n].shape:
            raise ValueError("attribution_patching(): clean and corrupt differ in shape at {} ({} vs {}): give "
                             "inputs of the same length".format(n, _shape(clean_cache[n]), _shape(corrupt_cache[n])))
    grads = self.gradients(corrupt, metric, record, bos=bos)
    est = {n: ((clean_cache[n] - corrupt_cache[n]) * grads[n]).sum(-1) for n in record}
    return ActivationCache({k: est[tl] for k, tl in keys.items()}, self)


def install(Model):
    Model.add_hook = add_hook
    Model.reset_hooks = reset_hooks
    Model.hook_dict = property(hook_dict)
    Model.forward = forward
    Model.__call__ = forward
    Model.run_with_hooks = run_with_hooks
    Model.hooks = hooks
    Model.run_with_cache = run_with_cache
    Model.gradients = gradients
    Model.attribution_patching = attribution_patching
    Model.hook_names = hook_names
