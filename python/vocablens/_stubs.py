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


def signature(spec):
    """The declared analysis as a typed Python stub line."""
    parts = ["model: Model"]
    for o in spec["options"]:
        if o["required"]:
            parts.append("{}: {}".format(o["name"], _type(o)))
    parts.append("*")
    for o in spec["options"]:
        if not o["required"]:
            t = _type(o)
            if o["default"] is None:
                t = "Optional[" + t + "]"
            parts.append("{}: {} = {!r}".format(o["name"], t, o["default"]))
    parts.append("progress: Union[None, bool, Callable[[int, int], Any]] = None")
    return "def {}({}) -> Result: ...".format(spec["name"], ", ".join(parts))


def graph_signature(spec):
    """attribution_graph: the graph declaration's options but its output-only flags, returning a Graph
    (python/vocablens/_graph.py)."""
    kept = dict(spec, name="attribution_graph",
                options=[o for o in spec["options"] if o["name"] not in ("save_rows", "save_adjacency")])
    return signature(kept).replace("-> Result: ...", "-> Graph: ...")


def render(schema):
    lines = [
        "# Generated from the analyses' declarations (vocablens schema) by vocablens/_stubs.py: do not edit.",
        "from typing import Any, Callable, Literal, Optional, Sequence, Union",
        "import torch",
        "from ._vocablens import Error as Error, FormatError as FormatError, UsageError as UsageError",
        "from ._vocablens import Tokenizer as Tokenizer, Model as Model, Sae as Sae, __version__ as __version__",
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
        if spec["name"] == "graph":
            lines.append(graph_signature(spec))
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
