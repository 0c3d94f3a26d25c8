#!/usr/bin/python3
"""Seed corpora for the libFuzzer harnesses: small valid inputs of each format, made from the fixtures
(configs, tokenizer files, vector texts) or written here in the formats' own layouts (tiny safetensors,
tiny torch.save zips, tiny llama2.c checkpoints), so the fuzzer starts from inputs that parse.
Usage: make_seeds.py FIXTURES_DIR OUT_DIR"""
import io, json, os, struct, sys, zipfile

fix, out = sys.argv[1], sys.argv[2]

def put(harness, name, data):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# config.json: every fixture config, plus variants.
for m in ["gpt2-tiny", "gpt2-tiny-prefixed", "stories260K-hf"]:
    put("fuzz_config", m + ".json", open(os.path.join(fix, m, "config.json"), "rb").read())

# safetensors: tiny files in the format's own layout.
def safetensors(tensors, metadata=None):
    header, data, off = {}, b"", 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data
put("fuzz_safetensors", "f32.safetensors", safetensors({"a": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))}, {"format": "pt"}))
put("fuzz_safetensors", "mixed.safetensors", safetensors({
    "h": ("F16", [3], struct.pack("<3e", 1.0, -2.0, 6e-8)), "b": ("BF16", [2], b"\x80\x3f\x00\x40"),
    "i": ("I64", [1], struct.pack("<q", 7)), "z": ("F32", [0], b"")}))

# PyTorch zip: torch.save of small state_dicts when Debian's python3-torch is present.
try:
    import torch
    from collections import OrderedDict
    sd = OrderedDict([("w", torch.arange(6, dtype=torch.float32).reshape(2, 3)), ("b", torch.ones(3, dtype=torch.float16))])
    sd["tied"] = sd["w"]
    buf = io.BytesIO(); torch.save(sd, buf); put("fuzz_torch_zip", "state_dict.bin", buf.getvalue())
    buf = io.BytesIO(); torch.save({"model": sd, "model_args": {"dim": 2}, "iter_num": 3, "loss": 1.5}, buf)
    put("fuzz_torch_zip", "ckpt.pt", buf.getvalue())
except ImportError:
    pass

# PyTorch zip without torch: the same layout written here (STORED entries, 64-byte aligned data, a
# protocol-2 pickle assembled opcode by opcode as torch.save emits it), so seeds exist on any machine.
def pk_str(s):
    b = s.encode(); return b"X" + struct.pack("<I", len(b)) + b
def pk_int(i):
    return b"K" + bytes([i]) if 0 <= i < 256 else b"J" + struct.pack("<i", i)
def pk_tuple(items):
    return b"(" + b"".join(items) + b"t"
def torch_pickle(tensors, extra=b""):
    """tensors: [(name, storage type, key, numel, offset, size, stride)] -> data.pkl bytes."""
    out = b"\x80\x02" + b"ccollections\nOrderedDict\nq\x00)Rq\x01(" 
    for name, stype, key, numel, off, size, stride in tensors:
        pid = pk_tuple([pk_str("storage"), b"ctorch\n" + stype.encode() + b"\n", pk_str(key), pk_str("cpu"), pk_int(numel)])
        args = pk_tuple([pid + b"Q", pk_int(off), pk_tuple([pk_int(v) for v in size]),
                         pk_tuple([pk_int(v) for v in stride]), b"\x89", b"ccollections\nOrderedDict\n)R"])
        out += pk_str(name) + b"ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R"
    return out + extra + b"u."
def torch_zip(root, pkl, storages):
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", zipfile.ZIP_STORED) as zf:
        def add(name, data):
            info = zipfile.ZipInfo(name)
            # torch.save aligns entry data to 64 bytes with an extra field; mimic it.
            hdr = 30 + len(name.encode())
            pad = (64 - (z.tell() + hdr + 4) % 64) % 64
            info.extra = struct.pack("<HH", 0xFAFF, pad) + b"Z" * pad
            zf.writestr(info, data)
        add(root + "/data.pkl", pkl)
        add(root + "/byteorder", b"little")
        for key, data in storages.items():
            add(root + "/data/" + key, data)
        add(root + "/version", b"3\n")
    return z.getvalue()
