"""Start `vocablens serve` on 127.0.0.1 and a free port, talk to it, always stop it (tests and bench).

    with VocablensServer(cli, [model_dir]) as s:
        status, doc = s.post("/api/lens", {"prompt": "Hi", "top_k": 5})
"""
import atexit
import http.client
import json
import os
import re
import select
import signal
import subprocess
import time

_LIVE = set()


@atexit.register
def _kill_leftovers():
    for p in list(_LIVE):
        if p.poll() is None:
            p.kill()
            p.wait()


class VocablensServer:
    def __init__(self, cli, args, extra=(), env=None, start_timeout=180, preexec_fn=None):
        self.cmd = [cli, "serve", *args, "--host", "127.0.0.1", "--port", "0", *extra]
        self.preexec_fn = preexec_fn  # e.g. a memory cap (resource.setrlimit) in the child
        self.env = dict(os.environ, **(env or {}))
        self.start_timeout = start_timeout
        self.proc = None
        self.port = None
        self.url = None
        self.token = None
        self.stderr_path = None

    def __enter__(self):
        import tempfile
        fd, self.stderr_path = tempfile.mkstemp(prefix="vlserve-", suffix=".err")
        err = os.fdopen(fd, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=err, env=self.env,
                                     preexec_fn=self.preexec_fn)
        err.close()
        _LIVE.add(self.proc)
        deadline = time.time() + self.start_timeout
        line = b""
        while time.time() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                line = self.proc.stdout.readline()
                if b"http://" in line:
                    break
            if self.proc.poll() is not None:
                raise RuntimeError(f"vocablens serve exited with {self.proc.returncode}: {self.stderr()}")
        m = re.search(rb"http://127\.0\.0\.1:(\d+)/(\?token=([0-9a-f]+))?", line)
        if not m:
            self.__exit__(None, None, None)
            raise RuntimeError(f"vocablens serve printed no URL within {self.start_timeout} s: {line!r} {self.stderr()}")
        self.port = int(m.group(1))
        self.token = m.group(3).decode() if m.group(3) else None
        self.url = m.group(0).decode()
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _LIVE.discard(self.proc)
        if self.stderr_path and os.path.exists(self.stderr_path):
            os.unlink(self.stderr_path)
        return False

    def alive(self):
        return self.proc.poll() is None

    def stderr(self):
        try:
            with open(self.stderr_path) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def request(self, method, path, body=None, headers=None, timeout=300):
        """(status, headers dict, raw body bytes). body: bytes, str or a JSON-able object."""
        h = {} if headers is None else dict(headers)
        if self.token and "X-Vocablens-Token" not in h:
            h["X-Vocablens-Token"] = self.token
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def get(self, path, **kw):
        s, _, b = self.request("GET", path, **kw)
        return s, _json(b)

    def post(self, path, body, **kw):
        s, _, b = self.request("POST", path, body, **kw)
        return s, _json(b)


def _json(b):
    try:
        return json.loads(b)
    except ValueError:
        return {"_raw": b[:200]}
