#!/usr/bin/env python3
"""Writes a sharded torch.save checkpoint, the layout transformers' save_pretrained(safe_serialization=False)
writes for large models: pytorch_model-0000K-of-0000N.bin shards + pytorch_model.bin.index.json (metadata.total_size,
weight_map name -> shard), with config.json copied beside it. Used by tests/model_test.cpp: torch (Debian's
python3-torch) is the independent writer of the files vocablens reads.

  torch_shards.py SRC_DIR OUT_DIR DTYPE N_SHARDS
SRC_DIR holds config.json and pytorch_model.bin; DTYPE is float32, float16 or bfloat16. A tied lm_head.weight
(the same storage as the embedding, as GPT-2's state_dict has it) is dropped, as save_pretrained does.
"""
import json
import os
import shutil
import sys

import torch

src, out, dtype, n_shards = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
sd = torch.load(os.path.join(src, "pytorch_model.bin"), map_location="cpu")
emb = [k for k in sd if k.endswith("wte.weight")]
if "lm_head.weight" in sd and emb and sd["lm_head.weight"].data_ptr() == sd[emb[0]].data_ptr():
    del sd["lm_head.weight"]
names = list(sd)
os.makedirs(out, exist_ok=True)
total = sum(sd[k].numel() * torch.empty((), dtype=dt).element_size() for k in names)
per = -(-len(names) // n_shards)
weight_map = {}
for s in range(n_shards):
    fname = "pytorch_model-%05d-of-%05d.bin" % (s + 1, n_shards)
    part = {k: sd[k].to(dt).contiguous() for k in names[s * per:(s + 1) * per]}
    torch.save(part, os.path.join(out, fname))
    weight_map.update({k: fname for k in part})
with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
with open(os.path.join(src, "config.json")) as f:
    config = json.load(f)
config["torch_dtype"] = dtype
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
