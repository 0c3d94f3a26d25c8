"""PEP 517 build backend of the `vocablens` Python package: `pip install .` drives the project's CMake build.

    /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation .        # offline: needs nothing beyond Debian's packages

Why an in-tree backend (pyproject.toml: build-backend = "vocablens_build", backend-path = ["python/build_backend"]):
Debian 12 has no scikit-build-core, and the extension is not an ordinary setuptools extension anyway (it links
the project's static libraries, Debian's LibTorch and libtorch_python, through python/CMakeLists.txt). So this
module does the little a backend must: run CMake for the one target `vocablens_python`, then zip the package
(the sources of python/vocablens, the extension, `_build.py`, the `__init__.pyi` stubs and `py.typed` the build
writes) into a wheel with its dist-info. It uses the standard library only, so `--no-build-isolation` needs no
build requirements installed.

Which build directory (the first that applies):
  1. `pip install --config-settings build-dir=DIR .`, or the environment variable VOCABLENS_BUILD_DIR=DIR;
  2. `build/` in the source tree.
A directory that is already configured (has CMakeCache.txt) is reused as it is, with its own options, and only
`vocablens_python` is brought up to date (an incremental build: a configured tree compiles nothing new); a
missing one is configured first (Release, Ninja when installed), so a fresh clone builds what the module needs.
A build directory configured for another source tree, or with -DVOCABLENS_PYTHON=OFF, is refused with one line
saying what to do.

The wheel is tagged for the interpreter running pip (cp311-cp311-linux_x86_64 on Debian 12); the extension is
compiled for the interpreter the build directory found (/usr/bin/python3 by default), and a mismatch of their
Python versions is refused here rather than at import time.
"""
import base64
import hashlib
import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "vocablens"
SUMMARY = "Read a transformer's internals in vocabulary space (C++ library, LibTorch, Python hooks)"


class BuildError(RuntimeError):
    pass


def _fail(msg):
    # pip prints the backend's traceback; the message's first line is what a reader needs.
    raise BuildError("vocablens build: " + msg)


def _version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*vocablens\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not m:
        _fail("no `project(vocablens VERSION x.y.z)` in {}".format(os.path.join(ROOT, "CMakeLists.txt")))
    return m.group(1)


def _tag():
    # The extension is specific to the CPython version and platform: cpXY-cpXY-<platform>.
    impl = "cp{}{}".format(*sys.version_info[:2])
    plat = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
    return "{}-{}-{}".format(impl, impl, plat)


def _build_dir(config_settings):
    d = (config_settings or {}).get("build-dir") or os.environ.get("VOCABLENS_BUILD_DIR")
    return os.path.abspath(d) if d else os.path.join(ROOT, "build")


