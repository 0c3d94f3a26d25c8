#!/usr/bin/env python3
"""make_tokenizers.py — Hugging Face / SentencePiece tokenizer files rebuilt from llama.cpp's vocabulary GGUFs.

    PYTHONPATH=<llama.cpp>/gguf-py python3 make_tokenizers.py <llama.cpp>/models OUT_DIR [NAME ...]

llama.cpp ships real vocabularies as `models/ggml-vocab-<name>.gguf` (in the git bundle of npm node-llama-cpp@3.22.1).
For each NAME (default: all below) this writes OUT_DIR/<name>/:
  tokenizer.json + tokenizer_config.json  the layout Hugging Face uses for that family (pre-tokenizer expression,
                                          normalizer, added tokens, post-processor) around the GGUF's tokens/merges;
  tokenizer.model                         (SentencePiece families) a ModelProto built with python3-sentencepiece's
                                          sentencepiece_model_pb2 from the GGUF's pieces, scores and types;
  vocab_spec.json                         the GGUF's tokenizer.ggml.* values, for vocablens::tokenizer_from_vocab;
  llama.gguf                              (only where the GGUF lacks tokenizer.ggml.pre) a copy with the pre-tokenizer
                                          name added, so that llama.cpp uses the family's expression.
The family layouts are written from the published tokenizer.json files of Meta-Llama-3, Qwen2.5, Pythia,
GPT-2, Llama-2 and Phi-3 (structure only; the vocabulary comes from the GGUF).
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFWriter

LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

# name -> (kind, options)
FAMILIES = {
    "llama-bpe": dict(kind="bytelevel", split=LLAMA3_RE, nfc=False, bos=True, ignore_merges=True),
    "qwen2": dict(kind="bytelevel", split=QWEN2_RE, nfc=True, bos=False),
    "gpt-neox": dict(kind="bytelevel", split=None, nfc=True, bos=False, pre="olmo"),
    "gpt-2": dict(kind="bytelevel", split=None, nfc=False, bos=False),
    "llama-spm": dict(kind="spm", bos=True),
    "phi-3": dict(kind="spm", bos=True),
    # Gemma-4's tokenizer model ("gemma4"): only the GGUF path is checked (against llama.cpp); the Hugging Face
    # layout of its tokenizer.json is not reproduced here.
    "gemma-4": dict(kind="gguf-only"),
    # Byte-level vocabularies with their own pre-tokenizers: only the GGUF path is checked (against llama.cpp).
    "falcon": dict(kind="gguf-only"),
    "starcoder": dict(kind="gguf-only"),
    "refact": dict(kind="gguf-only"),
    "deepseek-llm": dict(kind="gguf-only"),
    "deepseek-coder": dict(kind="gguf-only"),
}


# GGUF metadata value types (llama.cpp's gguf.h, GGUF v2/v3): struct format, or "s" (string) / "a" (array).
_GGUF_TYPES = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 8: "s", 9: "a", 10: "<Q",
               11: "<q", 12: "<d"}


def read_gguf_metadata(path):
    """The key/value section of a GGUF file as {key: value} (arrays as lists, strings decoded as UTF-8).

    Written here rather than read with gguf-py's GGUFReader, which builds a numpy view per array element
    (~45 s of CPU for these seven vocabularies, most of the test's set-up); the tensors are not read.
    """
    import mmap
    import struct
    with open(path, "rb") as fh:
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if buf[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    version, = struct.unpack_from("<I", buf, 4)
    if version < 2:
        raise ValueError("%s: GGUF version %d (only 2 and 3)" % (path, version))
    _n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
    pos = 24

    def string():
        nonlocal pos
        n, = struct.unpack_from("<Q", buf, pos)
        v = buf[pos + 8:pos + 8 + n].decode("utf-8")
        pos += 8 + n
        return v

    def value(t):
        nonlocal pos
        fmt = _GGUF_TYPES[t]
        if fmt == "s":
            return string()
        if fmt == "a":
            sub, n = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            sfmt = _GGUF_TYPES[sub]
            if sfmt == "s":
                return [string() for _ in range(n)]
            if sfmt == "a":
                return [value(9) for _ in range(n)]
            size = struct.calcsize(sfmt)
            out = list(struct.unpack_from("<%d%s" % (n, sfmt[1]), buf, pos))
            pos += n * size
            return out
        v, = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v

    meta = {}
    for _ in range(n_kv):
        key = string()
        t, = struct.unpack_from("<I", buf, pos)
        pos += 4
        meta[key] = value(t)
    return meta


def field(r, key, default=None):
    return r.get(key, default)


def read_vocab(path):
    r = read_gguf_metadata(path)
    v = dict(
        model=field(r, "tokenizer.ggml.model"),
        pre=field(r, "tokenizer.ggml.pre", ""),
        tokens=field(r, "tokenizer.ggml.tokens"),
        token_types=field(r, "tokenizer.ggml.token_type", []),
        scores=field(r, "tokenizer.ggml.scores", []),
        merges=field(r, "tokenizer.ggml.merges", []),
        bos_id=field(r, "tokenizer.ggml.bos_token_id", -1),
        eos_id=field(r, "tokenizer.ggml.eos_token_id", -1),
        unk_id=field(r, "tokenizer.ggml.unknown_token_id", -1),
        pad_id=field(r, "tokenizer.ggml.padding_token_id", -1),
    )
    for k, gk in (("add_bos", "add_bos_token"), ("add_eos", "add_eos_token"), ("add_space_prefix", "add_space_prefix")):
        val = field(r, "tokenizer.ggml." + gk)
        if val is not None:
            v[k] = bool(val)
    return r, v


def is_filler(tok):  # llama.cpp pads vocabularies with "[PAD<id>]" user-defined tokens; not part of the HF files
    return tok.startswith("[PAD") and tok.endswith("]")


def added_entry(i, tok, special):
    return {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def bytelevel(v, opt):
    vocab, added = {}, []
    for i, (tok, ty) in enumerate(zip(v["tokens"], v["token_types"] or [1] * len(v["tokens"]))):
        if is_filler(tok):
            continue
        if ty in (3, 4):
            added.append(added_entry(i, tok, ty == 3))
        if ty != 3 and not (ty == 4 and " " in tok):
            vocab[tok] = i
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": opt["split"] is None}
    if opt["split"]:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": opt["split"]}, "behavior": "Isolated", "invert": False}, bl]}
    else:
        pre = bl
    post = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": opt["bos"], "add_eos_token": False}
    bos = v["tokens"][v["bos_id"]] if v["bos_id"] >= 0 else None
    if opt["bos"]:
        post = {"type": "Sequence", "processors": [post, {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [v["bos_id"]], "tokens": [bos]}}}]}
        cfg["bos_token"] = bos
    if v["eos_id"] >= 0:
        cfg["eos_token"] = v["tokens"][v["eos_id"]]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "NFC"} if opt["nfc"] else None, "pre_tokenizer": pre, "post_processor": post,
          "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                    "ignore_merges": bool(opt.get("ignore_merges")), "vocab": vocab,
                    "merges": [m.split(" ") for m in v["merges"]]}}
    return tj, cfg


def spm_merges(v):
    """Merges from SentencePiece scores, as transformers' SentencePieceExtractor derives them: every piece that
    splits into two pieces of the vocabulary gives a merge; merges ordered by the merged piece's score (highest
    first), within a piece by the ids of its two parts."""
    vocab = {t: i for i, t in enumerate(v["tokens"])}
    types = v["token_types"]
    merges = []
    for i, piece in enumerate(v["tokens"]):
        if types[i] not in (1, 4):
            continue
        local = []
        for k in range(1, len(piece)):
            l, r = piece[:k], piece[k:]
            if l in vocab and r in vocab:
                local.append((vocab[l], vocab[r], l, r))
        local.sort()
        merges.extend((v["scores"][i], n, l, r) for n, (_, _, l, r) in enumerate(local))
    merges.sort(key=lambda m: -m[0])  # stable: equal scores keep vocabulary order
    return [[l, r] for _, _, l, r in merges]


def spm_json(v, opt):
    vocab = {t: i for i, t in enumerate(v["tokens"])}
    added = [added_entry(i, t, ty in (2, 3)) for i, (t, ty) in enumerate(zip(v["tokens"], v["token_types"]))
             if ty in (2, 3, 4) and not is_filler(t)]
    if v["unk_id"] >= 0:
        for a in added:
            if a["id"] == v["unk_id"]:
                a["special"], a["normalized"] = True, False
    bos = v["tokens"][v["bos_id"]]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                              {"type": "Replace", "pattern": {"String": " "},
                                                               "content": "\u2581"}]},
          "pre_tokenizer": None,
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                             "special_tokens": {bos: {"id": bos, "ids": [v["bos_id"]], "tokens": [bos]}}},
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
              {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": v["tokens"][v["unk_id"]], "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                    "vocab": vocab, "merges": spm_merges(v)}}
    cfg = {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False, "legacy": True,
           "bos_token": bos, "eos_token": v["tokens"][v["eos_id"]], "unk_token": v["tokens"][v["unk_id"]]}
    return tj, cfg


def spm_model(v):
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    for i, (t, ty, s) in enumerate(zip(v["tokens"], v["token_types"], v["scores"])):
        p = m.pieces.add()
        p.piece, p.score = t, s
        p.type = 2 if i == v["unk_id"] else (3 if ty == 2 else ty)  # exactly one UNKNOWN piece
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = len(v["tokens"])
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id = v["unk_id"], v["bos_id"], v["eos_id"]
    m.trainer_spec.pad_id = v["pad_id"]
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = v.get("add_space_prefix", True)
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    return m.SerializeToString()


def copy_with_pre(reader, v, pre, out):
    """The vocabulary GGUF again, with tokenizer.ggml.pre set (llama.cpp reads the family's expression from it)."""
    w = GGUFWriter(out, field(reader, "general.architecture"))
    w.add_tokenizer_model(v["model"])
    w.add_tokenizer_pre(pre)
    w.add_token_list(v["tokens"])
    w.add_token_types(v["token_types"])
    if v["merges"]:
        w.add_token_merges(v["merges"])
    for key, fn in (("bos_id", w.add_bos_token_id), ("eos_id", w.add_eos_token_id), ("unk_id", w.add_unk_token_id),
                    ("pad_id", w.add_pad_token_id)):
        if v[key] >= 0:
            fn(v[key])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    models, out = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or list(FAMILIES)
    for name in names:
        opt = FAMILIES[name]
        reader, v = read_vocab(os.path.join(models, "ggml-vocab-%s.gguf" % name))
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tj = None
        if opt["kind"] == "bytelevel":
            tj, cfg = bytelevel(v, opt)
        elif opt["kind"] == "spm":
            tj, cfg = spm_json(v, opt)
            with open(os.path.join(d, "tokenizer.model"), "wb") as f:
                f.write(spm_model(v))
        if tj is not None:
            with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
                f.write(json.dumps(tj, ensure_ascii=False))
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f, ensure_ascii=False, indent=1)
        gguf_path = os.path.join(models, "ggml-vocab-%s.gguf" % name)
        if opt.get("pre") and not v["pre"]:
            v["pre"] = opt["pre"]
            gguf_path = os.path.join(d, "llama.gguf")
            copy_with_pre(reader, v, opt["pre"], gguf_path)
        with open(os.path.join(d, "vocab_spec.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps({k: v[k] for k in v}, ensure_ascii=False))
        with open(os.path.join(d, "gguf_path.txt"), "w") as f:
            f.write(os.path.abspath(gguf_path) + "\n")
        print("%s: %d tokens, %d merges -> %s" % (name, len(v["tokens"]), len(tj["model"]["merges"] if tj else v["merges"]), d))


if __name__ == "__main__":
    main()
