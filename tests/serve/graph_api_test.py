#!/usr/bin/env python3
"""`vocablens serve --transcoders DIR`: POST /api/graph, its progress and its cancellation, on gpt2-tiny.

1. GET /api/model names the transcoders; POST /api/graph {"transcoders": true} answers Neuronpedia's graph JSON
   (schema_version 1, every node and link field, links between nodes that exist), the same graph as
   `vocablens graph ... --format json` run separately.
2. Bad input is one 4xx and the server keeps serving: max_feature_nodes 0, an unknown option, a path for the
   transcoders, no prompt; a server without --transcoders refuses {"transcoders": true}; a folder that is not a
   transcoder set for the model is refused at start-up in one line.
3. GET /api/progress/<id> follows a graph whose POST named <id> (X-Vocablens-Progress): queued or running, rows
   done of the total, the declared estimate; 404 once answered. A client that leaves a long graph frees the only
   worker within a third of the graph's time, and the job is counted as cancelled.
4. --memory-budget: a graph over it is 413 from its worker with its estimate; under a budget that fits some of its
   features, the 413 names the largest max_feature_nodes that fits, and that many are admitted and run where one
   more is refused.

    VOCABLENS_CLI=build/vocablens python3 tests/serve/graph_api_test.py [FIXTURES_DIR]
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_test import CLI, HERE, MODEL, PROMPT, check, failures  # noqa: E402  (the same fixture, CLI and reporting)
from vlserve import VocablensServer  # noqa: E402

TRANSCODERS = os.path.join(HERE, "..", "fixtures", "graph", "gpt2-tiny")
# ~117 tokens of the 128-token context: every active feature's row, several seconds of one core.
# A prompt whose every active feature needs far more memory than one feature (as in graph_test's refusal).
REFUSED = "The Eiffel Tower is in Paris and the Colosseum is in Rome. " * 5
LONG = " ".join(["The river runs through the old city and the bridge crosses it."] * 9)

NODE_FIELDS = {"node_id", "feature", "layer", "ctx_idx", "feature_type", "token_prob", "is_target_logit", "run_idx",
               "reverse_ctx_idx", "jsNodeId", "clerp", "influence", "activation"}


def neuronpedia_ok(np):
    """None when `np` is a well-formed Neuronpedia graph, else what is wrong."""
    if np.get("metadata", {}).get("schema_version") != 1:
        return "metadata.schema_version is not 1"
    if not np.get("nodes") or not np.get("links"):
        return "no nodes or no links"
    for n in np["nodes"]:
        if set(n) != NODE_FIELDS:
            return f"node fields {sorted(set(n) ^ NODE_FIELDS)} differ"
    ids = {n["node_id"] for n in np["nodes"]}
    # Unique: circuit-tracer's current scheme writes an error as `{layer}_-1_{pos}`, never a feature's id.
    if len(ids) != len(np["nodes"]):
        return "duplicate node ids"
    for e in np["links"]:
        if set(e) != {"source", "target", "weight"} or e["source"] not in ids or e["target"] not in ids:
            return f"link {e} is malformed or names a node that is not in the graph"
    if {n["feature_type"] for n in np["nodes"]} != {"cross layer transcoder", "mlp reconstruction error", "embedding", "logit"}:
        return "not every kind of node is present"
    return None


def graph_api(s):
    st, model = s.get("/api/model")
    tc = model.get("transcoders") or {}
    check(st == 200 and tc.get("n_layers") == 3 and len(tc.get("n_features", [])) == 3 and "gpt2-tiny" in tc.get("source", ""),
          f"GET /api/model names the transcoders: {tc}")
    st, doc = s.post("/api/graph", {"prompt": PROMPT, "transcoders": True})
    np = doc.get("summary", {}).get("neuronpedia", {}) if st == 200 else {}
    bad = neuronpedia_ok(np) if st == 200 else f"status {st}: {str(doc)[:200]}"
    check(bad is None, f"POST /api/graph: Neuronpedia's graph JSON ({len(np.get('nodes', []))} nodes, "
                       f"{len(np.get('links', []))} links)" + (f": {bad}" if bad else ""))
    r = subprocess.run([CLI, "graph", MODEL, "--transcoders", TRANSCODERS, "--prompt", PROMPT, "--format", "json"],
                       capture_output=True, timeout=600)
    cli = json.loads(r.stdout)["summary"]["neuronpedia"] if r.returncode == 0 else {}
    same = (cli and [n["node_id"] for n in cli["nodes"]] == [n["node_id"] for n in np.get("nodes", [])]
            and [(e["source"], e["target"], e["weight"]) for e in cli["links"]]
            == [(e["source"], e["target"], e["weight"]) for e in np.get("links", [])])
    check(same, "the same nodes and links as `vocablens graph --format json`")
    st, h, body = s.request("POST", "/api/graph", {"prompt": PROMPT, "transcoders": True})
    check(st == 200 and h.get("X-Vocablens-Cache") == "hit" and json.loads(body)["summary"]["neuronpedia"] == np,
          f"the same graph asked again (a reload of the graph view): answered from the cache ({h.get('X-Vocablens-Cache')})")

    for body, want, what in [
        ({"prompt": PROMPT, "transcoders": True, "max_feature_nodes": 0}, "max_feature_nodes", "max_feature_nodes 0"),
        ({"prompt": PROMPT, "transcoders": True, "colour": "red"}, "colour", "an unknown option"),
        ({"prompt": PROMPT, "transcoders": TRANSCODERS}, "does not open", "a path for the transcoders"),
        ({"prompt": PROMPT, "transcoders": "/etc"}, "does not open", "/etc for the transcoders"),
        ({"transcoders": True}, "prompt", "no prompt"),
    ]:
        st, err = s.post("/api/graph", body)
        check(400 <= st < 500 and want in err.get("error", ""), f"POST /api/graph with {what}: {st} {err.get('error', '')[:110]}")
    st, _ = s.post("/api/lens", {"prompt": PROMPT, "top_k": 3})
    check(st == 200 and s.alive(), "after the bad requests: the server answers")


def progress_and_cancel():
    with VocablensServer(CLI, [MODEL], ["--transcoders", TRANSCODERS, "--workers", "1"]) as s:
        st, _ = s.get("/api/progress/nothing-here")
        check(st == 404, f"GET /api/progress of an unknown id: {st}")
        # The whole long graph, its client waiting, and followed: progress seen while it runs.
        seen = []
        raw = json.dumps({"prompt": LONG, "transcoders": True}).encode()
        c = socket.create_connection(("127.0.0.1", s.port))
        t0 = time.time()
        c.sendall(b"POST /api/graph HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"X-Vocablens-Progress: follow-1\r\nConnection: close\r\nContent-Length: " + str(len(raw)).encode()
                  + b"\r\n\r\n" + raw)
        c.settimeout(0.1)
        answer = b""
        while True:
            try:
                chunk = c.recv(1 << 20)
                if not chunk:
                    break
                answer += chunk
            except socket.timeout:
                st, p = s.get("/api/progress/follow-1")
                if st == 200:
                    seen.append(p)
        full = time.time() - t0
        c.close()
        check(answer.startswith(b"HTTP/1.1 200"), f"the long graph, client waiting: {answer[:12]!r} in {full:.1f} s")
        rows = [p for p in seen if p["state"] == "running" and p["total"] > 0]
        check(len(rows) > 0 and all(0 <= p["done"] <= p["total"] for p in rows)
              and all(a["done"] <= b["done"] for a, b in zip(rows, rows[1:]))
              and seen[0]["analysis"] == "graph" and "attribution graph" in rows[0]["estimate"],
              f"GET /api/progress while it ran: {len(seen)} polls, rows {rows[0]['done'] if rows else '?'} .. "
              f"{rows[-1]['done'] if rows else '?'} of {rows[-1]['total'] if rows else '?'}; estimate "
              f"'{rows[0]['estimate'][:60] if rows else ''}' (the graph's is computed by its worker, before the rows)")
        st, _ = s.get("/api/progress/follow-1")
        check(st == 404, f"GET /api/progress once answered: {st}")

        # Another long prompt (not the cached answer); its client leaves once the rows have started.
        raw = json.dumps({"prompt": LONG.replace("old", "new"), "transcoders": True}).encode()
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(b"POST /api/graph HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"X-Vocablens-Progress: leave-1\r\nContent-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)
        deadline, p = time.time() + full, {}
        while time.time() < deadline and not (p.get("state") == "running" and p.get("done", 0) > 0):
            p = s.get("/api/progress/leave-1")[1]
            time.sleep(0.05)
        c.close()
        t1 = time.time()
        stt = {}
        while time.time() < t1 + full and not (stt.get("cancelled", 0) >= 1 and stt.get("running", 1) == 0):
            stt = s.get("/api/status")[1]
            time.sleep(0.05)
        freed = time.time() - t1
        check(p.get("done", 0) > 0 and stt.get("cancelled") == 1 and stt.get("running") == 0 and freed < full / 3,
              f"a client that left the graph at row {p.get('done')} of {p.get('total')}: the worker free again in "
              f"{freed:.2f} s (the graph takes {full:.1f} s; bound {full / 3:.1f} s), counted as cancelled ({stt})")
        st, _ = s.post("/api/graph", {"prompt": PROMPT, "transcoders": True})
        check(st == 200 and s.alive(), "after it: a graph is answered on the freed worker")


def without_transcoders():
    with VocablensServer(CLI, [MODEL]) as s:
        st, model = s.get("/api/model")
        check(st == 200 and model.get("transcoders") is None, "a server without --transcoders: GET /api/model says none")
        st, err = s.post("/api/graph", {"prompt": PROMPT, "transcoders": True})
        check(st == 400 and "--transcoders" in err.get("error", ""), f"... and refuses {{\"transcoders\": true}}: {st} {err.get('error', '')[:90]}")
    for folder in (os.path.join(HERE, "..", "fixtures", "graph"), "/etc"):
        r = subprocess.run([CLI, "serve", MODEL, "--transcoders", folder, "--port", "0"], capture_output=True, timeout=120)
        err = r.stderr.decode().strip()
        check(r.returncode not in (0, None) and "--transcoders" in err and len(err.splitlines()) == 1,
              f"serve --transcoders {os.path.basename(folder)}: refused at start-up in one line: {err[:120]}")


def memory_budget():
    """The graph's estimate runs the forward and the encoders, so the server computes it in a worker (not on the
    connection's thread): a graph over --memory-budget is still refused with its estimate (413) — from the
    worker —, its status says so, and the server answers a lens next."""
    with VocablensServer(CLI, [MODEL], ["--transcoders", TRANSCODERS, "--memory-budget", "1", "--workers", "1"]) as s:
        st, err = s.post("/api/graph", {"prompt": PROMPT, "transcoders": True})
        msg = err.get("error", "")
        check(st == 413 and msg.startswith("graph: the attribution graph") and "memory budget of 1 MiB" in msg,
              f"a graph over --memory-budget 1 -> {st}: {msg[:160]!r}")
        st, status = s.get("/api/status")
        check(st == 200 and status.get("running") == 0 and status.get("queued") == 0,
              f"its worker is free again: {status.get('running')} running, {status.get('queued')} queued")
        st, _ = s.post("/api/lens", {"prompt": PROMPT, "top_k": 3})
        check(st in (200, 413), f"and the server still answers ({st})")
        # What one feature and every feature need beyond the model, as this server's own refusals state it.
        need_one = needed_mib(s, {"prompt": REFUSED, "transcoders": True, "max_feature_nodes": 1})
        need_all = needed_mib(s, {"prompt": REFUSED, "transcoders": True})
    if not check(need_one and need_all and need_all > need_one + 100,
                 f"every active feature needs far more than one ({need_all} vs {need_one} MiB beyond the model)"):
        return
    # A budget between the two: every feature is refused with the largest max_feature_nodes that fits, and that
    # one is admitted (and runs) where one more is refused.
    budget = str(int(need_one) + 40)
    with VocablensServer(CLI, [MODEL], ["--transcoders", TRANSCODERS, "--memory-budget", budget, "--workers", "1"]) as s:
        st, err = s.post("/api/graph", {"prompt": REFUSED, "transcoders": True})
        msg = err.get("error", "")
        m = re.search(r"give max_feature_nodes (\d+) or less", msg)
        if not check(st == 413 and m and "\n" not in msg, f"every feature under --memory-budget {budget} -> {st}: {msg[:200]!r}"):
            return
        n = int(m.group(1))
        check(n > 1, f"the advice is more than one feature ({n})")
        st, _ = s.post("/api/graph", {"prompt": REFUSED, "transcoders": True, "max_feature_nodes": n + 1})
        check(st == 413, f"max_feature_nodes {n + 1}, one more than the advice: refused ({st})")
        st, g = s.post("/api/graph", {"prompt": REFUSED, "transcoders": True, "max_feature_nodes": n})
        check(st == 200 and neuronpedia_ok(g.get("summary", {}).get("neuronpedia", {})) is None,
              f"max_feature_nodes {n}, the advice: admitted and run, a well-formed graph ({st})")


def needed_mib(s, body):
    """The MiB beyond the loaded model that the server's 413 says `body` needs (its memory budget being 1 MiB)."""
    st, err = s.post("/api/graph", body)
    m = re.search(r"needs about (\d+) MiB beyond the loaded model", err.get("error", ""))
    check(st == 413 and m, f"POST /api/graph {json.dumps(body)[-40:]} under --memory-budget 1 -> {st}: {err.get('error', '')[:160]!r}")
    return float(m.group(1)) if m else None


def main():
    if not CLI or not os.path.exists(CLI) or not os.path.isdir(MODEL):
        print("FAIL: needs VOCABLENS_CLI (the built vocablens) and the gpt2-tiny fixture: " + MODEL)
        return 1
    with VocablensServer(CLI, [MODEL], ["--transcoders", TRANSCODERS]) as s:
        graph_api(s)
    progress_and_cancel()
    memory_budget()
    without_transcoders()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
