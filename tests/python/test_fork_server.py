"""The Python tests' fork server (tests/python/fork_server.py; docs/testing.md, "The fork servers"): a script run
through it must be indistinguishable from `python3 SCRIPT` for the test that ran it. The reference is the real
interpreter, run the same way: exit status (code, or the signal it died of), stdout and stderr."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("VOCABLENS_BUILD_DIR") or os.path.join(os.path.dirname(os.path.dirname(HERE)), "build")
CLIENT = os.path.join(BUILD, "tests", "vl_test_client")
PYTHON = sys.executable

SCRIPT = r'''
import os, sys
print("argv", sys.argv)
print("name", __name__, "path0", sys.path[0] == os.path.dirname(os.path.realpath(__file__)))
print("cwd", os.getcwd(), "umask", oct(os.umask(0o22)))
print("env", os.environ.get("FORK_TEST_VALUE"), "stdin", sys.stdin.read().strip())
what = sys.argv[1]
if what == "plain":  # the server's own modules work in the worker (a real run imports them itself: ~1.4 s)
    import vocablens
    print("module", vocablens.__name__, vocablens.load_model.__module__)
sys.stdout.flush()
if what == "code":
    sys.exit(3)
if what == "message":
    sys.exit("a message for stderr")
if what == "raise":
    def inner():
        raise ValueError("raised in the script")
    inner()
if what == "interrupt":
    raise KeyboardInterrupt
if what == "atexit":
    import atexit
    atexit.register(lambda: print("atexit ran"))
'''


class ForkServer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="vocablens-py-fork-")
        cls.script = os.path.join(cls.dir, "script.py")
        with open(cls.script, "w") as f:
            f.write(SCRIPT)
        cls.sock = os.path.join(cls.dir, "s.sock")
        cls.pid_file = cls.sock + ".pid"
        subprocess.run([PYTHON, os.path.join(HERE, "fork_server.py"), "start", cls.sock, cls.pid_file, "60"], check=True)

    @classmethod
    def tearDownClass(cls):
        subprocess.run([CLIENT, "--stop", cls.sock, cls.pid_file, PYTHON])

    def run_both(self, what):
        env = dict(os.environ, FORK_TEST_VALUE="from the caller")
        cwd = os.path.join(self.dir, "cwd")
        os.makedirs(cwd, exist_ok=True)
        runs = []
        for served in (False, True):
            cmd = ([CLIENT, self.sock] if served else []) + [PYTHON, self.script, what]
            run_env = dict(env, VL_CLI_CLIENT_REQUIRE_SERVER="1") if served else env
            p = subprocess.run(cmd, input=b"some input\n", capture_output=True, cwd=cwd, env=run_env)
            runs.append((p.returncode, p.stdout.decode(), p.stderr.decode()))
        return runs

    def test_same_as_the_interpreter(self):
        runs = {what: self.run_both(what) for what in ("plain", "code", "message", "raise", "interrupt", "atexit")}
        for what, (direct, served) in runs.items():
            with self.subTest(what=what):
                self.assertEqual(served, direct)
        self.assertEqual(runs["interrupt"][1][0], -signal.SIGINT)
        self.assertIn("KeyboardInterrupt", runs["interrupt"][1][2])
        self.assertEqual(runs["code"][1][0], 3)
        self.assertIn("ValueError: raised in the script", runs["raise"][1][2])
        self.assertIn("atexit ran", runs["atexit"][1][1])
        self.assertIn("module vocablens", runs["plain"][1][1])

    def test_stop(self):  # runs last (unittest's name order): stops the class's server
        pid = int(open(self.pid_file).read())
        self.assertEqual(subprocess.run([CLIENT, "--stop", self.sock, self.pid_file, PYTHON]).returncode, 0)
        for _ in range(500):
            if not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.01)
        self.assertFalse(os.path.exists("/proc/%d" % pid))
        self.assertFalse(os.path.exists(self.sock))
        p = subprocess.run([CLIENT, self.sock, PYTHON, self.script, "plain"], capture_output=True,
                           env=dict(os.environ, VL_CLI_CLIENT_REQUIRE_SERVER="1"))
        self.assertEqual(p.returncode, 125)  # no server any more: refused, as asked


if __name__ == "__main__":
    unittest.main()