f32 = lambda *v: struct.pack("<%df" % len(v), *v)
put("fuzz_torch_zip", "handmade_state_dict.bin", torch_zip("archive", torch_pickle([
    ("w", "FloatStorage", "0", 6, 0, [2, 3], [3, 1]), ("b", "HalfStorage", "1", 3, 0, [3], [1]),
    ("tied", "FloatStorage", "0", 6, 0, [2, 3], [3, 1]), ("t", "FloatStorage", "0", 6, 1, [2, 2], [1, 2]),
    ("s", "LongStorage", "2", 1, 0, [], [])]),
    {"0": f32(0, 1, 2, 3, 4, 5), "1": struct.pack("<3e", 1, 2, 3), "2": struct.pack("<q", 7)}))
meta = (pk_str("model_args") + b"}(" + pk_str("dim") + pk_int(4) + pk_str("n_layers") + pk_int(1) +
        pk_str("vocab_size") + pk_int(6) + pk_str("norm_eps") + b"G" + struct.pack(">d", 1e-5) + b"u" +
        pk_str("iter_num") + pk_int(3) + pk_str("config") + b"cargparse\nNamespace\n)\x81}b")
put("fuzz_torch_zip", "handmade_ckpt.pt", torch_zip("ckpt", torch_pickle([
    ("model.w", "BFloat16Storage", "0", 4, 0, [2, 2], [2, 1]), ("model.mask", "BoolStorage", "1", 2, 0, [2], [1])], meta),
    {"0": b"\x80\x3f\x00\x40\x40\x40\x80\x40", "1": b"\x01\x00"}))
# The real pickles of the fixtures (protocol 2, memo, nested dicts), with empty storages: the machine
# runs up to the first storage, and the fuzzer gets torch.save's real opcode vocabulary.
for fx, fn in [("llama2xs", "ckpt.pt"), ("gpt2-tiny-torchbin", "pytorch_model.bin")]:
    try:
        zf = zipfile.ZipFile(os.path.join(fix, fx, fn))
        pkl = [n for n in zf.namelist() if n.endswith("/data.pkl")][0]
        if zf.getinfo(pkl).file_size < 60000:
            put("fuzz_torch_zip", fx + "_pickle_only", torch_zip(pkl.split("/")[0], zf.read(pkl), {}))
    except (OSError, zipfile.BadZipFile, IndexError) as e:
        print("make_seeds: skipped", fx, e, file=sys.stderr)

# llama2.c .bin: a tiny legacy v0 checkpoint (dim 4, hidden 8, 1 layer, 2 heads, 1 kv head, vocab 6, seq 4).
dim, hid, L, H, KV, V, S = 4, 8, 1, 2, 1, 6, 4
hs = dim // H; kd = KV * hs
n = V*dim + L*(2*dim + 2*dim*dim + 2*kd*dim + 3*dim*hid) + dim + S*hs
put("fuzz_llama2c", "tiny_v0.bin", struct.pack("<7i", dim, hid, L, H, KV, V, S) + struct.pack("<%df" % n, *[0.01*(i % 7) for i in range(n)]))
# version 1: magic 0x616b3432 ("ak42" as a little-endian uint32), version, the 7 ints, shared flag, header padded to 256 bytes, norms first.
n1 = n - S*hs
put("fuzz_llama2c", "tiny_v1.bin", (struct.pack("<I", 0x616b3432) + struct.pack("<i7iB", 1, dim, hid, L, H, KV, V, S, 1)).ljust(256, b"\0") +
    struct.pack("<%df" % n1, *[0.01*(i % 5) for i in range(n1)]))
