#!/usr/bin/env python3
"""`vocablens serve` under abuse, on the gpt2-tiny fixture, in a process whose address space is capped at 4 GB.

After each abuse a normal lens request (a top_k never asked before, so computed, not cached) must be answered
within 1 s and equal what `vocablens lens ... --format json` prints (the reference: a separate process):
1. slowloris: 60 connections that send a header line every 0.4 s; they are answered 408 and closed once
   --request-timeout (3 s here) has passed;
2. connections over the per-client cap are answered 503 at once;
3. a chunked body over --max-body is refused (413) without being buffered (the server's resident memory);
4. clients that ask for big answers and never read them: their connections are dropped after --write-timeout;
5. two too-big requests at once (lens top_k 50257, heads top_k 10^6): 413 before any work, naming the size;
   a request whose declared memory estimate exceeds --memory-budget: 413 naming the estimate;
6. protocol: two Host headers, media types compared exactly and case-insensitively;
   then the server's resident memory is within 1.2x of what it was after its first answer;
7. start-up refusals: --max-body -1 / 0 / 2^64, --host "", --corpus on a FIFO, /dev/zero or a directory,
   --tuned /etc, and a port another server holds (no SO_REUSEPORT: it says which process holds it).

    VOCABLENS_CLI=build/vocablens python3 tests/serve/hostile_test.py [FIXTURES_DIR]
"""
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_test import CLI, MODEL, PROMPT, check, cli_json, comparable, failures, inputs_missing, raw_http, \
    read_until_closed  # noqa: E402
from vlserve import VocablensServer  # noqa: E402

MEMORY_CAP = 4 << 30
LENS_BOUND_S = 1.0


def cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def server_pid(port):
    """The process listening on `port` (the fork server's worker, not the client vlserve started)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inode = cols[9]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
        except OSError:
            continue
    return None


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


class Probe:
    """A normal lens request, each time with a new top_k (computed, not from the answer cache)."""

    def __init__(self, server):
        self.s = server
        self.k = 4

    def __call__(self, after):
        self.k += 1
        t0 = time.time()
        try:
            st, _, body = self.s.request("POST", "/api/lens", {"prompt": PROMPT, "top_k": self.k}, timeout=30)
        except OSError as e:
            check(False, f"after {after}: lens request failed: {e!r}")
            return
        took = time.time() - t0
        ref = cli_json(["lens", MODEL, "--prompt", PROMPT, "--top-k", str(self.k), "--format", "json"])
        same = st == 200 and comparable(json.loads(body)) == comparable(ref)
        check(same and took <= LENS_BOUND_S,
              f"after {after}: lens top_k {self.k} answered {st} in {took:.3f} s (bound {LENS_BOUND_S} s), "
              f"{'equal to' if same else 'DIFFERENT from'} the CLI's")


def connect(port):
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a non-reader's window stays small
    c.settimeout(10)
    c.connect(("127.0.0.1", port))
    return c


def slowloris(s, probe, timeout_s):
    socks = []
    for _ in range(60):
        c = connect(s.port)
        c.sendall(b"POST /api/lens HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(c)
    stop = threading.Event()

    def trickle():
        i = 0
        while not stop.is_set():
            for c in socks:
                try:
                    c.send(f"X-Slow-{i}: y\r\n".encode())
                except OSError:
                    pass
            i += 1
            stop.wait(0.4)
    t = threading.Thread(target=trickle)
    t.start()
    time.sleep(0.5)
    probe("60 slowloris connections were opened (while they trickle headers)")
    # Each must be answered 408 and closed once its request has taken --request-timeout.
    t0 = time.time()
    closed = 0
    for c in socks:
        out, eof = read_until_closed(c, max(0.1, timeout_s + 3 - (time.time() - t0)))
        closed += eof and out.startswith(b"HTTP/1.1 408")
    stop.set()
    t.join()
    for c in socks:
        c.close()
    check(closed == 60, f"slowloris: {closed} of 60 connections answered 408 and closed within "
                        f"{time.time() - t0:.1f} s (--request-timeout {timeout_s})")
    probe("the slowloris connections were dropped")


def over_the_cap(s, probe, per_client):
    idle = [connect(s.port) for _ in range(per_client)]
    time.sleep(0.2)
    extra = connect(s.port)
    out, eof = read_until_closed(extra, 2)
    extra.close()
    body = out.split(b"\r\n\r\n", 1)[-1]
    check(out.startswith(b"HTTP/1.1 503") and b"limit per client" in body and eof,
          f"a connection over --max-client-connections {per_client}: 503 at once ({body[:120]!r})")
    for c in idle:
        c.close()
    time.sleep(0.2)
    probe(f"{per_client} idle connections and one over the cap")


def chunked_over_limit(s, probe, pid):
    before = rss_mb(pid)
    c = connect(s.port)
    c.sendall(b"POST /api/lens HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
    sent, out = 0, b""
    try:
        while sent < (256 << 20):  # 256 MB offered; the server takes ~1 MB of it
            c.sendall(chunk)
            sent += 0x10000
            c.setblocking(False)
            try:
                out += c.recv(65536)
            except BlockingIOError:
                pass
            c.setblocking(True)
            if out:
                break
    except OSError:
        pass
    c.settimeout(5)
    try:
        out += c.recv(65536)
    except OSError:
        pass
    c.close()
    grew = rss_mb(pid) - before
    check(out.startswith(b"HTTP/1.1 413") and sent < (64 << 20) and grew < 48,
          f"a chunked body over --max-body: {out[:12]!r} after {sent >> 20} MB sent; resident memory "
          f"{before:.0f} -> {before + grew:.0f} MB")
    # A chunked body within the limit is read as any other.
    body = json.dumps({"prompt": PROMPT, "top_k": 3}).encode()
    raw = (b"POST /api/lens HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    out = raw_http(s.port, raw, timeout=10)
    check(out.startswith(b"HTTP/1.1 200"), f"a chunked body within the limit: {out[:12]!r}")
    probe("a chunked body over the limit")


def non_readers(s, probe, write_timeout_s):
    socks = []
    for i in range(4):
        c = connect(s.port)
        # 96 000 values: a 6.5 MB answer, more than the server's send buffer (4 MB at most) and this window
        body = json.dumps({"prompt": PROMPT, "top_k": 2400 + i}).encode()
        c.sendall(b"POST /api/lens HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        socks.append(c)
    # Their answers are computed (the workers' time), then they hold only their own connections.
    deadline, st = time.time() + 60, {}
    while time.time() < deadline:
        st = s.get("/api/status")[1]
        if st.get("running") == 0 and st.get("queued") == 0:
            break
        time.sleep(0.05)
    probe("4 clients asked for multi-MB answers and read none of them")
    # Still not reading, past --write-timeout: the server must have given up. Reading now gets what was sent
    # before the drop — less than the answer's Content-Length — then EOF or a reset; a server still writing
    # would deliver the whole answer as this reads.
    time.sleep(write_timeout_s + 1.5)
    dropped = 0
    for c in socks:
        out, closed = read_until_closed(c, 5)
        head = out.split(b"\r\n\r\n", 1)[0].lower()
        length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0]) if b"content-length:" in head else -1
        dropped += closed and len(out) - len(head) - 4 < length
    check(dropped == 4, f"{dropped} of the 4 non-reading clients dropped by the server, their answers cut, "
                        f"{write_timeout_s + 1.5:.1f} s after their answers were ready (--write-timeout {write_timeout_s})")
    for c in socks:
        c.close()
    probe("the non-reading clients were dropped")


def two_big_at_once(s, probe):
    reqs = [("/api/lens", {"prompt": PROMPT, "top_k": 50257}),
            ("/api/heads", {"top_k": 1000000, "kind": "ov", "layers": "0", "heads": "0"})]
    got = [None, None]

    def one(i):
        try:
            got[i] = s.post(*reqs[i], timeout=60)
        except OSError as e:
            got[i] = (-1, {"error": repr(e)})
    t0 = time.time()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.time() - t0
    for (path, _), (st, doc) in zip(reqs, got):
        msg = doc.get("error", "")
        check(st == 413 and "values" in msg and "100000" in msg and "\n" not in msg,
              f"{path} with a huge top_k beside another: {st} in {took:.2f} s: {msg[:160]!r}")
    probe("two too-big requests at once")


def protocol(s):
    raw = (b"GET /api/model HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
    out = raw_http(s.port, raw, timeout=10)
    check(out.startswith(b"HTTP/1.1 400") and b"two Host headers" in out, f"two Host headers -> {out[:12]!r}")
    body = json.dumps({"prompt": PROMPT, "top_k": 3})
    for ctype, want in [("application/jsonx", 415), ("application/json-seq", 415), ("text/json", 415),
                        ("APPLICATION/JSON", 200), ("application/json; charset=utf-8", 200),
                        ("Application/Json ; charset=UTF-8", 200)]:
        st, _, _ = s.request("POST", "/api/lens", body, headers={"Content-Type": ctype})
        check(st == want, f"Content-Type: {ctype} -> {st} (want {want})")


def start_knn(s):
    """A knn request on a raw connection (its client can leave), and the server's status once it runs."""
    body = json.dumps({"k": 5}).encode()
    c = connect(s.port)
    c.sendall(b"POST /api/knn HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    deadline, st = time.time() + 30, {}
    while time.time() < deadline and st.get("running") != 1:
        st = s.get("/api/status")[1]
        time.sleep(0.05)
    return c, st


def memory_budget():
    """A request whose declared estimate (the figure `lens --dry-run` prints) needs more than --memory-budget
    beyond the model is refused before any work, naming the estimate; a small one runs."""
    with VocablensServer(CLI, [MODEL], ["--memory-budget", "64"], preexec_fn=cap_memory) as s:
        st, doc = s.post("/api/lens", {"prompt": PROMPT, "top_k": 3})
        check(st == 200, f"--memory-budget 64: a short lens runs ({st})")
        # 4 lens rows x 120 positions of a 50257-token vocabulary: a logit block of ~96 MiB alone.
        ids = list(range(100, 220))
        st, doc = s.post("/api/lens", {"prompt": ids, "top_k": 1})
        msg = doc.get("error", "")
        check(st == 413 and "memory budget of 64 MiB" in msg and "the lens of 120 tokens" in msg and "\n" not in msg,
              f"--memory-budget 64: a 120-token lens -> {st}: {msg[:200]!r}")
        st, _ = s.post("/api/lens", {"prompt": PROMPT, "top_k": 4})
        check(st == 200, f"and the server still answers ({st})")
    # Beside running work: every analysis declares its estimate (knn: the vectors, their normalised copy, a block
    # of similarities, ~420 MiB on gpt2-tiny). One knn fits a 600 MiB budget; a second while it runs does not (503,
    # naming what the running ones hold), a small lens does (200); once the first is cancelled the budget is free.
    with VocablensServer(CLI, [MODEL], ["--memory-budget", "600", "--max-answer-values", "10000000"],
                         preexec_fn=cap_memory) as s:
        c, st = start_knn(s)
        check(st.get("running") == 1, f"--memory-budget 600: the first knn is running ({st.get('running')})")
        code, doc = s.post("/api/knn", {"k": 6})
        msg = doc.get("error", "")
        check(code == 503 and msg.startswith("busy: the k-NN graph") and "the analyses running hold" in msg
              and "600 MiB budget" in msg, f"a second knn beside it -> {code}: {msg[:200]!r}")
        code, _ = s.post("/api/lens", {"prompt": PROMPT, "top_k": 3})
        check(code == 200, f"a small lens beside it fits the budget -> {code}")
        c.close()  # the client leaves: the knn is cancelled and its reservation given back
        deadline, code = time.time() + 30, 0
        while time.time() < deadline and s.get("/api/status")[1].get("running") != 0:
            time.sleep(0.05)
        st = s.get("/api/status")[1]
        check(st.get("running") == 0 and st.get("cancelled", 0) >= 1,
              f"the first knn's client left: running {st.get('running')}, cancelled {st.get('cancelled')}")
        # Its reservation was given back: another knn is admitted (running, not 503), then left too.
        c, st = start_knn(s)
        check(st.get("running") == 1, f"after it, a knn is admitted again (running {st.get('running')})")
        c.close()


def refused_at_start():
    def serve(args, timeout=60):
        t0 = time.time()
        try:
            r = subprocess.run([CLI, "serve", *args], capture_output=True, text=True, timeout=timeout,
                               preexec_fn=cap_memory)
            return r.returncode, r.stderr.strip(), time.time() - t0
        except subprocess.TimeoutExpired:
            return None, "timed out", time.time() - t0
    d = tempfile.mkdtemp(prefix="vlserve-hostile-")
    fifo = os.path.join(d, "corpus.fifo")
    os.mkfifo(fifo)
    cases = [
        (["--max-body", "-1"], "--max-body"), (["--max-body", "0"], "--max-body"),
        (["--max-body", "18446744073709551616"], "--max-body"), (["--host", ""], "--host"),
        (["--corpus", fifo], "FIFO"), (["--corpus", "/dev/zero"], "character device"),
        (["--corpus", d], "directory"), (["--tuned", "/etc"], "--tuned"),
        (["--max-connections", "0"], "--max-connections"), (["--request-timeout", "-3"], "--request-timeout"),
        (["--memory-budget", "-1"], "--memory-budget"),
        # 4104 threads of 2 MB stacks do not fit in the 4 GB address space: refused before "serving", where
        # cpp-httplib's own pool, started after it, hung on the failure.
        (["--max-connections", "4096"], "could not start 4104 connection threads"),
    ]
    for extra, words in cases:
        rc, err, took = serve([MODEL, "--port", "0", *extra])
        first = err.splitlines()[0] if err else ""  # (CLI11's own errors add "Run with --help ..." below)
        check(rc not in (None, 0) and words in first and took < 30,
              f"serve {' '.join(extra)}: refused at start-up (exit {rc}, {took:.1f} s): {first[:160]!r}")
    # A port another server holds: refused, naming the process; the first server still answers alone.
    with VocablensServer(CLI, [MODEL]) as first:
        rc, err, _ = serve([MODEL, "--host", "127.0.0.1", "--port", str(first.port)])
        check(rc not in (None, 0) and "in use" in err and f"pid {server_pid(first.port)}" in err,
              f"a second serve on port {first.port}: exit {rc}: {err.splitlines()[-1][:160] if err else ''!r}")
        st, _ = first.get("/api/model")
        check(st == 200, "the first server still answers")


def main():
    if inputs_missing():
        print(inputs_missing())
        return 1
    t_start = time.time()
    timeout_s, write_timeout_s, per_client = 3, 3, 80
    extra = ["--request-timeout", str(timeout_s), "--write-timeout", str(write_timeout_s),
             "--max-client-connections", str(per_client), "--max-connections", "100"]
    with VocablensServer(CLI, [MODEL], extra, preexec_fn=cap_memory) as s:
        pid = server_pid(s.port)
        with open(f"/proc/{pid}/limits") as f:  # the cap reached the server (a fork-server worker too)
            cap = [line.split()[3] for line in f if line.startswith("Max address space")]
        check(cap == [str(MEMORY_CAP)], f"the server (pid {pid}) runs with its address space capped: {cap} bytes")
        start_rss = rss_mb(pid)
        # No --memory-budget: the budget is what is left of the capped address space, not the machine's memory.
        budget = s.get("/api/status")[1].get("memory", {}).get("budget_mib", -1)
        check(0 < budget < MEMORY_CAP / 1048576, f"the default memory budget under the {MEMORY_CAP >> 30} GB cap: "
                                                  f"{budget:.0f} MiB (what the address space has left)")
        probe = Probe(s)
        probe("start-up")
        # The first analysis sets up what every later one reuses (LibTorch's and OpenMP's thread pools, the
        # tokenizer's caches): memory after the abuse is compared with memory after that first answer.
        warm_rss = rss_mb(pid)
        slowloris(s, probe, timeout_s)
        over_the_cap(s, probe, per_client)
        chunked_over_limit(s, probe, pid)
        non_readers(s, probe, write_timeout_s)
        two_big_at_once(s, probe)
        protocol(s)
        check(s.alive(), "the server is alive after all of it")
        end_rss = rss_mb(pid)
        st = s.get("/api/status")[1]
        check(end_rss <= 1.2 * warm_rss,
              f"resident memory: {start_rss:.0f} MB at start, {warm_rss:.0f} MB after the first answer, "
              f"{end_rss:.0f} MB after the abuse ({end_rss / warm_rss:.2f}x, bound 1.2x; answer cache "
              f"{st['answer_cache']['bytes'] >> 10} kB; address space capped at {MEMORY_CAP >> 30} GB)")
    memory_budget()
    refused_at_start()
    print(f"{len(failures)} failure(s) in {time.time() - t_start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
