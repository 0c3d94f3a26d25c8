#!/usr/bin/python3
"""Writes a random model and one random JumpReLU transcoder per layer for the attribution-graph bench (never
committed: the GPT-2-small shape is 1.9 GB of transcoders):
  make_graph_fixture.py gpt2 OUT_DIR     GPT-2-small shape: 12 layers, d 768, 12 heads, vocabulary 50257, context
                                         2048; transcoders of 24576 features (OUT_DIR/model, OUT_DIR/transcoders)
  make_graph_fixture.py llama OUT_DIR    Gemma-2-2B's sizes in a Llama block (vocablens's graph does not cover
                                         Gemma-2's post-norms): 26 layers, d 2304, 8 heads of 256 (4 KV heads),
                                         MLP 9216, vocabulary 256000; transcoders of 16384 features
Set L, D, H, DSAE, V, CTX in the environment for other sizes. Weights ~ N(0, 0.02), norms 1, biases 0. The
transcoders' encoder rows are N(0, 1/d), so a pre-activation of the (unit-variance) normalised MLP input is
about N(0, 1); the JumpReLU threshold THR (default 2.9) keeps ~0.2 % of the features, 30-60 per token and
layer. The GPT-2 tokenizer files are copied from ../shared/fixtures/gpt2-tiny when there."""
import json, os, shutil, struct, sys
import numpy as np

kind, out = sys.argv[1], sys.argv[2]
shape = {"gpt2": dict(L=12, D=768, H=12, DSAE=24576, V=50257, CTX=2048, FF=3072, KV=12),
         "llama": dict(L=26, D=2304, H=8, DSAE=16384, V=256000, CTX=8192, FF=9216, KV=4)}[kind]
for k in shape:
    shape[k] = int(os.environ.get(k, shape[k]))
L, D, H, DSAE, V, CTX, FF, KV = (shape[k] for k in ("L", "D", "H", "DSAE", "V", "CTX", "FF", "KV"))
THR = float(os.environ.get("THR", 2.9))
rng = np.random.default_rng(11)


def write_safetensors(path, tensors):
    """tensors: list of (name, array float32), written streaming."""
    header, off = {}, 0
    for name, shp in ((n, a.shape) for n, a in tensors):
        n = int(np.prod(shp)) * 4
        header[name] = {"dtype": "F32", "shape": list(shp), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, a in tensors:
            f.write(np.ascontiguousarray(a, dtype=np.float32).tobytes())


def normal(*shp, scale=0.02):
    return (rng.standard_normal(shp, dtype=np.float32) * scale)


os.makedirs(f"{out}/model", exist_ok=True)
os.makedirs(f"{out}/transcoders", exist_ok=True)
if kind == "gpt2":
    t = [("wte.weight", normal(V, D)), ("wpe.weight", normal(CTX, D)),
         ("ln_f.weight", np.ones(D, np.float32)), ("ln_f.bias", np.zeros(D, np.float32))]
    for l in range(L):
        p = f"h.{l}."
        t += [(p + "ln_1.weight", np.ones(D, np.float32)), (p + "ln_1.bias", np.zeros(D, np.float32)),
              (p + "attn.c_attn.weight", normal(D, 3 * D)), (p + "attn.c_attn.bias", np.zeros(3 * D, np.float32)),
              (p + "attn.c_proj.weight", normal(D, D)), (p + "attn.c_proj.bias", np.zeros(D, np.float32)),
              (p + "ln_2.weight", np.ones(D, np.float32)), (p + "ln_2.bias", np.zeros(D, np.float32)),
              (p + "mlp.c_fc.weight", normal(D, FF)), (p + "mlp.c_fc.bias", np.zeros(FF, np.float32)),
              (p + "mlp.c_proj.weight", normal(FF, D)), (p + "mlp.c_proj.bias", np.zeros(D, np.float32))]
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new",
           "bos_token_id": 50256, "eos_token_id": 50256, "layer_norm_epsilon": 1e-5, "n_ctx": CTX, "n_positions": CTX,
           "n_embd": D, "n_head": H, "n_layer": L, "n_inner": None, "vocab_size": V, "tie_word_embeddings": True,
           "scale_attn_weights": True, "torch_dtype": "float32"}
    for f in ("vocab.json", "merges.txt"):
        src = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "gpt2-tiny", f)
        if os.path.exists(src):
            shutil.copy(src, f"{out}/model/{f}")
else:
    dh = D // H if "DH" not in os.environ else int(os.environ["DH"])
    dh = 256 if kind == "llama" and "DH" not in os.environ else dh
    t = [("model.embed_tokens.weight", normal(V, D)), ("model.norm.weight", np.ones(D, np.float32))]
    for l in range(L):
        p = f"model.layers.{l}."
        t += [(p + "input_layernorm.weight", np.ones(D, np.float32)),
              (p + "self_attn.q_proj.weight", normal(H * dh, D)), (p + "self_attn.k_proj.weight", normal(KV * dh, D)),
              (p + "self_attn.v_proj.weight", normal(KV * dh, D)), (p + "self_attn.o_proj.weight", normal(D, H * dh)),
              (p + "post_attention_layernorm.weight", np.ones(D, np.float32)),
              (p + "mlp.gate_proj.weight", normal(FF, D)), (p + "mlp.up_proj.weight", normal(FF, D)),
              (p + "mlp.down_proj.weight", normal(D, FF))]
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": D, "intermediate_size": FF,
           "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": dh,
           "max_position_embeddings": CTX, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "vocab_size": V,
           "bos_token_id": 2, "eos_token_id": 1, "tie_word_embeddings": True, "hidden_act": "silu",
           "torch_dtype": "float32"}
write_safetensors(f"{out}/model/model.safetensors", t)
json.dump(cfg, open(f"{out}/model/config.json", "w"), indent=1)
del t

for l in range(L):
    write_safetensors(f"{out}/transcoders/layer_{l}.safetensors", [
        ("W_enc", normal(DSAE, D, scale=1 / np.sqrt(D))), ("b_enc", np.zeros(DSAE, np.float32)),
        ("W_dec", normal(DSAE, D, scale=0.05 / np.sqrt(D))), ("b_dec", np.zeros(D, np.float32)),
        ("activation_function.threshold", np.full(DSAE, THR, np.float32))])
print(f"{out}: {kind} L={L} d={D} H={H} d_sae={DSAE} V={V} ctx={CTX}")
