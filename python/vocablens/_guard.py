"""One line naming the argument when a C++ method is called with a wrong type.

pybind11 answers a call whose arguments match no signature with "incompatible function arguments. The
following argument types are supported: 1. (self: ..., x: torch.Tensor) -> ..." and the repr of every
argument, over several lines; an integer past 64 bits inside a binding is "Unable to cast Python
instance". Every public C++ method of Model, Tokenizer and Sae (and the module functions the package
exports) is wrapped here so that such a call raises a TypeError / ValueError of one line that names the
method and the argument ("Sae.encode(): x must be a torch.Tensor, not str"), as the declared analyses do.
"""
import functools
import numbers
import re

import torch

_OVERLOAD = "incompatible function arguments"
_CAST = "Unable to cast Python instance"


def split_top_level(text):
    """Splits at the commas outside brackets: 'a: int = 1, b: List[int]' -> ['a: int = 1', 'b: List[int]']."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _params(message):
    """[(name, type, has_default)] of the first signature pybind lists, or None."""
    m = re.search(r"^\s*1\. \((.*)\) -> ", message, re.M)
    if m is None:
        return None
    params = []
    for p in split_top_level(m.group(1)):
        head, eq, _ = p.partition(" = ")
        name, _, typ = head.partition(": ")
        params.append((name.strip(), typ.strip(), bool(eq)))
    return params


def _int64(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _fits(v, typ):
    """Whether v could be converted to the C++ type pybind names `typ` (unknown types: yes)."""
    if typ.startswith("Optional[") and typ.endswith("]"):
        return v is None or _fits(v, typ[len("Optional["):-1])
    if typ == "int":
        return _int64(v) and -2 ** 63 <= v < 2 ** 63
    if typ == "float":
        return isinstance(v, numbers.Real) and not isinstance(v, bool)
    if typ == "bool":
        return isinstance(v, bool)
    if typ == "str":
        return isinstance(v, str)
    if typ.startswith("List[") and typ.endswith("]"):
        return isinstance(v, (list, tuple)) and all(_fits(e, typ[5:-1]) for e in v)
    if typ.startswith("Dict["):
        return isinstance(v, dict)
    if typ in ("torch.Tensor", "at::Tensor"):
        return isinstance(v, torch.Tensor)
    if typ.startswith("vocablens."):
        return type(v).__name__ == typ.rsplit(".", 1)[-1]
    return True


def _want(typ):
    if typ.startswith("Optional[") and typ.endswith("]"):
        return "None or " + _want(typ[len("Optional["):-1])
    if typ.startswith("List[") and typ.endswith("]"):
        return "a list of " + typ[5:-1]
    if typ.startswith("vocablens."):
        return "a vocablens." + typ.rsplit(".", 1)[-1]
    if typ == "at::Tensor":
        return "a torch.Tensor"
    return ("an " if typ[:1] in "aeiou" else "a ") + typ


def explain(label, message, args, kwargs):
    """The one line for a call that matched no signature (args without self)."""
    params = _params(message)
    if params is None:
        return "{}(): wrong argument types".format(label)
    if params and params[0][0] == "self":
        params = params[1:]
    names = [p[0] for p in params]
    if len(args) > len(params):
        return "{}() takes {} argument{} ({}), {} given".format(label, len(params), "" if len(params) == 1 else "s",
                                                                ", ".join(names), len(args))
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            return "{}(): unexpected keyword argument '{}' (it takes: {})".format(label, k, ", ".join(names))
        given[k] = v
    for name, typ, has_default in params:
        if name not in given:
            if not has_default:
                return "{}(): missing argument '{}'".format(label, name)
            continue
        v = given[name]
        if not _fits(v, typ):
            if _int64(v) and "int" in typ:
                return "{}(): {} = {} is out of the 64-bit range".format(label, name, v)
            return "{}(): {} must be {}, not {}".format(label, name, _want(typ), type(v).__name__)
    takes = ", ".join("{}: {}".format(n, t) for n, t, _ in params)
    return "{}(): wrong argument types (it takes {})".format(label, takes)


def _wrap(fn, label, method):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            if _OVERLOAD not in str(e):
                raise
            raise TypeError(explain(label, str(e), args[1:] if method else args, kwargs)) from None
        except RuntimeError as e:
            if not str(e).startswith(_CAST):
                raise
            raise TypeError("{}(): an argument cannot be converted to the type the library takes ({})".format(
                label, str(e).split(" (#define")[0])) from None
    return call


def guard_class(cls, label):
    """Wraps every method pybind defined on cls (not the Python ones added later, which check their own)."""
    for name, obj in list(vars(cls).items()):
        if type(obj).__name__ == "instancemethod" and (not name.startswith("__") or name == "__call__"):
            setattr(cls, name, _wrap(obj.__func__, "{}.{}".format(label, name), True))


def guard_function(fn, label):
    return _wrap(fn, label, False)