put("fuzz_llama2c", "tiny_untied.bin", struct.pack("<7i", dim, hid, L, H, KV, -V, S) + struct.pack("<%df" % (n + V*dim), *[0.02]*(n + V*dim)))

# Tokenizer texts: the fixture vectors.
vec = json.load(open(os.path.join(fix, "tokenizer", "gpt2_vectors.json"), encoding="utf-8"))
for i, v in enumerate(vec[:120]):
    put("fuzz_bpe_encode", "v%03d" % i, v["text"].encode("utf-8", "surrogatepass"))
put("fuzz_bpe_encode", "invalid_utf8", b"\xff\xfe a\xc3 \xe2\x82 <|endoftext|>\x00")

# BPE vocabulary files: a tiny byte-level vocabulary (256 byte tokens, a few merges, <|endoftext|>).
# fuzz_bpe_files input: [0][u32 vocab.json length][vocab.json][merges.txt] or [1][0000][tokenizer.json].
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
b2u = bytes_to_unicode()
spell = lambda bs: "".join(b2u[b] for b in bs)
vocab = {spell(bytes([b])): b for b in range(256)}
merge_list = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he"), (b"a", b"a"), (b"aa", b"aa"), (b"l", b"l"), (b"e", b"ll")]
for l, r in merge_list:
    vocab.setdefault(spell(l + r), len(vocab))
vocab["<|endoftext|>"] = len(vocab)
vj = json.dumps(vocab, ensure_ascii=False).encode()
mt = ("#version: 0.2\n" + "".join(spell(l) + " " + spell(r) + "\n" for l, r in merge_list)).encode()
put("fuzz_bpe_files", "pair", b"\x00" + struct.pack("<I", len(vj)) + vj + mt)
mt_crlf = mt.replace(b"\n", b"\r\n")
put("fuzz_bpe_files", "pair_crlf", b"\x00" + struct.pack("<I", len(vj)) + vj + mt_crlf)
tj = {"model": {"type": "BPE", "vocab": vocab, "merges": [spell(l) + " " + spell(r) for l, r in merge_list]},
      "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "special": True},
                       {"id": len(vocab), "content": "<extra>", "special": False}],
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True}}
put("fuzz_bpe_files", "tokenizer_json", b"\x01\0\0\0\0" + json.dumps(tj, ensure_ascii=False).encode())
tj["model"]["merges"] = [[spell(l), spell(r)] for l, r in merge_list]
tj["model"]["ignore_merges"] = True
tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\s+|\\w+|[^\\s\\w]+"}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False}]}
put("fuzz_bpe_files", "tokenizer_json_split", b"\x01\0\0\0\0" + json.dumps(tj, ensure_ascii=False).encode())

# llama2.c tokenizer: [u32 text length][text][tokenizer file].
tok = open(os.path.join(fix, "stories260K", "tok512.bin"), "rb").read()
for i, text in enumerate([b"Once upon a time", b"", b"\xf0\x9f\x98\x80 caf\xc3\xa9\n"]):
    put("fuzz_llama2c_tokenizer", "t%d" % i, struct.pack("<I", len(text)) + text + tok)
# Result directories (what `vocablens report DIR` reads): [u16 json length][u16 npy length][json][npy][csv].
def npy(descr, shape, raw):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join("%d," % d for d in shape))
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + raw
def result(kind, summary, arrays, tables, settings=None):
    return json.dumps({"format": "vocablens.result", "format_version": 1, "kind": kind, "settings": settings or {},
                       "provenance": {"vocablens_version": "0.1.0"}, "summary": summary, "arrays": arrays,
                       "tables": tables}).encode()
def bundle(j, n=b"", c=b""):
    return struct.pack("<HH", len(j), len(n)) + j + n + c
