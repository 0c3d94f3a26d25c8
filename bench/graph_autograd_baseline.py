#!/usr/bin/python3
"""A circuit-tracer-style attribution graph with PyTorch autograd on the CPU, for bench/run_graph_bench.sh: the same
rows vocablens computes, checked against them.

  graph_autograd_baseline.py MODEL_DIR TRANSCODER_DIR RUN_DIR [BATCH]

MODEL_DIR: a GPT-2 checkpoint (config.json, model.safetensors); TRANSCODER_DIR: layer_{i}.safetensors (W_enc, b_enc,
W_dec, b_dec, optional W_skip, activation_function.threshold: JumpReLU, else ReLU); RUN_DIR: `vocablens graph ... --save-adjacency --out RUN_DIR`
(graph.ids.npy, graph.active_features.npy, graph.selected.npy, graph.full_adjacency.npy, graph.json).

Written from the definitions, as circuit-tracer computes rows: one forward pass of the local replacement model over a
batch of BATCH copies of the prompt with autograd recording it (attention patterns and norm denominators detached,
each MLP replaced by its transcoder's reconstruction plus the error, both constants, so only the residual stream,
the frozen norms and the attention's value path carry gradients); then, per batch of targets, one backward pass
(retain_graph) with each target's reading vector injected in its own copy, the gradients read at every MLP output
and at the token embeddings, dotted with each active feature's decoder row × activation, each error vector, each
embedding. Nodes: vocablens's active features (a feature within rounding of its JumpReLU threshold may fire on
one side only: checked, then vocablens's set used) and activations. Targets: the logits vocablens chose (demeaned W_U columns at the final norm's output) and the features it
selected (encoder rows at the MLP input). The model's own forward (the patterns, denominators, the activations, the
errors) is computed here too, without grad. Asserts the same logits, and every row entry
within 1e-4 of the largest entry; prints CPU seconds of the row computation.
"""
import json, math, os, resource, struct, sys, time
import numpy as np
import torch

