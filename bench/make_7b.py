#!/usr/bin/python3
"""Writes a Llama-2-7B-shaped checkpoint with random weights for the memory/speed bench (never committed):
  make_7b.py safetensors OUT_DIR        Hugging Face directory: config.json + model.safetensors (BF16, 13.5 GB)
  make_7b.py gguf OUT.gguf TYPE         GGUF v3, TYPE in bf16, f16, q8_0, q4_k, q6_k (norms F32), llama.cpp-loadable
  make_7b.py torchbin OUT_DIR           Hugging Face directory: config.json + F16 pytorch_model-0000K-of-0000N.bin
                                        shards (torch.save, ~2 GB each) + pytorch_model.bin.index.json (13.5 GB;
                                        needs Debian's python3-torch), as save_pretrained(safe_serialization=False)
Shape: d_model 4096, 32 layers, 32 heads, d_mlp 11008, vocabulary 32000, untied, context 4096.
Data is drawn from a 256 MB pool of random values (weights ~ N(0, 0.02); quantized blocks with fixed small
scales) at varying offsets, so writing is disk-bound; values matter only for timing and memory.
Set D/L/FF/V in the environment to write a smaller model of the same layout (for trying the bench), CTX for
another context length (the long-context bench: D=2048 L=4 H=16 FF=5632 CTX=32768, TYPE f32).
ARCH=qwen3moe (gguf only) writes a Qwen3-30B-A3B-shaped mixture of experts instead: d_model 2048, 48 layers, 32 query
and 4 key/value heads of 128 with q/k norms, 128 SwiGLU experts of 768 (top 8) in llama.cpp's 3-D ffn_*_exps
tensors, the router F32, vocabulary 151 936 (TYPE q4_k: 17.3 GB). E/K/KV/HD override experts, top-k, kv heads,
head size."""
import json, os, struct, sys
import numpy as np

d, L, H, FF, V, CTX = (int(os.environ.get(k, v)) for k, v in (("D", 4096), ("L", 32), ("H", 32), ("FF", 11008), ("V", 32000),
                                                              ("CTX", 4096)))
ARCH = os.environ.get("ARCH", "llama")
if ARCH == "qwen3moe":
    d, L, H, FF, V = (int(os.environ.get(k, v)) for k, v in (("D", 2048), ("L", 48), ("H", 32), ("FF", 768), ("V", 151936)))