ent = npy("<f4", [3, 2], struct.pack("<6f", 0.5, 1.0, float("nan"), 2.0, 3.5, 0.0))
lens_csv = b'"layer","position","rank","token_id","token","prob"\n"embed",0,1,5," the",0.25\n"out",1,1,7,"\\n",0.5\n'
put("fuzz_results", "logit_lens", bundle(result("logit_lens",
    {"layers": [{"index": 0, "label": "embed"}, {"index": 1, "label": "0"}, {"index": 2, "label": "out"}],
     "tokens": [" Once", " upon"], "top1": [["a", "b"], ["c", "d"], ["e", "f"]]},
    {"entropy": {"file": "a.npy", "dtype": "<f4", "shape": [3, 2]},
     "kl_final": {"dtype": "<f8", "shape": [3, 2], "data": [[0.1, 0.2], [0.3, None], [0, 0]]}},
    [{"name": "top_k", "file": "t.csv", "columns": ["layer", "position", "rank", "token_id", "token", "prob"],
      "column_types": ["string", "integer", "integer", "integer", "string", "number"]}],
    {"prompt": "Once upon", "top_k": 1}), ent, lens_csv))
sv = npy("<f8", [4], struct.pack("<4d", 3.0, 2.0, 1.0, 1e-9))
put("fuzz_results", "spectrum", bundle(result("spectrum", {"n": 4, "matrix": "W_E"},
    {"singular_values": {"file": "a.npy", "dtype": "<f8", "shape": [4]},
     "explained_variance_ratio": {"dtype": "<f8", "shape": [4], "data": [0.7, 0.2, 0.1, 0.0]}}, []), sv))
put("fuzz_results", "heads", bundle(result("heads", {"n_layers": 1, "n_heads": 2},
    {"copying_score": {"file": "a.npy", "dtype": "<i8", "shape": [2]}},  # [circuits], as the analysis writes it
    [{"name": "pairs", "columns": ["layer", "head", "circuit", "rank", "src_token", "dst_token", "score"],
      "rows": [[0, 0, "ov", 1, " Paris", " France", 3.5], [0, 1, "qk", 1, "<|endoftext|>", "\u00e9", -1]]}]),
    npy("<i8", [2], struct.pack("<2q", 1, -2))))
put("fuzz_results", "generic", bundle(result("my_analysis", {"note": "x"},
    {"grid": {"file": "a.npy", "dtype": "|u1", "shape": [2, 2, 2]}}, []), npy("|u1", [2, 2, 2], bytes(range(8)))))

# Several arrays at once (fuzz_results_multi): [u16 json length][u16 a.npy length][json][a.npy][b.npy].
tok = npy("<i8", [2], struct.pack("<2q", 5, 7))
put("fuzz_results_multi", "logit_lens", bundle(result("logit_lens",
    {"layers": [{"index": 0, "label": "embed"}, {"index": 1, "label": "0"}, {"index": 2, "label": "out"}],
     "tokens": [" Once", " upon"]},
    {"entropy": {"file": "a.npy", "dtype": "<f4", "shape": [3, 2]}, "tokens": {"file": "b.npy", "dtype": "<i8", "shape": [2]}},
    [], {"prompt": "Once upon"}), ent, tok))
put("fuzz_results_multi", "patching", bundle(result("activation_patching", {"rows": ["blocks.0.hook_resid_pre"], "columns": ["0", "1"]},
    {"restored": {"file": "a.npy", "dtype": "<f4", "shape": [1, 2]}, "metric": {"file": "b.npy", "dtype": "<f4", "shape": [1, 2]}},
    []), npy("<f4", [1, 2], struct.pack("<2f", 0.5, 1.0)), npy("<f4", [1, 2], struct.pack("<2f", 1.5, 2.0))))

