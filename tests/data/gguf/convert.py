# Runs llama.cpp's own convert_hf_to_gguf.py (from the node-llama-cpp@3.22.1 source tree) on a Hugging Face
# directory under Debian's torch 1.13, with the vocabulary given here instead of transformers/sentencepiece:
#   cd LLAMA_CPP && PYTHONPATH=/work/shared/tools/llama-cpp/stub:gguf-py python3 convert.py TOK512 HF_DIR --outfile X.gguf --outtype f32
# TOK512: a llama2.c tokenizer file (tok512.bin) -> a llama SentencePiece vocabulary (tokens, scores, types);
# or "gpt2:<vocab-only gguf>" to copy a BPE vocabulary (tokens, types, merges) from one of llama.cpp's
# models/ggml-vocab-*.gguf.
import os, runpy, struct, sys
import torch
for name in ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "uint16", "uint32", "uint64"]:
    if not hasattr(torch, name): setattr(torch, name, torch.uint8 if "float8" in name else torch.int64)
VOCAB = sys.argv[1]
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
sys.path.insert(0, os.getcwd())
import gguf
import conversion
import conversion.base as base

def llama2c_vocab(path):
    data = open(path, "rb").read()
    (maxlen,) = struct.unpack_from("<i", data, 0)
    off, toks, scores = 4, [], []
    while off < len(data):
        score, n = struct.unpack_from("<fi", data, off); off += 8
        toks.append(data[off:off + n]); off += n; scores.append(score)
    return toks, scores

def set_vocab(self):
    w = self.gguf_writer
    if VOCAB.startswith("gpt2:"):
        r = gguf.GGUFReader(VOCAB[5:])
        def arr(name):
            f = r.fields[name]
            if f.types[-1] == gguf.GGUFValueType.STRING: return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
            return [f.parts[i][0].item() for i in f.data]
        w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("gpt-2")
        w.add_token_list(arr("tokenizer.ggml.tokens")); w.add_token_types(arr("tokenizer.ggml.token_type"))
        w.add_token_merges(arr("tokenizer.ggml.merges"))
        w.add_bos_token_id(50256); w.add_eos_token_id(50256)
        return
    toks, scores = llama2c_vocab(VOCAB)
    types = []
    for i, t in enumerate(toks):
        if i == 0: types.append(gguf.TokenType.UNKNOWN)
        elif i in (1, 2): types.append(gguf.TokenType.CONTROL)
        elif t.startswith(b"<0x") and t.endswith(b">") and len(t) == 6: types.append(gguf.TokenType.BYTE)
        else: types.append(gguf.TokenType.NORMAL)
    w.add_tokenizer_model("llama"); w.add_tokenizer_pre("default")
    w.add_token_list([t.decode("utf-8", errors="replace") for t in toks])
    w.add_token_scores(scores); w.add_token_types(types)
    w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0)
    w.add_add_bos_token(True); w.add_add_eos_token(False)

_orig = conversion.get_model_class
def _patched(*a, **k):
    cls = _orig(*a, **k); cls.set_vocab = set_vocab; return cls
conversion.get_model_class = _patched
base.TextModel.set_vocab = set_vocab
runpy.run_path("convert_hf_to_gguf.py", run_name="__main__")
