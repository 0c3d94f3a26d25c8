"""Refuses an interpreter that cannot load the extension, saying which one can and why.

The extension links Debian's LibTorch 1.13 (libtorch_cpu.so) and passes tensors as that LibTorch's
torch.Tensor objects, so it loads only into a Python that imports Debian's python3-torch 1.13 (the same
library) and has the Python version it was compiled for. Another python3 first on PATH (pyenv, conda, a
venv without --system-site-packages) fails inside the extension with "initialization failed"; this check
turns that into one sentence naming the interpreter to use.
"""
import sys
import warnings

try:  # written by the build (python/CMakeLists.txt): the interpreter the extension was compiled for
    from ._build import PYTHON as _BUILT_FOR, PYTHON_VERSION as _BUILT_VERSION
except ImportError:  # pragma: no cover - a source checkout without a build
    _BUILT_FOR, _BUILT_VERSION = "/usr/bin/python3", None


def _advice():
    if sys.prefix != sys.base_prefix:
        # A venv: made without --system-site-packages it hides Debian's python3-torch (the usual case after
        # `python3 -m venv .venv && .venv/bin/pip install .`).
        return ("use a venv that sees Debian's site-packages: `{} -m venv --system-site-packages DIR`, then "
                "`DIR/bin/pip install --no-build-isolation .` (this one, {}, does not)".format(_BUILT_FOR, sys.prefix))
    return ("use {} (Debian's python3 with python3-torch 1.13, e.g. `PYTHONPATH=build/python {} ...`; in a venv: "
            "python3 -m venv --system-site-packages)".format(_BUILT_FOR, _BUILT_FOR))


def check():
    here = "{} (Python {}.{})".format(sys.executable or "this interpreter", *sys.version_info[:2])
    if _BUILT_VERSION and "{}.{}".format(*sys.version_info[:2]) != _BUILT_VERSION:
        raise ImportError("vocablens was built for Python {} ({}), not {}: {}".format(
            _BUILT_VERSION, _BUILT_FOR, here, _advice()))
    try:
        # torch imports tqdm.auto (torch.hub), which in a Jupyter kernel without ipywidgets warns "IProgress not
        # found" into the first cell's output: the warning is about tqdm's widget, not about anything here, and
        # vocablens's own bars use tqdm's text bar then.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="IProgress not found")
            import torch
    except ImportError as e:
        raise ImportError("vocablens shares tensors with Debian's torch 1.13 (python3-torch, the LibTorch the "
                          "module links), which {} cannot import ({}): {}".format(here, e, _advice())) from None
    if not torch.__version__.startswith("1.13"):
        raise ImportError("vocablens needs torch 1.13 (Debian's python3-torch: the same LibTorch the module links), "
                          "but {} imports torch {} from {}: {}".format(here, torch.__version__, torch.__file__,
                                                                        _advice()))