def _cache(build_dir):
    """The CMakeCache.txt entries as a dict, or None when the directory is not configured."""
    path = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.exists(path):
        return None
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^([A-Za-z_0-9.-]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m:
                out[m.group(1)] = m.group(2)
    return out


def _run(cmd):
    print("vocablens build: " + " ".join(cmd), file=sys.stderr, flush=True)
    try:
        subprocess.run(cmd, check=True, stdout=sys.stderr)
    except FileNotFoundError:
        _fail("{} is not installed (./scripts/setup.sh --no-build installs the build tools)".format(cmd[0]))
    except subprocess.CalledProcessError as e:
        _fail("`{}` failed with exit code {} (its output is above)".format(" ".join(cmd), e.returncode))


def _build(config_settings):
    """Configures (when needed) and builds `vocablens_python`; returns the build directory's package folder."""
    build_dir = _build_dir(config_settings)
    cmake = shutil.which("cmake")
    if not cmake:
        _fail("cmake is not installed (./scripts/setup.sh --no-build installs it and the other build tools)")
    cache = _cache(build_dir)
    if cache is None:
        cmd = [cmake, "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DVOCABLENS_PYTHON=ON"]
        if shutil.which("ninja"):
            cmd += ["-G", "Ninja"]
        _run(cmd)
        cache = _cache(build_dir) or {}
    else:
        src = cache.get("CMAKE_HOME_DIRECTORY", "")
        if src and os.path.realpath(src) != os.path.realpath(ROOT):
            _fail("{} is the build directory of {}, not of {} (set VOCABLENS_BUILD_DIR to a build directory of this "
                  "tree, or to a new one)".format(build_dir, src, ROOT))
        if cache.get("VOCABLENS_PYTHON", "ON").upper() in ("OFF", "0", "FALSE", "NO"):
            _fail("{} was configured with -DVOCABLENS_PYTHON=OFF; reconfigure it with -DVOCABLENS_PYTHON=ON or set "
                  "VOCABLENS_BUILD_DIR to another directory".format(build_dir))
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    _run([cmake, "--build", build_dir, "--target", "vocablens_python", "--parallel", jobs])

    pkg = os.path.join(build_dir, "python", NAME)
    built = {}
    try:
        exec(open(os.path.join(pkg, "_build.py"), encoding="utf-8").read(), built)
    except OSError:
        _fail("{} has no _build.py after the build (is the sanitizer or fuzzing build configured there? they "
              "skip the Python module)".format(pkg))
    here = "{}.{}".format(*sys.version_info[:2])
    if built.get("PYTHON_VERSION") and built["PYTHON_VERSION"] != here:
        _fail("the extension in {} is built for Python {} ({}), but pip runs Python {} ({}): run pip from a venv "
              "of that interpreter (`{} -m venv --system-site-packages .venv`)".format(
                  build_dir, built["PYTHON_VERSION"], built.get("PYTHON"), here, sys.executable, built.get("PYTHON")))
    return pkg


def _files(pkg):
    """(path in the wheel, path on disk): the package's Python sources from the source tree (so a stale file of
    another branch in the build folder is never shipped) and what the build made."""
    src = os.path.join(ROOT, "python", NAME)
    out = [(NAME + "/" + n, os.path.join(src, n)) for n in sorted(os.listdir(src)) if n.endswith(".py")]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for n in ("_vocablens" + suffix, "_build.py", "__init__.pyi", "py.typed"):
        p = os.path.join(pkg, n)
        if not os.path.exists(p):
            _fail("{} is missing after the build".format(p))
        out.append((NAME + "/" + n, p))
    return out


def _metadata():
    return ("Metadata-Version: 2.1\nName: {}\nVersion: {}\nSummary: {}\nRequires-Python: >=3.9\n"
            "Description-Content-Type: text/markdown\n\n"
            "Needs Debian's python3-torch 1.13 (the LibTorch the extension links): install into a venv made with "
            "--system-site-packages. See docs/python.md.\n").format(
                NAME, _version(), SUMMARY)


def _wheel_meta(tag):
    return "Wheel-Version: 1.0\nGenerator: vocablens_build\nRoot-Is-Purelib: false\nTag: {}\n".format(tag)


def _dist_info():
    return "{}-{}.dist-info".format(NAME, _version())


def _write_wheel(wheel_directory, entries, tag):
    """entries: (arcname, bytes). Writes the wheel with its RECORD (sha256 of every file) and returns its name."""
    dist = _dist_info()
    entries = list(entries) + [(dist + "/METADATA", _metadata().encode()), (dist + "/WHEEL", _wheel_meta(tag).encode())]
    record = []
    name = "{}-{}-{}.whl".format(NAME, _version(), tag)
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible
            info.external_attr = (0o755 if arc.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("{},sha256={},{}".format(arc, digest, len(data)))
        record.append(dist + "/RECORD,,")
        z.writestr(zipfile.ZipInfo(dist + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- PEP 517 / PEP 660 hooks ----

def get_requires_for_build_wheel(config_settings=None):
    return []  # CMake, a compiler and the libraries come from Debian (scripts/setup.sh), not from pip


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_meta(_tag()))
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def _check_interpreter():
    """The package works only in an interpreter that imports Debian's torch 1.13 (the LibTorch the extension
    links): refused here, at install time, naming the fix, rather than installed and failing at `import vocablens`
    (a venv made by another python3 first on PATH, or without --system-site-packages)."""
    here = "{} (Python {}.{})".format(sys.executable, *sys.version_info[:2])
    fix = ("make the venv with Debian's interpreter and its site-packages: `/usr/bin/python3 -m venv "
           "--system-site-packages .venv`, then `.venv/bin/pip install --no-build-isolation .`")
    try:
        import torch  # noqa: F401  (only asked whether it imports, and which one)
    except ImportError as e:
        _fail("{} cannot import Debian's torch 1.13 (python3-torch, which the extension shares tensors with): {}; {}"
              .format(here, e, fix))
    if not torch.__version__.startswith("1.13"):
        _fail("{} imports torch {} from {}, not Debian's 1.13 (python3-torch, the LibTorch the extension links); {}"
              .format(here, torch.__version__, torch.__file__, fix))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _check_interpreter()
    pkg = _build(config_settings)
    return _write_wheel(wheel_directory, [(arc, _read(p)) for arc, p in _files(pkg)], _tag())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """`pip install -e .`: a .pth file that puts the build directory's python/ on sys.path (the build copies
    python/vocablens/*.py there; rebuild `vocablens_python` after editing them or the C++)."""
    _check_interpreter()
    pkg = _build(config_settings)
    pth = os.path.dirname(pkg) + "\n"
    return _write_wheel(wheel_directory, [("_vocablens_editable.pth", pth.encode())], _tag())