# Prompts files and corpora (fuzz_prompts_corpus): byte 0 even = a prompts file, odd = a corpus read in chunks of
# 16 + byte 1 bytes. The shipped examples (docs/examples/), plain-text prompts, and texts that cut badly.
ex = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "examples")
put("fuzz_prompts_corpus", "prompts-jsonl", b"\x00" + open(os.path.join(ex, "prompts.jsonl"), "rb").read())
put("fuzz_prompts_corpus", "prompts-plain", b"\x00The Eiffel Tower is in\r\n\n  \nOnce upon a time\n{not json first}\n")
put("fuzz_prompts_corpus", "prompts-escapes", b"\x00" + json.dumps({"prompt": "a\nb \u00e9\u65e5", "target": " c"}).encode() +
    b"\n\n" + json.dumps({"prompt": "x"}).encode() + b"\n")
put("fuzz_prompts_corpus", "corpus-heldout", b"\x01\x00" + open(os.path.join(ex, "heldout.txt"), "rb").read()[:4000])
put("fuzz_prompts_corpus", "corpus-utf8", b"\x01\x05" + ("Once upon a time \u65e5\u672c\u8a9e\n\n  \t" * 20 +
    "\U0001f642" * 30).encode() + b"\xff\xc3")
# SentencePiece models (fuzz_spm_model): a BPE model with byte fallback and the nmt_nfkc charsmap, trained by
# Debian's spm_train on a generated corpus (skipped, with a note, where spm_train is missing).
import shutil, subprocess, tempfile
if shutil.which("spm_train"):
    with tempfile.TemporaryDirectory() as td:
        words = "the quick brown fox jumps over lazy dog hello world token model piece byte small test corpus lens".split()
        with open(os.path.join(td, "c.txt"), "w") as f:
            for i in range(300):
                f.write(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) + "\n")
        for name, extra in (("bpe320", ["--model_type=bpe", "--vocab_size=320", "--byte_fallback=true"]),
                            ("char-identity", ["--model_type=char", "--normalization_rule_name=identity"])):
            subprocess.run(["spm_train", "--input=" + os.path.join(td, "c.txt"), "--model_prefix=" + os.path.join(td, name),
                            "--minloglevel=2"] + extra, check=True, capture_output=True)
            put("fuzz_spm_model", name + ".model", open(os.path.join(td, name + ".model"), "rb").read())
else:
    print("note: spm_train not found; fuzz_spm_model starts without seeds")

# GGUF (version 3, little-endian): tiny gpt2 (F32/F16) and llama (Q8_0 / Q4_K / BF16) models in the format's
# own layout: header, typed key-values, tensor infos, data aligned to 32 bytes.
def gg_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b
def gg_kv(key, t, v):
    enc = {4: "<I", 5: "<i", 6: "<f", 10: "<Q"}
    if t == 8: body = gg_str(v)
    elif t == 9:
        et, items = v
        body = struct.pack("<IQ", et, len(items)) + b"".join(gg_str(x) if et == 8 else struct.pack(enc.get(et, "<i"), x) for x in items)
    else: body = struct.pack(enc[t], v)
    return gg_str(key) + struct.pack("<I", t) + body
def gguf(kvs, tensors, align=32):
    infos, data = b"", b""
    for name, ne, typ, raw in tensors:
        data += b"\0" * ((align - len(data) % align) % align)
        infos += gg_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", typ, len(data))
        data += raw
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(gg_kv(*kv) for kv in kvs) + infos
    head += b"\0" * ((align - len(head) % align) % align)
    return head + data
