"""Writes vocablens/__init__.pyi: typed signatures of every declared analysis, from the library's declaration
(`vocablens schema`), plus the hand-written parts of the package. Run by the build after the module is built:

    python3 -m vocablens._stubs OUT.pyi
"""
import sys

_TYPES = {
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "string": "str",
    "indices": "Union[int, Sequence[int], str]",
    "strings": "Union[str, Sequence[Union[str, int]]]",
    "token": "Union[str, int]",
    "prompt": "Union[str, Sequence[int]]",
    "model": "Model",
    "sae": "Sae",
    "matrix": "Union[str, torch.Tensor]",
}


def _type(o):
    if o["type"] == "choice":
        return "Literal[" + ", ".join(repr(c) for c in o["choices"]) + "]"
    return _TYPES[o["type"]]


def signature(spec, first=("model: Model",), returns="Result", progress=True):
    """A declared analysis (or a function made from one) as a typed Python stub line; the types its Python
    wrappers widen (vocablens._analyses.wraps) replace the declared ones."""
    from ._analyses import stub_types
    widened = stub_types(spec["name"])
    parts = list(first)
    for o in spec["options"]:
        if o["required"]:
            parts.append("{}: {}".format(o["name"], widened.get(o["name"], _type(o))))
    parts.append("*")
    for o in spec["options"]:
        if not o["required"]:
            t = widened.get(o["name"], _type(o))
            if o["default"] is None:
                t = "Optional[" + t + "]"
            parts.append("{}: {} = {!r}".format(o["name"], t, o["default"]))
    if progress:
        parts.append("progress: Union[None, bool, Callable[[int, int], Any]] = None")
    if parts[-1] == "*":
        parts.pop()
    return "def {}({}) -> {}: ...".format(spec["name"], ", ".join(parts), returns)


def render(schema):
    """The stubs: every declared analysis as a function and a method of Model, and the functions Python makes
    on top of the declarations (vocablens._analyses: derived, public)."""
    from ._analyses import extra_stubs
    lines = [
        "# Generated from the analyses' declarations (vocablens schema) by vocablens/_stubs.py: do not edit.",
        "import os",
        "from typing import Any, Callable, Dict, Literal, Optional, Sequence, Union",
        "import torch",
        "from ._vocablens import Error as Error, FormatError as FormatError, UsageError as UsageError",
        "from ._vocablens import Tokenizer as Tokenizer, Sae as Sae, __version__ as __version__",
        "from ._vocablens import Model as _Model",
        "from ._result import Result as Result, load_results as load_results, report as report",
        "from ._model import load_model as load_model",
        "from ._graph import Graph as Graph",
        "def set_dtype(dtype: Literal['float32', 'bfloat16', 'int8']) -> None: ...",
        "def get_dtype() -> Literal['float32', 'bfloat16', 'int8']: ...",
        "def set_compute(mode: Literal['float32', 'bfloat16', 'int8']) -> None: ...",
        "def get_compute() -> Literal['float32', 'bfloat16', 'int8']: ...",
        "class Estimate(dict): ...",
        "def estimate(name: str, model: Model, *args: Any, **kwargs: Any) -> Estimate: ...",
        "",
    ]
    for spec in schema:
        lines.append(signature(spec))
    lines += extra_stubs(schema, signature)
    lines.append("class Model(_Model):")
    lines.append("    def __getattr__(self, name: str) -> Any: ...")
    for spec in schema:
        lines.append("    " + signature(spec, first=("self",)))
    lines.append("def __getattr__(name: str) -> Any: ...  # the package's other names (hooks, cache, SAE helpers)")
    return "\n".join(lines) + "\n"


def main(argv):
    from . import _vocablens as core
    if len(argv) != 2:
        sys.stderr.write("usage: python3 -m vocablens._stubs OUT.pyi\n")
        return 2
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write(render(core.analyses_schema()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
