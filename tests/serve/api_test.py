#!/usr/bin/env python3
"""`vocablens serve`'s JSON API on the gpt2-tiny fixture.

1. Agreement: POST /api/<analysis> answers exactly what `vocablens <command> ... --format json` prints (the
   provenance's command_line and created_utc removed: they say when and how each was asked), and POST
   /api/tokenize what `vocablens tokenize --json` prints. The reference is the CLI, a separate process.
2. Hostile requests leave it answering: path traversal, a 60 MB body, malformed and deeply nested JSON, a
   top_k of 1e9, unknown analyses and options, a foreign Host header, a client that leaves mid-analysis, 16
   concurrent requests; then the page and the API still answer and the process is alive.
3. A click on a cell after the lens of its prompt replays the lens's forward pass (the same JSON as the CLI's
   attribute); a client that leaves a long analysis frees its worker for the next request.
4. The access token (--token) and browse mode (`vocablens serve RUN_DIR`).

    VOCABLENS_CLI=build/vocablens python3 tests/serve/api_test.py [FIXTURES_DIR]
"""
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vlserve import VocablensServer  # noqa: E402

CLI = os.environ.get("VOCABLENS_CLI", "")
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
    "VOCABLENS_FIXTURES", os.path.join(HERE, "..", "..", "..", "shared", "fixtures"))
MODEL = os.path.join(FIXTURES, "gpt2-tiny")
PROMPT = "The Eiffel Tower is in the city of"

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def cli_json(args):
    r = subprocess.run([CLI, *args], capture_output=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"vocablens {' '.join(map(shlex.quote, args))} failed: {r.stderr.decode()[-500:]}")
    return json.loads(r.stdout)


def comparable(doc):
    doc = json.loads(json.dumps(doc))
    prov = doc.get("provenance", {})
    for k in ("command_line", "created_utc"):
        prov.pop(k, None)
    for t in doc.get("tables", []):  # wall-clock columns (heads' "seconds") differ between any two runs
        timed = [i for i, c in enumerate(t.get("columns", [])) if c == "seconds" or c.endswith("_seconds")]
        for row in t.get("rows", []) if timed else []:
            for i in timed:
                row[i] = None
    return doc


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k}: only in {'API' if k in a else 'CLI'}"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} entries"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


# The analyses the page uses, each as an API body and the same request on the command line.
CASES = [
    ("lens", {"prompt": PROMPT, "top_k": 5}, ["lens", MODEL, "--prompt", PROMPT, "--top-k", "5"], True),
    ("lens", {"prompt": PROMPT, "top_k": 5, "two_pass": True},
     ["lens", MODEL, "--prompt", PROMPT, "--top-k", "5", "--two-pass"], True),
    ("attribute", {"prompt": PROMPT, "target": " Paris", "position": 3},
     ["attribute", MODEL, "--prompt", PROMPT, "--target", " Paris", "--position", "3"], True),
    ("neurons", {"layer": 1, "neurons": "0-3", "top_k": 5},
     ["neurons", MODEL, "--layer", "1", "--neurons", "0-3", "--top-k", "5"], False),
    ("heads", {"layers": "1", "heads": [0], "top_k": 5},
     ["heads", MODEL, "--layer", "1", "--head", "0", "--top-k", "5"], False),
    ("neighbours", {"query": "Paris", "k": 5}, ["neighbours", MODEL, "Paris", "--k", "5"], False),
]