torch.set_grad_enabled(False)
model_dir, tc_dir, run_dir = sys.argv[1:4]
B = int(sys.argv[4]) if len(sys.argv) > 4 else 64


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    mm = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (path, k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = torch.from_numpy(np.frombuffer(mm[a:b], dtype=np.float32).reshape(v["shape"]).copy())
    return out


cfg = json.load(open(f"{model_dir}/config.json"))
W = read_safetensors(f"{model_dir}/model.safetensors")
L, d, H = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
dh, eps = d // H, cfg.get("layer_norm_epsilon", 1e-5)
tcs = [read_safetensors(f"{tc_dir}/layer_{l}.safetensors") for l in range(L)]

ids = torch.from_numpy(np.load(f"{run_dir}/graph.ids.npy"))
active_ref = np.load(f"{run_dir}/graph.active_features.npy")
selected = np.load(f"{run_dir}/graph.selected.npy")
adj_ref = np.load(f"{run_dir}/graph.full_adjacency.npy", mmap_mode="r")
summary = json.load(open(f"{run_dir}/graph.json"))
summary = summary.get("summary", summary)
logit_ids_ref = [x["id"] for x in summary["logits"]]
T = ids.shape[0]


def gelu_new(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def ln_parts(x):
    mu = x.mean(-1, keepdim=True)
    return x - mu, torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)


def encode(l, x):
    pre = x @ tcs[l]["W_enc"].T + tcs[l]["b_enc"]
    thr = tcs[l].get("activation_function.threshold")
    return pre * (pre > thr) if thr is not None else torch.relu(pre)


def skip(l, x):
    return x @ tcs[l]["W_skip"].T if "W_skip" in tcs[l] else None


# ---- the model's forward: what the replacement model freezes ----------------------------------------------
t0 = time.process_time()
wte, wpe = W["wte.weight"], W["wpe.weight"]
x = wte[ids] + wpe[:T]
causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
frozen = []
for l in range(L):
    p = f"h.{l}."
    c1, s1 = ln_parts(x)
    h1 = c1 / s1 * W[p + "ln_1.weight"] + W[p + "ln_1.bias"]
    qkv = h1 @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
    q, k, v = qkv.split(d, -1)
    q, k, v = (t.view(T, H, dh).transpose(0, 1) for t in (q, k, v))
    sc = (q @ k.transpose(1, 2)) / math.sqrt(dh)
    pat = torch.softmax(sc.masked_fill(~causal, float("-inf")), -1)
    x = x + (pat @ v).transpose(0, 1).reshape(T, d) @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
    c2, s2 = ln_parts(x)
    mlp_in = c2 / s2 * W[p + "ln_2.weight"] + W[p + "ln_2.bias"]
    mlp_out = gelu_new(mlp_in @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"]) @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    acts = encode(l, mlp_in)
    acts[0] = 0  # position 0 (the BOS): no feature nodes
    frozen.append(dict(s1=s1, s2=s2, pat=pat, mlp_out=mlp_out, mlp_in=mlp_in, acts=acts,
                       pre=mlp_in @ tcs[l]["W_enc"].T + tcs[l]["b_enc"]))
    x = x + mlp_out
_, sf = ln_parts(x)
logits = (x[-1] - x[-1].mean()) / sf[-1] * W["ln_f.weight"] @ wte.T + W["ln_f.bias"] @ wte.T

# the same nodes as vocablens
act_list = []
for l in range(L):
    nz = frozen[l]["acts"].nonzero()
    act_list += [(l, int(p), int(f)) for p, f in nz]
active = np.array(act_list, dtype=np.int64).reshape(-1, 3)
# The same nodes as vocablens: features whose pre-activation lies within rounding of a JumpReLU threshold may
# fire on one side only (float32 forwards summed in other orders); any other difference is an error.
mine, theirs = set(map(tuple, active.tolist())), set(map(tuple, active_ref.tolist()))
for l, p, f in mine ^ theirs:
    gap = abs(float(frozen[l]["pre"][p, f]) - float(tcs[l]["activation_function.threshold"][f]))
    assert gap <= 1e-4, f"feature ({l}, {p}, {f}) active on one side only, {gap} from its threshold"
print(f"baseline: {len(mine ^ theirs)} of {len(theirs)} active features differ, each within 1e-4 of its threshold")
active = active_ref
acts_ref = np.load(f"{run_dir}/graph.activations.npy")
for l in range(L):  # vocablens's activations at its nodes; the reconstruction and errors from them
    fz, sel = frozen[l], active[:, 0] == l
    acts = torch.zeros_like(fz["acts"])
    acts[torch.from_numpy(active[sel, 1]), torch.from_numpy(active[sel, 2])] = torch.from_numpy(acts_ref[sel])
    acts[0] = encode(l, fz["mlp_in"][:1])[0]  # position 0's features still reconstruct (no nodes)
    recon = acts @ tcs[l]["W_dec"] + tcs[l]["b_dec"]
    if skip(l, fz["mlp_in"]) is not None:
        recon = recon + skip(l, fz["mlp_in"])
    fz["err"] = fz["mlp_out"] - recon
    fz["err"][0] = 0
    acts[0] = 0
    fz["acts"] = acts
probs = torch.softmax(logits.double(), -1)
top = torch.topk(probs, len(logit_ids_ref))
assert top.indices.tolist() == logit_ids_ref, (top.indices.tolist(), logit_ids_ref)
A, F, K = active.shape[0], selected.shape[0], len(logit_ids_ref)
layer_start = np.searchsorted(active[:, 0], np.arange(L + 1))
t_forward = time.process_time() - t0

# ---- the replacement model, recorded by autograd over B copies ------------------------------------------------
t1 = time.process_time()
torch.set_grad_enabled(True)
emb = wte[ids].unsqueeze(0).expand(B, T, d).clone().requires_grad_(True)  # the token embeddings, read for edges
outs = [torch.zeros(B, T, d, requires_grad=True) for _ in range(L)]         # zero leaves at each MLP output
xs = emb + wpe[:T]
mlp_ins = []
for l in range(L):
    p, fz = f"h.{l}.", frozen[l]
    c1 = xs - xs.mean(-1, keepdim=True)
    h1 = c1 / fz["s1"] * W[p + "ln_1.weight"] + W[p + "ln_1.bias"]
    v = (h1 @ W[p + "attn.c_attn.weight"][:, 2 * d:] + W[p + "attn.c_attn.bias"][2 * d:]).view(B, T, H, dh).transpose(1, 2)
    z = (fz["pat"].unsqueeze(0) @ v).transpose(1, 2).reshape(B, T, d)
    xs = xs + z @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
    c2 = xs - xs.mean(-1, keepdim=True)
    mlp_ins.append(c2 / fz["s2"] * W[p + "ln_2.weight"] + W[p + "ln_2.bias"])
    xs = xs + fz["mlp_out"] + outs[l]  # the MLP's value as a constant; gradients read at outs[l]
    sk = skip(l, mlp_ins[-1])
    if sk is not None:  # the skip connection is linear in the MLP input: its gradient path stays
        xs = xs + sk - sk.detach()
cf = xs - xs.mean(-1, keepdim=True)
final = cf / sf * W["ln_f.weight"] + W["ln_f.bias"]

WU = wte.T
vecs = (WU[:, logit_ids_ref] - WU.mean(1, keepdim=True)).T  # [K, d]
targets = [("logit", k) for k in range(K)] + [("feature", int(i)) for i in selected]
S = F + (L + 1) * T
cols = np.concatenate([selected, np.arange(A, A + (L + 1) * T)])
rows = np.zeros((K + F, S), np.float32)
dec_scaled = []
for l in range(L):
    a, b = layer_start[l], layer_start[l + 1]
    f = torch.from_numpy(active[a:b, 2])
    dec_scaled.append(tcs[l]["W_dec"][f] * frozen[l]["acts"][torch.from_numpy(active[a:b, 1]), f].unsqueeze(1))
for i0 in range(0, len(targets), B):
    batch = targets[i0:i0 + B]
    g_final = torch.zeros(B, T, d)
    g_in = [torch.zeros(B, T, d) for _ in range(L)]
    for b, (kind, j) in enumerate(batch):
        if kind == "logit":
            g_final[b, T - 1] = vecs[j]
        else:
            l, p, f = active[j]
            g_in[l][b, p] = tcs[l]["W_enc"][f]
    grads = torch.autograd.grad([final] + mlp_ins, outs + [emb], [g_final] + g_in, retain_graph=True, allow_unused=True)
    full = torch.zeros(len(batch), A + (L + 1) * T)
    for l in range(L):
        g = grads[l]
        if g is None:
            continue
        g = g[:len(batch)]
        a, b = layer_start[l], layer_start[l + 1]
        for p in np.unique(active[a:b, 1]):  # the features of one position are contiguous
            i, j = a + np.searchsorted(active[a:b, 1], p), a + np.searchsorted(active[a:b, 1], p, side="right")
            full[:, i:j] = g[:, p] @ dec_scaled[l][i - a:j - a].T
        full[:, A + l * T:A + (l + 1) * T] = (g * frozen[l]["err"].unsqueeze(0)).sum(-1)
    full[:, A + L * T:] = (grads[L][:len(batch)] * wte[ids].unsqueeze(0)).sum(-1)
    rows[i0:i0 + len(batch)] = full[:, cols].numpy()
t_rows = time.process_time() - t1

# ---- against vocablens's rows ------------------------------------------------------------------------------
N = S + K
rn = np.concatenate([np.arange(N - K, N), np.arange(F)])  # logits first here, then the selected features
ref = np.asarray(adj_ref[rn][:, :S], dtype=np.float64)
scale = np.abs(ref).max()
err = np.abs(rows - ref).max() / scale
print(f"baseline: T={T} layers={L} active={A} rows={K + F} batch={B}: max |rows - vocablens| / largest = {err:.2e}")
assert err <= 1e-4, err
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"forward_cpu_s": round(t_forward, 2), "rows_cpu_s": round(t_rows, 2),
                  "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "peak_rss_kb": ru.ru_maxrss, "max_rel_err": err}))
