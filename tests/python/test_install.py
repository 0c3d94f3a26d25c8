"""`pip install .` as docs/python.md and README tell it: a venv of Debian's python3 that sees its site-packages
(python3-torch), the package built by pyproject.toml's in-tree backend from the already configured build
directory (VOCABLENS_BUILD_DIR, set by tests/scripts/python.cmake, so nothing is compiled again), offline.
The installed package then imports from an unrelated directory, runs a forward pass that agrees with the
fixture's independent reference logits, carries its stubs and py.typed, registers itself as a Jupyter kernel
(`python -m vocablens.kernel`) on which README's quickstart notebook runs without an error and shows what it
should (its heatmap, plot and tables, the committed copy's kinds of output), and uninstalls cleanly. A venv
without --system-site-packages gets the import error that says how to make one that works, and so does an
interpreter of another Python version.

Fails (never skips) when python3-venv, pip or the build directory is missing."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import nbformat

from support import FIXTURES, SOURCE, output_structure

BUILD_DIR = os.environ.get("VOCABLENS_BUILD_DIR")


def _env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)          # the installed package, not build/python, must be what imports
    env.pop("PYTHONHOME", None)
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1",
               PYTHONDONTWRITEBYTECODE="1", VOCABLENS_BUILD_DIR=BUILD_DIR or "")
    return env


def _run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("`{}` failed ({}):\n{}\n{}".format(" ".join(cmd), p.returncode, p.stdout[-4000:],
                                                                p.stderr[-4000:]))
    return p


def check_quickstart(test, nb):
    """README's quickstart notebook as executed: what it shows, and the same kinds of output in every cell as the
    committed, executed copy (scripts/execute_notebooks.py), so that it reads with its results before anyone
    runs it; no warning in its first cell. (Executed here once, on the installed package's kernel.)"""
    committed = output_structure(nbformat.read(os.path.join(SOURCE, "docs", "notebooks", "quickstart.ipynb"),
                                               as_version=4))
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    test.assertFalse([o for o in outputs if o.get("output_type") == "error"])
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    test.assertEqual(len(images), 2, "the heatmap and the spectrum plot")
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    test.assertGreaterEqual(len(html), 2, "the DataFrames of the lens and of the head")
    test.assertTrue(any(committed), "quickstart.ipynb is committed without outputs")
    test.assertEqual(output_structure(nb), committed,
                     "the outputs differ in kind from the committed ones: re-run scripts/execute_notebooks.py")
    first = next(c for c in nb.cells if c.cell_type == "code")
    test.assertFalse([o for o in first.get("outputs", []) if o.output_type == "stream" and o.name == "stderr"],
                     first.get("outputs"))


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not BUILD_DIR or not os.path.exists(os.path.join(BUILD_DIR, "CMakeCache.txt")):
            raise AssertionError("VOCABLENS_BUILD_DIR must name the configured build directory (tests/scripts/"
                                 "python.cmake sets it), got {!r}".format(BUILD_DIR))
        cls.tmp = tempfile.mkdtemp(prefix="vocablens-install-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def make_venv(self, name, *flags):
        d = os.path.join(self.tmp, name)
        p = subprocess.run([sys.executable, "-m", "venv"] + list(flags) + [d], env=_env(), capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, "python3 -m venv failed (is python3-venv installed? scripts/setup.sh "
                                          "installs it):\n" + p.stderr)
        return d

    def pip_venv(self):
        """The venv README tells users to make (--system-site-packages, with its own pip), made once: its
        ensurepip costs ~4.5 s of CPU, and its pip also installs into the bare venv below."""
        cls = type(self)
        if getattr(cls, "pip_venv_dir", None) is None:
            d = self.make_venv("venv", "--system-site-packages")
            self.assertTrue(os.path.exists(os.path.join(d, "bin", "pip")),
                            "the venv has no pip (python3-pip / python3-venv's ensurepip)")
            cls.pip_venv_dir = d
        return cls.pip_venv_dir

    def test_installed_package(self):
        d = self.pip_venv()
        _run([os.path.join(d, "bin", "pip"), "install", "--no-build-isolation", SOURCE], cwd=self.tmp)
        py = os.path.join(d, "bin", "python")
        stories = os.path.join(FIXTURES, "stories260K")
        code = textwrap.dedent("""
            import os, sys, numpy as np, vocablens
            pkg = os.path.dirname(vocablens.__file__)
            assert pkg.startswith(sys.prefix), (pkg, sys.prefix)
            for f in ("__init__.pyi", "py.typed", "_build.py"):
                assert os.path.exists(os.path.join(pkg, f)), f
            assert "def lens(" in open(os.path.join(pkg, "__init__.pyi")).read()
            ref = os.path.join({stories!r}, "reference")
            ids = np.load(os.path.join(ref, "ids_first32.npy")).astype(np.int64).reshape(-1)
            want = np.load(os.path.join(ref, "logits_first32.npy")).reshape(len(ids), -1)
            m = vocablens.load_model(os.path.join({stories!r}, "stories260K.bin"))
            got = m.forward(ids.tolist())[0].double().numpy()
            print(pkg, got.shape, float(np.abs(got - want).max()))
            assert got.shape == want.shape and np.abs(got - want).max() < 1e-4
        """).format(stories=stories)
        p = _run([py, "-c", code], cwd=self.tmp)   # from a directory without the sources
        self.assertIn(os.path.join(d, "lib"), p.stdout)

        # Jupyter's default kernel is Debian's python3, which lacks the venv's package: the venv registers itself
        # (under a prefix here, not the user's home) and the kernel spec runs the venv's interpreter.
        kprefix = os.path.join(self.tmp, "jupyter-prefix")
        _run([py, "-m", "vocablens.kernel", "--prefix", kprefix], cwd=self.tmp)
        with open(os.path.join(kprefix, "share", "jupyter", "kernels", "vocablens", "kernel.json")) as f:
            spec = json.load(f)
        self.assertEqual(spec["argv"][0], py)
        self.assertEqual(spec["argv"][1:3], ["-m", "ipykernel_launcher"])
        self.assertIn("vocablens", spec["display_name"])
        # ... and README's quickstart notebook runs on that kernel: Jupyter's client (Debian's nbclient) starts the
        # venv's interpreter, which has no PYTHONPATH, so every `import vocablens` is the installed package's.
        executed = os.path.join(self.tmp, "quickstart.executed.ipynb")
        nb_code = textwrap.dedent("""
            import os, sys, nbformat
            from nbclient import NotebookClient
            here = {here!r}
            nb = nbformat.read(os.path.join(here, "quickstart.ipynb"), as_version=4)
            NotebookClient(nb, timeout=300, kernel_name="vocablens", resources={{"metadata": {{"path": here}}}}).execute()
            nbformat.write(nb, {executed!r})
            errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
            outputs = sum(len(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code")
            print("quickstart outputs", outputs, "errors", len(errors), errors[0].evalue if errors else "")
            sys.exit(1 if errors or outputs == 0 else 0)
        """).format(here=os.path.join(SOURCE, "docs", "notebooks"), executed=executed)
        env = _env()
        env["JUPYTER_PATH"] = os.path.join(kprefix, "share", "jupyter")
        env.pop("VOCABLENS_FIXTURES", None)  # the notebook's own relative path to the fixtures
        p = subprocess.run(["/usr/bin/python3", "-c", nb_code], cwd=self.tmp, env=env, capture_output=True, text=True,
                           timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("errors 0", p.stdout)
        check_quickstart(self, nbformat.read(executed, as_version=4))

        # the wheel's RECORD lists every file: pip removes the package completely
        _run([os.path.join(d, "bin", "pip"), "uninstall", "-y", "vocablens"], cwd=self.tmp)
        self.assertEqual(glob.glob(os.path.join(d, "lib", "python3*", "site-packages", "vocablens*")), [])

    def test_venv_without_debian_torch(self):
        # A venv without Debian's site-packages; no pip of its own (ensurepip's cost): the other venv's pip
        # installs into it with --python, running the build backend in that interpreter, which refuses at install
        # time (not at `import vocablens`), naming the interpreter and the command that makes a venv that works.
        d = self.make_venv("bare", "--without-pip")
        pip = os.path.join(self.pip_venv(), "bin", "pip")
        p = subprocess.run([pip, "--python", os.path.join(d, "bin", "python"), "install", "--no-build-isolation", SOURCE],
                           cwd=self.tmp, env=_env(), capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0, p.stdout[-2000:])
        out = p.stdout + p.stderr
        self.assertIn("cannot import Debian's torch 1.13", out)
        self.assertIn(os.path.join(d, "bin", "python"), out)
        self.assertIn("/usr/bin/python3 -m venv --system-site-packages", out)
        self.assertEqual(glob.glob(os.path.join(d, "lib", "python3*", "site-packages", "vocablens*")), [],
                         "nothing installed in the bare venv")

    def test_other_python_version(self):
        # An interpreter of another Python version (pyenv's 3.12 first on PATH, ...) cannot load the extension at
        # all; the check names the version and the interpreter it was built for. Simulated by a _build module that
        # records another version (the real one is written by python/CMakeLists.txt).
        code = textwrap.dedent("""
            import sys, types
            fake = types.ModuleType("vocablens._build")
            fake.PYTHON, fake.PYTHON_VERSION = "/usr/bin/python3.99", "3.99"
            sys.modules["vocablens._build"] = fake
            try:
                import vocablens
            except ImportError as e:
                print(e)
        """)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
        self.assertEqual(p.returncode, 0, p.stderr)
        msg = p.stdout.strip()
        self.assertEqual(len(msg.splitlines()), 1, msg)
        self.assertIn("built for Python 3.99 (/usr/bin/python3.99)", msg)
        self.assertIn("not {} (Python {}.{})".format(sys.executable, *sys.version_info[:2]), msg)
        self.assertIn("use /usr/bin/python3.99", msg)


if __name__ == "__main__":
    unittest.main(verbosity=2)
