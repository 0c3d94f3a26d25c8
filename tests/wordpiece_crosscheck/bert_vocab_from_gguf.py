#!/usr/bin/env python3
"""bert_vocab_from_gguf.py — writes a BERT tokenizer directory from a llama.cpp BERT vocabulary (GGUF).

    PYTHONPATH=<llama.cpp>/gguf-py python3 bert_vocab_from_gguf.py ggml-vocab-bert-bge.gguf OUT_DIR

llama.cpp's converter stores BERT's word-initial pieces with a leading U+2581 and "##" pieces without the
prefix (convert_hf_to_gguf.py, BertModel.set_vocab, "phantom"); this undoes that. OUT_DIR receives
  vocab.txt              one token per line, id = line number (what vocablens reads),
  tokenizer_config.json  do_lower_case etc. (bge-small-en-v1.5 is uncased BERT),
  tokenizer.json         the same vocabulary as a Hugging Face WordPiece tokenizer (what transformers.js reads).
The token at a few well-known ids is checked (a wrong inversion fails loudly).
"""
import json
import os
import sys

import gguf  # llama.cpp's gguf-py (PYTHONPATH)


def main():
    src, out = sys.argv[1], sys.argv[2]
    r = gguf.GGUFReader(src)
    if bytes(r.fields["tokenizer.ggml.model"].parts[-1]).decode() != "bert":
        sys.exit(f"{src}: tokenizer.ggml.model is not 'bert'")
    f = r.fields["tokenizer.ggml.tokens"]
    raw = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    tokens = []
    for t in raw:
        if t.startswith("[") and t.endswith("]"):
            tokens.append(t)
        elif t.startswith("\u2581"):
            tokens.append(t[1:])
        else:
            tokens.append("##" + t)
    expect = {0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]", 1996: "the", 2015: "##s"}
    for i, t in expect.items():
        if tokens[i] != t:
            sys.exit(f"{src}: token {i} is {tokens[i]!r}, expected {t!r} (not the bert-base-uncased vocabulary?)")
    if len(set(tokens)) != len(tokens):
        sys.exit(f"{src}: tokens are not distinct after undoing the U+2581 / ## mapping")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8", newline="\n") as fo:
        fo.write("".join(t + "\n" for t in tokens))
    cfg = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "strip_accents": None,
           "tokenize_chinese_chars": True, "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
           "pad_token": "[PAD]", "mask_token": "[MASK]", "model_max_length": 512}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as fo:
        json.dump(cfg, fo, indent=1)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tj = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": tokens.index(t), "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for t in special],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(tokens)}},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as fo:
        json.dump(tj, fo, ensure_ascii=False)
    print(f"{out}: {len(tokens)} tokens from {src}")


if __name__ == "__main__":
    main()
