"""One declaration per analysis: the Python function of every declared analysis is made from it (its signature
is `vocablens schema --python`, real defaults included), and no analysis also has a hand-written binding."""
import ast
import inspect
import unittest

from support import cli, vocablens


def split_params(text):
    """'a: int = 1, b: Union[str, int] = None' -> ['a: int = 1', 'b: Union[str, int] = None'] (brackets kept): the
    splitter the package reads pybind11's signatures with."""
    return vocablens._guard.split_top_level(text)


def parse(line):
    """'lens(model, prompt: ..., *, top_k: int = 10) -> Result' -> ('lens', [(name, keyword_only, default)])."""
    name, rest = line.split("(", 1)
    params = rest.rsplit(") -> ", 1)[0]
    out, keyword_only = [], False
    for p in split_params(params):
        if p == "*":
            keyword_only = True
            continue
        if p == "model":
            continue
        head, _, default = p.partition(" = ")
        pname = head.split(":")[0].strip()
        out.append((pname, keyword_only, ast.literal_eval(default) if default else "<required>"))
    return name, out


class Declared(unittest.TestCase):
    def test_python_signatures_are_the_declarations(self):
        _, out, _ = cli("schema", "--python")
        lines = out.strip().splitlines()
        schema = vocablens._core.analyses_schema()
        self.assertEqual(len(lines), len(schema))
        for line in lines:
            name, expected = parse(line)
            with self.subTest(analysis=name):
                fn = getattr(vocablens, name)
                got = []
                for p in inspect.signature(fn).parameters.values():
                    if p.name in ("model", "progress"):
                        continue
                    got.append((p.name, p.kind == inspect.Parameter.KEYWORD_ONLY,
                                "<required>" if p.default is inspect.Parameter.empty else p.default))
                self.assertEqual(got, expected)
                self.assertEqual(list(inspect.signature(fn).parameters)[-1], "progress")

    def test_no_analysis_is_hand_written(self):
        # The module has one binding for every analysis (run_declared); the hand-written registry is gone.
        self.assertFalse(hasattr(vocablens._core, "run"))
        self.assertFalse(hasattr(vocablens._core, "analyses"))
        declared = [s["name"] for s in vocablens._core.analyses_schema()]
        self.assertEqual(sorted(declared), sorted(vocablens._analyses._DECLARED))
        for name in declared:
            self.assertIs(getattr(vocablens, name), vocablens._analyses._DECLARED[name])
        # vocablens.analyses() lists each name once
        names = [n for n, _ in vocablens.analyses()]
        self.assertEqual(len(names), len(set(names)))

    def test_compare_keywords_are_its_declaration(self):
        # compare reads no model (not a registered analysis) but its options are declared once all the same
        spec = vocablens._core.compare_schema()
        params = inspect.signature(vocablens.compare).parameters
        self.assertEqual(list(params)[:2], ["a", "b"])
        self.assertEqual({n: p.default for n, p in params.items() if n not in ("a", "b")},
                         {o["name"]: o["default"] for o in spec["options"]})
        _, out, _ = cli("compare", "--help")
        for o in spec["options"]:
            self.assertIn(o["cli"], out)

    def test_every_declared_analysis_is_reachable(self):
        # From the registry alone, no list: the module function, __all__, the Model method (the same signature
        # but the model), run() by name, and both stubs.
        from vocablens import _stubs
        schema = vocablens._core.analyses_schema()
        self.assertGreater(len(schema), 20)
        text = _stubs.render(schema)
        compile(text, "__init__.pyi", "exec")  # the stubs are valid Python
        model_stub = text.split("class Model(_Model):\n", 1)[1]
        for s in schema:
            name = s["name"]
            with self.subTest(analysis=name):
                fn = getattr(vocablens, name)
                self.assertIn(name, vocablens.__all__)
                self.assertEqual(fn.__name__, name)
                self.assertIn(s["summary"], fn.__doc__)
                method = getattr(vocablens.Model, name)
                self.assertEqual(list(inspect.signature(method).parameters), list(inspect.signature(fn).parameters))
                self.assertIn(fn.__doc__, method.__doc__)
                self.assertIn("\ndef {}(model: Model".format(name), text)
                self.assertIn("\n    def {}(self".format(name), model_stub)
        # What Python adds on top of the declarations is public and stubbed too
        for name in ("compare", "attribution_graph"):
            self.assertIn(name, vocablens.__all__)
            self.assertIn("\ndef {}(".format(name), text)
        # every name __all__ promises exists, once
        self.assertEqual(len(vocablens.__all__), len(set(vocablens.__all__)))
        for name in vocablens.__all__:
            self.assertTrue(hasattr(vocablens, name), name)

    def test_a_wrapper_keeps_the_declaration(self):
        # lens_batch's list of prompts and patch's warning wrap the declared function: same signature, the
        # declaration's docstring, the widened type in the stub
        from vocablens import _stubs
        for name in vocablens._analyses._WRAPS:
            self.assertIn(name, vocablens._analyses._DECLARED)
        text = _stubs.render(vocablens._core.analyses_schema())
        self.assertIn("def lens_batch(model: Model, prompts: Union[str, os.PathLike, Sequence[", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