E, K, KV, HD = (int(os.environ.get(k, v)) for k, v in (("E", 128), ("K", 8), ("KV", 4 if ARCH == "qwen3moe" else H), ("HD", 128 if ARCH == "qwen3moe" else d // H)))
rng = np.random.default_rng(7)
POOL = 256 << 20

def names():
    out = [("token_embd.weight", "model.embed_tokens.weight", (V, d))]
    if ARCH == "qwen3moe":
        for l in range(L):
            g = f"blk.{l}."
            out += [(g + "attn_norm.weight", None, (d,)), (g + "attn_q.weight", None, (H * HD, d)),
                    (g + "attn_k.weight", None, (KV * HD, d)), (g + "attn_v.weight", None, (KV * HD, d)),
                    (g + "attn_q_norm.weight", None, (HD,)), (g + "attn_k_norm.weight", None, (HD,)),
                    (g + "attn_output.weight", None, (d, H * HD)), (g + "ffn_norm.weight", None, (d,)),
                    (g + "ffn_gate_inp.weight", "f32", (E, d)),
                    (g + "ffn_gate_exps.weight", None, (E, FF, d)), (g + "ffn_up_exps.weight", None, (E, FF, d)),
                    (g + "ffn_down_exps.weight", None, (E, d, FF))]
        return out + [("output_norm.weight", None, (d,)), ("output.weight", None, (V, d))]
    for l in range(L):
        g, h = f"blk.{l}.", f"model.layers.{l}."
        out += [(g + "attn_norm.weight", h + "input_layernorm.weight", (d,)),
                (g + "attn_q.weight", h + "self_attn.q_proj.weight", (d, d)),
                (g + "attn_k.weight", h + "self_attn.k_proj.weight", (d, d)),
                (g + "attn_v.weight", h + "self_attn.v_proj.weight", (d, d)),
                (g + "attn_output.weight", h + "self_attn.o_proj.weight", (d, d)),
                (g + "ffn_norm.weight", h + "post_attention_layernorm.weight", (d,)),
                (g + "ffn_gate.weight", h + "mlp.gate_proj.weight", (FF, d)),
                (g + "ffn_up.weight", h + "mlp.up_proj.weight", (FF, d)),
                (g + "ffn_down.weight", h + "mlp.down_proj.weight", (d, FF))]
    out += [("output_norm.weight", "model.norm.weight", (d,)), ("output.weight", "lm_head.weight", (V, d))]
    return out

def half_pool(kind):
    x = (rng.standard_normal(POOL // 2, dtype=np.float32) * 0.02)
    if kind == "bf16": return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return x.astype(np.float16).tobytes()

BLOCK = {"q8_0": (32, 34), "q4_k": (256, 144), "q6_k": (256, 210)}
def quant_pool(kind):
    vals, nb = BLOCK[kind]
    n = POOL // nb
    b = rng.integers(0, 256, size=(n, nb), dtype=np.uint8)
    if kind == "q8_0":
        b[:, 0:2] = np.frombuffer(np.float16(0.0005).tobytes(), np.uint8)
    elif kind == "q6_k":  # ql[128] qh[64] random; scales int8[16] random; d fp16 last: |w| ~ 0.02
        b[:, 208:210] = np.frombuffer(np.float16(0.00002).tobytes(), np.uint8)
    else:
        b[:, 0:2] = np.frombuffer(np.float16(0.0015).tobytes(), np.uint8)   # d
        b[:, 2:4] = np.frombuffer(np.float16(0.0007).tobytes(), np.uint8)   # dmin
    return b.tobytes()

def stream(f, pool, nbytes, unit, seed):
    off = (seed * 7919 * unit) % (len(pool) - unit)
    off -= off % unit
    while nbytes > 0:
        n = min(nbytes, len(pool) - off)
        n -= n % unit
        f.write(pool[off:off + n]); nbytes -= n; off = 0

def write_config(out, dtype):
    os.makedirs(out, exist_ok=True)
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d, "intermediate_size": FF,
               "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": H, "vocab_size": V,
               "max_position_embeddings": CTX, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
               "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": dtype},
              open(os.path.join(out, "config.json"), "w"), indent=1)

def write_safetensors(out):
    write_config(out, "bfloat16")
    header, off, ts = {}, 0, names()
    for _, hf, shape in ts:
        n = int(np.prod(shape)) * 2
        header[hf] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    pool = half_pool("bf16")
    one = np.ones(1, np.float32).view(np.uint32) >> 16
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for i, (_, hf, shape) in enumerate(ts):
            if len(shape) == 1: f.write(np.full(shape, one[0], np.uint16).tobytes())
            else: stream(f, pool, int(np.prod(shape)) * 2, 2, i)

def write_torchbin(out, shard_bytes=2 << 30):
    import torch
    write_config(out, "float16")
    pool = torch.frombuffer(bytearray(half_pool("f16")), dtype=torch.float16)
    ts = names()
    shards, cur, size = [], [], 0
    for t in ts:
        n = int(np.prod(t[2])) * 2
        if cur and size + n > shard_bytes: shards.append(cur); cur, size = [], 0
        cur.append(t); size += n
    shards.append(cur)
    weight_map, total = {}, 0
    for s, group in enumerate(shards):
        fname = "pytorch_model-%05d-of-%05d.bin" % (s + 1, len(shards))
        part = {}
        for i, (_, hf, shape) in enumerate(group):
            n = int(np.prod(shape))
            if len(shape) == 1: part[hf] = torch.ones(shape, dtype=torch.float16)
            elif n < pool.numel():
                off = (i * 7919) % (pool.numel() - n)
                part[hf] = pool[off:off + n].reshape(shape).clone()
            else:
                part[hf] = pool.repeat(-(-n // pool.numel()))[:n].reshape(shape).clone()
            weight_map[hf] = fname; total += n * 2
        torch.save(part, os.path.join(out, fname))
        del part
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(out, "pytorch_model.bin.index.json"), "w"), indent=1)

def gstr(s):
    b = s.encode(); return struct.pack("<Q", len(b)) + b

def write_gguf(path, kind):
    tcode = {"f32": 0, "bf16": 30, "f16": 1, "q8_0": 8, "q4_k": 12, "q6_k": 14}[kind]
    def nbytes(shape, t):
        n = int(np.prod(shape))
        if t == 0: return n * 4
        if t in (1, 30): return n * 2
        vals, nb = BLOCK[kind]; return n // vals * nb
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
    toks += ["t%d" % i for i in range(V - len(toks))]
    a = ARCH
    kv = [("general.architecture", 8, a), ("general.name", 8, "random-%s-shape" % ("30b-a3b" if a == "qwen3moe" else "7b")),
          (a + ".block_count", 4, L), (a + ".context_length", 4, CTX), (a + ".embedding_length", 4, d),
          (a + ".feed_forward_length", 4, FF), (a + ".attention.head_count", 4, H), (a + ".attention.head_count_kv", 4, KV),
          (a + ".rope.dimension_count", 4, HD), (a + ".rope.freq_base", 6, 10000.0),
          (a + ".attention.layer_norm_rms_epsilon", 6, 1e-5), ("tokenizer.ggml.model", 8, "llama"),
          ("tokenizer.ggml.bos_token_id", 4, 1), ("tokenizer.ggml.eos_token_id", 4, 2)]
    if a == "qwen3moe":
        kv += [(a + ".attention.key_length", 4, HD), (a + ".attention.value_length", 4, HD), (a + ".expert_count", 4, E),
               (a + ".expert_used_count", 4, K), (a + ".expert_feed_forward_length", 4, FF)]
    body = b""
    for k, t, v in kv:
        body += gstr(k) + struct.pack("<I", t) + (gstr(v) if t == 8 else struct.pack({4: "<I", 6: "<f"}[t], v))
    body += gstr("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(toks)) + b"".join(gstr(t) for t in toks)
    body += gstr("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, V) + np.arange(V, dtype=np.float32).__neg__().tobytes()
    types = np.ones(V, np.int32); types[0] = 2; types[1:3] = 3; types[3:259] = 6
    body += gstr("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, V) + types.tobytes()
    infos, off, plan = b"", 0, []
    for g, hf, shape in names():
        t = 0 if len(shape) == 1 or hf == "f32" else tcode
        nb = nbytes(shape, t)
        if len(shape) == 1: t = -1  # a norm vector: F32 ones (the matrices of an f32 file are type 0 too)
        elif hf == "f32" and tcode != 0: t = -2  # the router, kept F32 as llama.cpp's quantizations keep it
        infos += gstr(g) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", n) for n in reversed(shape)) + struct.pack("<IQ", max(t, 0), off)
        plan.append((shape, t, nb, off)); off += nb; off += (32 - off % 32) % 32
    head = b"GGUF" + struct.pack("<IQQ", 3, len(plan), len(kv) + 3) + body + infos
    head += b"\0" * ((32 - len(head) % 32) % 32)
    pool = (rng.standard_normal(POOL // 4, dtype=np.float32) * 0.02).tobytes() if kind == "f32" else \
        half_pool(kind) if kind in ("bf16", "f16") else quant_pool(kind)
    unit = 4 if kind == "f32" else 2 if kind in ("bf16", "f16") else BLOCK[kind][1]
    with open(path, "wb") as f:
        f.write(head)
        pos = 0
        for i, (shape, t, nb, o) in enumerate(plan):
            f.write(b"\0" * (o - pos))
            if t == -1: f.write(np.ones(shape, np.float32).tobytes())
            elif t == -2: f.write((rng.standard_normal(shape, dtype=np.float32) * 0.02).tobytes())
            else: stream(f, pool, nb, unit, i)
            pos = o + nb

if __name__ == "__main__":
    if sys.argv[1] == "safetensors": write_safetensors(sys.argv[2])
    elif sys.argv[1] == "torchbin": write_torchbin(sys.argv[2])
    else: write_gguf(sys.argv[2], sys.argv[3])