def agreement(s):
    st, schema = s.get("/api/analyses")
    check(st == 200 and isinstance(schema, list), "GET /api/analyses answers the list of declarations")
    names = {a["name"]: a for a in schema}
    check(all("options" in a and "summary" in a for a in schema), "every declaration has a summary and options")
    st, info = s.get("/api/model")
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    check(st == 200 and info["n_layers"] == cfg["n_layer"] and info["config"]["d_model"] == cfg["n_embd"],
          "GET /api/model: the config.json's layers and width")
    check(info["tokenizer"]["vocab_size"] == 50257 and info["tokenizer"]["kind"], "GET /api/model: tokenizer and its size")
    check(any(h["name"] == "blocks.L.hook_resid_pre" for h in info["hooks"]), "GET /api/model: hook names")
    check(any(h["name"] == "blocks.L.ln2.hook_scale" and h["short"] == "ln2_scale.L" and h["shape"].startswith("[B, T, 1]")
              for h in info["hooks"]) and any(h["name"] == "blocks.L.mlp.hook_in" for h in info["hooks"]),
          "GET /api/model: the norms' hook points and mlp.hook_in")
    for name, body, args, required in CASES:
        if name not in names:
            check(not required, f"{name}: registered (required by the page)")
            continue
        st, api = s.post("/api/" + name, body)
        if not check(st == 200, f"POST /api/{name} {json.dumps(body)} -> 200 (got {st}: {str(api)[:300]})"):
            continue
        cli = cli_json(args + ["--format", "json"])
        d = first_difference(comparable(api), comparable(cli))
        check(d is None, f"POST /api/{name} == vocablens {name} --format json" + (f" (first difference {d})" if d else ""))
        if name == "lens":  # which engine read the layers is recorded like the other options
            check(api["settings"].get("two_pass") is body.get("two_pass", False),
                  f"POST /api/lens {json.dumps(body)}: settings.two_pass is {body.get('two_pass', False)}")
        # The same request again: answered from the cache, the same bytes.
        _, h1, b1 = s.request("POST", "/api/" + name, body)
        _, h2, b2 = s.request("POST", "/api/" + name, body)
        check(b1 == b2 and h2.get("X-Vocablens-Cache") == "hit", f"POST /api/{name} again: cached, same answer")
    click_after_lens(s)
    st, tok = s.post("/api/tokenize", {"text": PROMPT})
    ref = cli_json(["tokenize", MODEL, PROMPT, "--json"])
    check(st == 200 and tok == ref, "POST /api/tokenize == vocablens tokenize --json")
    st, dec = s.post("/api/tokenize", {"ids": ref["ids"]})
    check(st == 200 and dec["text"] == PROMPT and dec["tokens"] == ref["tokens"], "POST /api/tokenize {ids} decodes")


PROMPT2 = "The Colosseum stands in the middle of"


def forward_cache(s):
    return s.get("/api/status")[1].get("forward_cache", {})


def click_after_lens(s):
    """A click on a cell after the lens of its prompt: its attribution reads the lens's kept forward pass (header
    X-Vocablens-Forward: replayed, GET /api/status's forward_cache.replayed + 1) and equals the CLI's, which runs
    its own forward pass in another process. A click on a prompt never seen runs the forward (computed)."""
    before = forward_cache(s)
    check(before.get("max_passes", 0) >= 1 and before.get("max_bytes", 0) > 0,
          f"GET /api/status: the forward cache and its bounds ({before})")
    st, h, b = s.request("POST", "/api/lens", {"prompt": PROMPT2, "top_k": 5})
    lens = json.loads(b)
    check(st == 200 and h.get("X-Vocablens-Forward") == "computed", f"lens of a new prompt: its forward pass computed ({h.get('X-Vocablens-Forward')})")
    layers, pos = len(lens["summary"]["layers"]), 4
    for layer in (layers - 1, 1):  # two cells of the heatmap, as the page clicks them: the cell's top-1 token
        target = lens["arrays"]["top_ids"]["data"][layer][pos][0]
        body = {"prompt": PROMPT2, "target": target, "position": pos}
        st, h, b = s.request("POST", "/api/attribute", body)
        check(st == 200 and h.get("X-Vocablens-Forward") == "replayed",
              f"click on cell ({layer}, {pos}) after the lens: the kept forward pass replayed (X-Vocablens-Forward: {h.get('X-Vocablens-Forward')})")
        cli = cli_json(["attribute", MODEL, "--prompt", PROMPT2, "--target", f"#{target}", "--position", str(pos),
                        "--format", "json"])
        d = first_difference(comparable(json.loads(b)), comparable(cli))
        check(d is None, f"the replayed click == vocablens attribute --target #{target} --position {pos} --format json"
              + (f" (first difference {d})" if d else ""))
    # The lens again with other options: replayed too, still the CLI's numbers.
    st, h, b = s.request("POST", "/api/lens", {"prompt": PROMPT2, "top_k": 3})
    cli = cli_json(["lens", MODEL, "--prompt", PROMPT2, "--top-k", "3", "--format", "json"])
    d = first_difference(comparable(json.loads(b)), comparable(cli))
    check(st == 200 and h.get("X-Vocablens-Forward") == "replayed" and d is None,
          f"lens of the same prompt, top_k 3: replayed, == vocablens lens --format json ({h.get('X-Vocablens-Forward')}, {d})")
    after = forward_cache(s)
    check(after.get("replayed", 0) - before.get("replayed", 0) == 3 and after.get("computed", 0) - before.get("computed", 0) == 1,
          f"GET /api/status: 3 passes replayed, 1 computed ({before} -> {after})")
    # A click on a prompt whose lens was never asked: its own forward pass.
    st, h, b = s.request("POST", "/api/attribute", {"prompt": PROMPT2 + " Rome", "target": " Rome", "position": 2})
    check(st == 200 and h.get("X-Vocablens-Forward") == "computed", f"click on a prompt never seen: computed ({h.get('X-Vocablens-Forward')})")


