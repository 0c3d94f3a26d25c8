"""Registers this interpreter as a Jupyter kernel, so that notebooks run with the vocablens installed here.

    .venv/bin/python -m vocablens.kernel              # a kernel "vocablens (.venv)" for every Jupyter of this user
    .venv/bin/python -m vocablens.kernel --prefix P   # under P/share/jupyter/kernels instead (no home directory)

A venv made as docs/python.md says (`/usr/bin/python3 -m venv --system-site-packages .venv`) has the package but
Jupyter's default kernel is Debian's /usr/bin/python3, which does not; after this, pick the "vocablens" kernel.
The kernel spec's command is this interpreter (`sys.executable -m ipykernel_launcher`), written by ipykernel.
"""
import argparse
import os
import sys


def install(name="vocablens", display_name=None, prefix=None):
    """Writes the kernel spec; returns its directory. prefix None: the user's Jupyter directory."""
    try:
        from ipykernel.kernelspec import install as _install
    except ImportError as e:
        raise ImportError("vocablens.kernel needs ipykernel (Debian: python3-ipykernel): {}".format(e)) from None
    if display_name is None:
        display_name = "vocablens ({})".format(os.path.basename(sys.prefix) or sys.prefix)
    return _install(user=prefix is None, kernel_name=name, display_name=display_name, prefix=prefix)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m vocablens.kernel",
                                description="Register this interpreter (with its vocablens) as a Jupyter kernel.")
    p.add_argument("--name", default="vocablens", help="the kernel's name (default: vocablens)")
    p.add_argument("--display-name", default=None, help="what Jupyter shows (default: 'vocablens (<venv>)')")
    p.add_argument("--prefix", default=None,
                   help="install under PREFIX/share/jupyter/kernels (default: the user's Jupyter directory)")
    a = p.parse_args(argv)
    path = install(a.name, a.display_name, a.prefix)
    print("kernel '{}' for {} in {}".format(a.name, sys.executable, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
