# A small random LlamaForCausalLM whose matrices are whole K-quant super-blocks (256 values), so that every
# ggml type can quantize every matrix: 2 layers, d_model 256, 4 heads of 64 (2 kv heads), d_mlp 512,
# vocabulary 512 (llama2.c's tok512), untied lm_head. Written as a Hugging Face directory (F32 safetensors).
#   python3 make_llamak.py OUT_DIR
import json, os, struct, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20261124)
d, L, H, Hkv, dh, ff, V = 256, 2, 4, 2, 64, 512, 512
t = {}
def mat(o, i, s): return (rng.standard_normal((o, i)) * s).astype(np.float32)
t["model.embed_tokens.weight"] = mat(V, d, 1.0)
for l in range(L):
    p = f"model.layers.{l}."
    t[p + "input_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    t[p + "post_attention_layernorm.weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    t[p + "self_attn.q_proj.weight"] = mat(H * dh, d, 0.15)
    t[p + "self_attn.k_proj.weight"] = mat(Hkv * dh, d, 0.15)
    t[p + "self_attn.v_proj.weight"] = mat(Hkv * dh, d, 0.06)
    t[p + "self_attn.o_proj.weight"] = mat(d, H * dh, 0.06)
    t[p + "mlp.gate_proj.weight"] = mat(ff, d, 0.06)
    t[p + "mlp.up_proj.weight"] = mat(ff, d, 0.06)
    t[p + "mlp.down_proj.weight"] = mat(d, ff, 0.05)
t["model.norm.weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
t["lm_head.weight"] = mat(V, d, 0.1)
header, blobs, off = {}, [], 0
for k in sorted(t):
    b = t[k].tobytes()
    header[k] = {"dtype": "F32", "shape": list(t[k].shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d, "intermediate_size": ff,
           "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": Hkv, "head_dim": dh,
           "vocab_size": V, "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
           "torch_dtype": "float32", "attention_bias": False, "mlp_bias": False},
          open(os.path.join(out, "config.json"), "w"), indent=1)