def cancel_frees_worker():
    """One worker: a long analysis whose client leaves stops (between two of its steps), so the next request is
    answered in a fraction of the long one's time; then the server still answers."""
    with VocablensServer(CLI, [MODEL], ["--workers", "1", "--queue", "4"]) as s:
        body = {"top_k": 20}  # every head's OV and QK circuits: ~10 s of one core on gpt2-tiny
        t0 = time.time()
        st, _ = s.post("/api/heads", body)
        full = time.time() - t0
        check(st == 200, f"heads, all circuits, client waiting: 200 in {full:.2f} s")
        raw = json.dumps({"top_k": 21}).encode()  # another top_k: not the cached answer
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(b"POST /api/heads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(raw)).encode() + b"\r\n\r\n" + raw)
        time.sleep(0.3)  # it runs on the one worker
        c.close()
        t1 = time.time()
        st, h, b = s.request("POST", "/api/attribute", {"prompt": PROMPT + " and", "target": " Paris"})
        follow = time.time() - t1
        check(st == 200 and follow < full / 3,
              f"the client of a long analysis left: the next request (on the same, only worker) answered in {follow:.2f} s "
              f"(the whole analysis takes {full:.2f} s; bound {full / 3:.2f} s)")
        deadline, stt = time.time() + 30, {}
        while time.time() < deadline and not (stt.get("cancelled", 0) >= 1 and stt.get("running", 1) == 0):
            stt = s.get("/api/status")[1]
            time.sleep(0.05)
        check(stt.get("cancelled") == 1 and stt.get("running") == 0, f"GET /api/status: the job counted as cancelled ({stt})")
        st, _ = s.post("/api/lens", {"prompt": PROMPT, "top_k": 2})
        check(st == 200 and s.alive(), "after it: the server answers")


def read_until_closed(c, limit_s):
    """(what the socket received, whether the peer closed it) after at most limit_s seconds."""
    c.settimeout(limit_s)
    out = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                return out, True
            out += b
    except socket.timeout:
        return out, False
    except OSError:
        return out, True


def raw_http(port, data, timeout=30):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        c.sendall(data)
        return read_until_closed(c, timeout)[0]


def status_of(raw):
    try:
        return int(raw.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return -1


def hostile(s):
    # Path traversal, raw (no client normalises the path): nothing but the page and the API exists.
    for path in ["/../../../../etc/passwd", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/api/../../etc/passwd",
                 "/..%2f..%2f..%2fetc%2fpasswd", "/index.html/../../etc/passwd", "//etc/passwd", "/api/runs/0/../../x"]:
        raw = raw_http(s.port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        check(status_of(raw) in (400, 404, 405) and b"root:" not in raw, f"GET {path} -> {status_of(raw)}, no file")
    # A 60 MB body: refused (413), the server keeps answering.
    big = b"{\"prompt\": \"" + b"a" * (60 << 20) + b"\"}"
    try:
        st, _, body = s.request("POST", "/api/lens", big, headers={"Content-Type": "application/json"}, timeout=120)
    except (ConnectionError, OSError) as e:  # the server may close the connection as soon as it has answered
        st, body = 413, str(e).encode()
    check(st == 413, f"POST /api/lens with a 60 MB body -> 413 (got {st})")
    # Malformed JSON, the wrong type, deep nesting, unknown names, a huge top_k: 4xx with one line.
    bad = [
        ("/api/lens", b"{\"prompt\": ", 400, "invalid JSON"),
        ("/api/lens", b"[1, 2]", 400, "JSON object"),
        ("/api/lens", b"[" * 200000 + b"]" * 200000, None, "nested"),
        ("/api/lens", json.dumps({"prompt": "x", "top_k": 1e9}).encode(), None, "top_k"),
        ("/api/lens", json.dumps({"prompt": "x", "top_k": 10 ** 9}).encode(), None, "top_k"),
        ("/api/lens", json.dumps({"prompt": "x", "topk": 5}).encode(), 400, "topk"),
        ("/api/lens", json.dumps({"prompt": "x", "corpus": "/etc/passwd"}).encode(), 400, "corpus"),
        ("/api/compare_embeddings", json.dumps({"model_b": "/tmp"}).encode(), 400, "model_b"),
        ("/api/spectrum", json.dumps({"matrix": "/etc/x.npy"}).encode(), 400, "matrix"),
        ("/api/lens", json.dumps({"prompt": "x" * 200000}).encode(), None, ""),
        ("/api/lens", json.dumps({"prompt": ""}).encode(), None, "prompt"),
        ("/api/no_such_analysis", b"{}", 404, "no analysis named"),
        ("/api/tokenize", json.dumps({"ids": [10 ** 12]}).encode(), 400, "outside"),
        ("/api/tokenize", json.dumps({"text": 5}).encode(), 400, "text"),
    ]
    for path, body, want, words in bad:
        st, _, b = s.request("POST", path, body, headers={"Content-Type": "application/json"})
        try:
            msg = json.loads(b).get("error", "")
        except ValueError:
            msg = ""
        ok = (st == want) if want else (400 <= st < 500)
        check(ok and msg and "\n" not in msg and words in msg,
              f"POST {path} {body[:50]!r}... -> {st} {msg[:140]!r}")
    st, _, b = s.request("POST", "/api/lens", b"{\"prompt\": \"x\"}", headers={"Content-Type": "text/plain"})
    check(st == 415, f"POST /api/lens as text/plain (a cross-site form) -> 415 (got {st})")
    st, _, b = s.request("GET", "/api/model", headers={"Host": "evil.example:80"})
    check(st == 403, f"GET /api/model with Host: evil.example (DNS rebinding) -> 403 (got {st})")
    st, _, b = s.request("GET", "/api/lens")
    check(st == 405, f"GET /api/lens -> 405 (got {st})")
    # A client that leaves mid-analysis: its work is cancelled, the server goes on. The analysis must outlast
    # the client: every head's OV/QK circuits (seconds on gpt2-tiny), a different top_k each so none is cached.
    t_left = time.time()
    for i in range(3):
        c = socket.create_connection(("127.0.0.1", s.port))
        body = json.dumps({"top_k": 20 + i}).encode()
        c.sendall(b"POST /api/heads HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.05)
        c.close()
    # The server saw them go: their jobs are counted as cancelled (skipped if still queued, else stopped or
    # dropped), GET /api/status says so once the workers reach them.
    deadline, st = time.time() + 120, {}
    while time.time() < deadline and not (st.get("cancelled", 0) >= 3 and st.get("running", 1) == 0):
        st = s.get("/api/status")[1]
        time.sleep(0.1)
    check(st.get("cancelled", 0) >= 3 and st.get("running") == 0,
          f"3 clients that left mid-analysis: {st.get('cancelled')} jobs counted as cancelled, the workers free again "
          f"{time.time() - t_left:.1f} s later (GET /api/status: {st})")
    # The listening socket's backlog (ss's Send-Q): far above cpp-httplib's 5, so bursts are queued, not reset.
    ss = subprocess.run(["ss", "-ltnH", f"sport = :{s.port}"], capture_output=True, text=True)
    backlog = int(ss.stdout.split()[2]) if ss.returncode == 0 and len(ss.stdout.split()) > 2 else -1
    check(backlog >= 128, f"the listen backlog is {backlog} (ss -ltn; cpp-httplib's own is 5)")
    # 16 concurrent analyses (distinct prompts, so no cache): each answered 200 or 503 (busy), none lost.
    results = [None] * 16

    def one(i):
        try:
            results[i] = s.post("/api/lens", {"prompt": f"{PROMPT} number {i}", "top_k": 3})[0]
        except Exception as e:  # noqa: BLE001
            results[i] = repr(e)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    t0 = time.time()
    for t in threads:
        t.start()
    # While they run, the page answers at once.
    st, _, page = s.request("GET", "/")
    page_s = time.time() - t0
    for t in threads:
        t.join()
    # Every request gets an answer: 200, or 503 when the pool is full. (A reset here once came from cpp-httplib's
    # listen backlog of 5: a burst of 17 connections overflowed it, the kernel fell back to SYN cookies and
    # reset a connection; the server now raises the backlog, checked below.)
    check(all(r in (200, 503) for r in results) and results.count(200) >= 2,
          f"16 concurrent POST /api/lens: {results.count(200)} x 200, {results.count(503)} x 503 (busy), none lost: {results}")
    check(st == 200 and b"vocablens explorer" in page, f"GET / while 16 analyses run: 200 in {page_s:.2f} s")
    st, _ = s.get("/api/model")
    check(st == 200 and s.alive(), "after all of it: the API answers and the process is alive")


def token_and_browse():
    with VocablensServer(CLI, [MODEL], ["--token"]) as s:
        check(s.token is not None and len(s.token) == 32, "--token: a 128-bit token in the printed URL")
        tok, s.token = s.token, None
        st, _ = s.get("/api/model")
        check(st == 401, f"--token: a request without it -> 401 (got {st})")
        st, _ = s.get("/api/model", headers={"X-Vocablens-Token": "0" * 32})
        check(st == 401, f"--token: a wrong one -> 401 (got {st})")
        st, _ = s.get("/api/model?token=" + tok)
        check(st == 200, f"--token: ?token= in the URL -> 200 (got {st})")
        st, _ = s.get("/api/model", headers={"Authorization": "Bearer " + tok})
        check(st == 200, f"--token: Authorization: Bearer -> 200 (got {st})")
    d = tempfile.mkdtemp(prefix="vlserve-runs-")
    subprocess.run([CLI, "lens", MODEL, "--prompt", PROMPT, "--top-k", "3", "--out", d], check=True, capture_output=True)
    with open(os.path.join(d, "logit_lens.json")) as f:
        saved = json.load(f)
    with VocablensServer(CLI, [d]) as s:
        st, runs = s.get("/api/runs")
        check(st == 200 and runs["runs"][0]["results"][0]["kind"] == "logit_lens", "browse mode: GET /api/runs lists the run")
        st, doc = s.get("/api/runs/0/logit_lens")
        same = st == 200 and all(doc[k] == saved[k] for k in ("kind", "settings", "summary", "provenance"))
        check(same and doc["arrays"]["top_ids"]["data"] and doc["arrays"]["top_ids"]["shape"] == saved["arrays"]["top_ids"]["shape"],
              "browse mode: a saved result with its arrays inline")
        st, err = s.post("/api/lens", {"prompt": "x"})
        check(st == 404 and "no model" in err.get("error", ""), f"browse mode: analyses -> 404 no model (got {st})")
        st, _ = s.get("/api/runs/7/logit_lens")
        check(st == 404, "browse mode: an unknown run -> 404")


MIXTRAL = os.path.join(HERE, "..", "fixtures", "families", "mixtral")  # the test suite's mixture-of-experts fixture


def experts_api():
    """A mixture of experts: POST /api/experts answers what `vocablens experts --format json` prints, refuses a corpus
    (a file on the server) in one line, and an ablated lens is neither replayed from nor kept as the prompt's forward."""
    with VocablensServer(CLI, [MIXTRAL]) as s:
        body = {"prompt": "the cat sat on the mat", "top_k": 3, "layers": "1", "ablate_expert": ["1.2"]}
        st, api = s.post("/api/experts", body)
        cli = cli_json(["experts", MIXTRAL, "--prompt", body["prompt"], "--top-k", "3", "--layers", "1",
                        "--ablate-expert", "1.2", "--format", "json"])
        d = first_difference(comparable(api), comparable(cli)) if st == 200 else f"status {st}: {str(api)[:300]}"
        check(d is None, "POST /api/experts == vocablens experts --format json" + (f" (first difference {d})" if d else ""))
        st, err = s.post("/api/experts", {"corpus": "/etc/passwd"})
        check(st == 400 and "names a file on the server" in err.get("error", ""), f"POST /api/experts {{corpus}} -> 400 (got {st})")
        # plain lens, ablated lens, plain lens again: the third is the first (the memo kept no ablated forward)
        lens = {"prompt": body["prompt"], "top_k": 3}
        _, plain = s.post("/api/lens", lens)
        st, ablated = s.post("/api/lens", dict(lens, ablate_expert=["1.2"]))
        _, again = s.post("/api/lens", dict(lens, top_k=4))
        check(st == 200 and ablated["arrays"]["top_ids"] != plain["arrays"]["top_ids"]
              and [r[:3] for r in again["arrays"]["top_ids"]["data"][-1]] == [r for r in plain["arrays"]["top_ids"]["data"][-1]],
              "POST /api/lens with ablate_expert reads the ablated forward; the plain lens after it is unchanged")
        # scale_expert: factor 0 is the zero ablation (the same lens), and is not kept as the prompt's forward either
        st, scaled = s.post("/api/lens", dict(lens, scale_expert=["1.2=0"]))
        _, again2 = s.post("/api/lens", dict(lens, top_k=5))
        check(st == 200 and scaled["arrays"]["top_ids"] == ablated["arrays"]["top_ids"]
              and scaled["arrays"]["top_probs"] == ablated["arrays"]["top_probs"]
              and [r[:3] for r in again2["arrays"]["top_ids"]["data"][-1]] == [r for r in plain["arrays"]["top_ids"]["data"][-1]],
              "POST /api/lens with scale_expert 1.2=0 is the ablated lens; the plain lens after it is unchanged")
        body = {"prompt": "the cat sat on the mat", "top_k": 3, "layers": "1", "scale_expert": ["1.2=2.5"]}
        st, api = s.post("/api/experts", body)
        cli = cli_json(["experts", MIXTRAL, "--prompt", body["prompt"], "--top-k", "3", "--layers", "1",
                        "--scale-expert", "1.2=2.5", "--format", "json"])
        d = first_difference(comparable(api), comparable(cli)) if st == 200 else f"status {st}: {str(api)[:300]}"
        check(d is None and api["settings"]["scale_expert"] == ["1.2=2.5"],
              "POST /api/experts {scale_expert} == vocablens experts --scale-expert" + (f" (first difference {d})" if d else ""))
        st, err = s.post("/api/experts", dict(body, scale_expert=["1.2=inf"]))
        check(st == 400 and "the factor must be finite" in err.get("error", ""), f"a non-finite factor -> 400 in one line (got {st})")
        if not s.alive():
            failures.append("the mixture-of-experts server died")


def inputs_missing():
    """What the serve tests lack (the CLI, the fixture) as a FAIL line, or None."""
    if not CLI or not os.path.exists(CLI):
        return "FAIL: VOCABLENS_CLI does not name the built vocablens binary"
    if not os.path.isdir(MODEL):
        return f"FAIL: fixture missing: {MODEL}"
    return None


def main():
    if inputs_missing():
        print(inputs_missing())
        return 1
    with VocablensServer(CLI, [MODEL]) as s:
        agreement(s)
        hostile(s)
        if not s.alive():
            failures.append("the server died")
    cancel_frees_worker()
    token_and_browse()
    experts_api()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
