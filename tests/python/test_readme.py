"""README's Python quick start runs as printed (from the repository root, as README says), and its
find_package snippet is the one tests/consumer/CMakeLists.txt uses (that project is built by the
package_consumer test)."""
import contextlib
import io
import os
import re
import shutil
import unittest

from support import SOURCE, tempdir


def block(readme, section, lang):
    part = readme.split("## " + section + "\n", 1)[1].split("\n## ", 1)[0]
    m = re.search("```" + lang + "\n(.*?)```", part, re.S)
    assert m, "README: no ```" + lang + " block under ## " + section
    return m.group(1)


class Readme(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
            cls.readme = f.read()

    def test_python_quick_start(self):
        code = block(self.readme, "Use from Python", "python")
        cwd = os.getcwd()
        work = tempdir("readme")
        # The snippet's paths are relative to the repository root; run it there, writing into a scratch copy
        # of runs/ so the checkout stays clean.
        os.chdir(SOURCE)
        code = code.replace('"runs/eiffel-py"', repr(os.path.join(work, "eiffel-py")))
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                ns = {}
                exec(compile(code, "README.md", "exec"), ns)
        finally:
            os.chdir(cwd)
        self.assertIn("logit_lens.json", os.listdir(os.path.join(work, "eiffel-py")))
        self.assertEqual(len(ns["pairs"]), 10)
        # text is tokenised as TransformerLens does: <|endoftext|> first, then the prompt's 10 tokens
        self.assertEqual(tuple(ns["cache"]["blocks.1.hook_resid_post"].shape), (1, 11, 64))
        self.assertEqual(tuple(ns["resid"].shape), (3 + 1, 1, 11, 64))      # gpt2-tiny: 3 layers
        self.assertEqual(tuple(ns["logits"].shape), (1, 11, 50257))
        self.assertEqual(tuple(ns["grads"]["blocks.0.hook_resid_post"].shape), (1, 11, 64))
        self.assertEqual(tuple(ns["W_O"].shape), (4, 16, 64))
        self.assertIn("position", out.getvalue())   # the DataFrame was printed
        shutil.rmtree(work, ignore_errors=True)

    def test_find_package_snippet_is_the_consumer(self):
        snippet = block(self.readme, "Use from CMake", "cmake")
        with open(os.path.join(SOURCE, "tests", "consumer", "CMakeLists.txt")) as f:
            consumer = f.read()
        for line in snippet.strip().splitlines():
            self.assertIn(line, consumer, "README's find_package snippet differs from tests/consumer")


if __name__ == "__main__":
    unittest.main(verbosity=2)