def f32(n, scale=0.1): return struct.pack("<%df" % n, *[scale * ((i * 37 % 11) - 5) for i in range(n)])
def f16(n): return struct.pack("<%de" % n, *[0.1 * ((i * 37 % 11) - 5) for i in range(n)])
def q8_0(n): return b"".join(struct.pack("<e", 0.01) + bytes((i * 7 + j) % 256 for j in range(32)) for i in range(n // 32))
def q4_k(n): return b"".join(struct.pack("<ee", 0.01, 0.001) + bytes((i * 13 + j) % 256 for j in range(140)) for i in range(n // 256))
d, V, C, F = 8, 4, 4, 16
tok = [(9, (8, ["a", "b", "c", "d"]))]
gpt = [("general.architecture", 8, "gpt2"), ("gpt2.block_count", 4, 1), ("gpt2.embedding_length", 4, d),
       ("gpt2.feed_forward_length", 4, F), ("gpt2.attention.head_count", 4, 2), ("gpt2.context_length", 4, C),
       ("gpt2.attention.layer_norm_epsilon", 6, 1e-5), ("tokenizer.ggml.model", 8, "gpt2"),
       ("tokenizer.ggml.tokens",) + tok[0]]
gt = [("token_embd.weight", [d, V], 0, f32(d * V)), ("position_embd.weight", [d, C], 1, f16(d * C)),
      ("output_norm.weight", [d], 0, f32(d, 1)), ("output_norm.bias", [d], 0, f32(d)),
      ("blk.0.attn_norm.weight", [d], 0, f32(d, 1)), ("blk.0.attn_norm.bias", [d], 0, f32(d)),
      ("blk.0.attn_qkv.weight", [d, 3 * d], 0, f32(3 * d * d)), ("blk.0.attn_qkv.bias", [3 * d], 0, f32(3 * d)),
      ("blk.0.attn_output.weight", [d, d], 1, f16(d * d)), ("blk.0.attn_output.bias", [d], 0, f32(d)),
      ("blk.0.ffn_norm.weight", [d], 0, f32(d, 1)), ("blk.0.ffn_norm.bias", [d], 0, f32(d)),
      ("blk.0.ffn_up.weight", [d, F], 0, f32(d * F)), ("blk.0.ffn_up.bias", [F], 0, f32(F)),
      ("blk.0.ffn_down.weight", [F, d], 0, f32(d * F)), ("blk.0.ffn_down.bias", [d], 0, f32(d))]
put("fuzz_gguf", "gpt2.gguf", gguf(gpt, gt))
d, F = 32, 32
lla = [("general.architecture", 8, "llama"), ("general.alignment", 4, 64), ("llama.block_count", 4, 1),
       ("llama.embedding_length", 4, d), ("llama.feed_forward_length", 4, F), ("llama.attention.head_count", 4, 4),
       ("llama.attention.head_count_kv", 4, 2), ("llama.context_length", 4, C), ("llama.rope.freq_base", 6, 10000.0),
       ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5), ("tokenizer.ggml.model", 8, "llama"),
       ("tokenizer.ggml.tokens",) + tok[0], ("tokenizer.ggml.scores", 9, (6, [0.0, -1.0, -2.0, -3.0])),
       ("tokenizer.ggml.token_type", 9, (5, [2, 3, 1, 6])), ("tokenizer.ggml.bos_token_id", 4, 1)]
def q4_0(n): return b"".join(struct.pack("<e", 0.02) + bytes((i * 5 + j) % 256 for j in range(16)) for i in range(n // 32))
lt = [("token_embd.weight", [d, V], 8, q8_0(d * V)), ("output_norm.weight", [d], 0, f32(d, 1)),
      ("blk.0.attn_norm.weight", [d], 0, f32(d, 1)), ("blk.0.ffn_norm.weight", [d], 0, f32(d, 1)),
      ("blk.0.attn_q.weight", [d, d], 2, q4_0(d * d)), ("blk.0.attn_k.weight", [d, d // 2], 8, q8_0(d * d // 2)),
      ("blk.0.attn_v.weight", [d, d // 2], 8, q8_0(d * d // 2)), ("blk.0.attn_output.weight", [d, d], 30, f16(d * d)),
      ("blk.0.ffn_gate.weight", [d, F], 2, q4_0(d * F)), ("blk.0.ffn_up.weight", [d, F], 8, q8_0(d * F)),
      ("blk.0.ffn_down.weight", [F, d], 0, f32(d * F)), ("output.weight", [d, V], 1, f16(d * V))]
put("fuzz_gguf", "llama-quant.gguf", gguf(lla, lt, 64))
kb = {10: 84, 11: 110, 12: 144, 13: 176, 14: 210}
put("fuzz_gguf", "kquants.gguf", gguf([("general.architecture", 8, "none")],
    [("k%d" % t, [256, 1], t, bytes((i * 31 + t) % 256 for i in range(n))) for t, n in kb.items()] +
    [("q5_0", [32, 2], 6, bytes(range(44))), ("q5_1", [32, 1], 7, bytes(range(24))), ("q4_1", [32, 1], 3, bytes(range(20))),
     # MXFP4 (type 39): 17-byte blocks, an E8M0 scale byte then 16 bytes of codes; the third block's scale is 0xFF (NaN)
     ("mxfp4", [32, 3], 39, bytes([127] + list(range(16)) + [2] + list(range(16, 32)) + [255] + list(range(32, 48))))]))
put("fuzz_gguf", "header-only.gguf", gguf([("general.architecture", 8, "llama"), ("a.arr", 9, (9 if False else 4, [1, 2, 3]))], []))

# fuzz_gguf_reader (the reader alone) starts from the same GGUF seeds.
import shutil
shutil.copytree(os.path.join(out, "fuzz_gguf"), os.path.join(out, "fuzz_gguf_reader"), dirs_exist_ok=True)

# fuzz_sae: every layout tests/fixtures/sae/make_saes.py writes (the SAE test's own fixtures), packed as the
# harness reads them: layout byte, JSON length (u16 little endian), the JSON part, the weights file.
import subprocess, tempfile
with tempfile.TemporaryDirectory() as t:
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "..", "fixtures", "sae", "make_saes.py"), t], check=True,
                   stdout=subprocess.DEVNULL)
    def pack(layout, js, w):
        js = open(js, "rb").read() if js else b""
        return bytes([layout]) + struct.pack("<H", len(js)) + js + open(w, "rb").read()
    for name in sorted(os.listdir(t)):
        d = os.path.join(t, name)
        if os.path.isfile(os.path.join(d, "cfg.json")) and os.path.isfile(os.path.join(d, "sae_weights.safetensors")):
            put("fuzz_sae", name, pack(0, os.path.join(d, "cfg.json"), os.path.join(d, "sae_weights.safetensors")))
    for root, _, files in os.walk(t):
        for f in files:
            p = os.path.join(root, f)
            tag = os.path.relpath(p, t).replace("/", "_")
            if f == "params.npz": put("fuzz_sae", tag, pack(1, None, p))
            elif f == "params.safetensors": put("fuzz_sae", tag, pack(2, None, p))
            elif f == "hyperparams.json": put("fuzz_sae", tag, pack(3, p, os.path.join(root, "checkpoints", "final.safetensors")))
            elif f.startswith("layer_") and f.endswith(".safetensors"): put("fuzz_sae", tag, pack(4, None, p))

# fuzz_transcoders: every config.yaml tests/fixtures/transcoders/make_transcoders.py writes (byte 0), its CLTs'
# W_enc_1 / W_dec_0 files (bytes 1, 2) and per-layer layer_1 files (byte 3), as the harness reads them.
with tempfile.TemporaryDirectory() as t:
    subprocess.run([sys.executable, os.path.join(here, "..", "fixtures", "transcoders", "make_transcoders.py"), t],
                   check=True, stdout=subprocess.DEVNULL)
    for name in sorted(os.listdir(t)):
        d = os.path.join(t, name)
        for f, b in (("config.yaml", 0), ("W_enc_1.safetensors", 1), ("W_dec_0.safetensors", 2),
                     ("layer_1.safetensors", 3)):
            if os.path.isfile(os.path.join(d, f)):
                put("fuzz_transcoders", name + "_" + f, bytes([b]) + open(os.path.join(d, f), "rb").read())

print("seeds written to", out)
