#!/usr/bin/python3
"""Writes a random model and one random JumpReLU transcoder per layer for the attribution-graph bench (never
committed: the GPT-2-small shape is 1.9 GB of transcoders):
  make_graph_fixture.py gpt2 OUT_DIR     GPT-2-small shape: 12 layers, d 768, 12 heads, vocabulary 50257, context
                                         2048; transcoders of 24576 features (OUT_DIR/model, OUT_DIR/transcoders)
  make_graph_fixture.py gemma2 OUT_DIR   Gemma-2-2B's shape and block (norms after attention and MLP, soft-caps 50 /
                                         30, sliding window 4096, embeddings × sqrt(d)): 26 layers, d 2304, 8 heads of
                                         256 (4 KV heads), MLP 9216, vocabulary 256000; transcoders of 16384 features
                                         read as Gemma Scope's (ln2.hook_normalized -> hook_mlp_out, config.yaml);
                                         model and transcoders in bfloat16 (9.1 GB)
  make_graph_fixture.py llama OUT_DIR    the same sizes in a Llama block, float32
Set L, D, H, DSAE, V, CTX in the environment for other sizes, DTYPE (F32 or BF16) for the stored dtype. Weights
~ N(0, 0.02), norms the identity, biases 0. The transcoders' encoder rows are N(0, 1/d), so a pre-activation of
the (unit-variance) normalised MLP input is about N(0, 1); the JumpReLU threshold THR (default 2.9) keeps ~0.2 %
of the features, 30-60 per token and layer. Tensors are generated and written in slices of rows (the writer holds
one slice, not the model). The GPT-2 tokenizer files are copied from ../shared/fixtures/gpt2-tiny when there."""
import json, os, shutil, struct, sys
import numpy as np

kind, out = sys.argv[1], sys.argv[2]
shape = {"gpt2": dict(L=12, D=768, H=12, DSAE=24576, V=50257, CTX=2048, FF=3072, KV=12),
         "llama": dict(L=26, D=2304, H=8, DSAE=16384, V=256000, CTX=8192, FF=9216, KV=4),
         "gemma2": dict(L=26, D=2304, H=8, DSAE=16384, V=256000, CTX=8192, FF=9216, KV=4)}[kind]
for k in shape:
    shape[k] = int(os.environ.get(k, shape[k]))
L, D, H, DSAE, V, CTX, FF, KV = (shape[k] for k in ("L", "D", "H", "DSAE", "V", "CTX", "FF", "KV"))
THR = float(os.environ.get("THR", 2.9))
DTYPE = os.environ.get("DTYPE", "BF16" if kind == "gemma2" else "F32")
rng = np.random.default_rng(11)
CHUNK = 1 << 24  # elements generated at a time


def as_stored(a):
    """float32 -> the bytes of DTYPE (bfloat16: the upper half of each float32, rounded to nearest even)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if DTYPE == "F32":
        return a.tobytes()
    u = a.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, make(rows) -> float32 array [rows, *shape[1:]]), written a slice at a time."""
    size = 4 if DTYPE == "F32" else 2
    header, off = {}, 0
    for name, shp, _ in tensors:
        n = int(np.prod(shp)) * size
        header[name] = {"dtype": DTYPE, "shape": list(shp), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, shp, make in tensors:
            row = int(np.prod(shp[1:])) if len(shp) > 1 else 1
            step = max(1, CHUNK // row) if len(shp) > 1 else shp[0]
            for r0 in range(0, shp[0], step):
                f.write(as_stored(make(min(step, shp[0] - r0))))


def normal(*shp, scale=0.02):
    """A random tensor, made in slices of rows."""
    return (tuple(shp), lambda rows: rng.standard_normal((rows,) + tuple(shp[1:]), dtype=np.float32) * scale)


def const(value, *shp):
    return (tuple(shp), lambda rows: np.full((rows,) + tuple(shp[1:]), value, np.float32))


def named(name, spec):
    return (name, spec[0], spec[1])


os.makedirs(f"{out}/model", exist_ok=True)
os.makedirs(f"{out}/transcoders", exist_ok=True)
if kind == "gpt2":
    t = [("wte.weight", normal(V, D)), ("wpe.weight", normal(CTX, D)),
         ("ln_f.weight", const(1, D)), ("ln_f.bias", const(0, D))]
    for l in range(L):
        p = f"h.{l}."
        t += [(p + "ln_1.weight", const(1, D)), (p + "ln_1.bias", const(0, D)),
              (p + "attn.c_attn.weight", normal(D, 3 * D)), (p + "attn.c_attn.bias", const(0, 3 * D)),
              (p + "attn.c_proj.weight", normal(D, D)), (p + "attn.c_proj.bias", const(0, D)),
              (p + "ln_2.weight", const(1, D)), (p + "ln_2.bias", const(0, D)),
              (p + "mlp.c_fc.weight", normal(D, FF)), (p + "mlp.c_fc.bias", const(0, FF)),
              (p + "mlp.c_proj.weight", normal(FF, D)), (p + "mlp.c_proj.bias", const(0, D))]
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new",
           "bos_token_id": 50256, "eos_token_id": 50256, "layer_norm_epsilon": 1e-5, "n_ctx": CTX, "n_positions": CTX,
           "n_embd": D, "n_head": H, "n_layer": L, "n_inner": None, "vocab_size": V, "tie_word_embeddings": True,
           "scale_attn_weights": True, "torch_dtype": "float32"}
else:
    dh = int(os.environ.get("DH", 256))
    # Gemma's norms multiply by (1 + w): w = 0 is the identity
    one = const(0 if kind == "gemma2" else 1, D)
    t = [("model.embed_tokens.weight", normal(V, D)), ("model.norm.weight", one)]
    for l in range(L):
        p = f"model.layers.{l}."
        t += [(p + "input_layernorm.weight", one),
              (p + "self_attn.q_proj.weight", normal(H * dh, D)), (p + "self_attn.k_proj.weight", normal(KV * dh, D)),
              (p + "self_attn.v_proj.weight", normal(KV * dh, D)), (p + "self_attn.o_proj.weight", normal(D, H * dh)),
              (p + "post_attention_layernorm.weight", one),
              (p + "mlp.gate_proj.weight", normal(FF, D)), (p + "mlp.up_proj.weight", normal(FF, D)),
              (p + "mlp.down_proj.weight", normal(D, FF))]
        if kind == "gemma2":
            t += [(p + "pre_feedforward_layernorm.weight", one), (p + "post_feedforward_layernorm.weight", one)]
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": D, "intermediate_size": FF,
           "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV, "head_dim": dh,
           "max_position_embeddings": CTX, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "vocab_size": V,
           "bos_token_id": 2, "eos_token_id": 1, "tie_word_embeddings": True, "hidden_act": "silu",
           "torch_dtype": "float32"}
    if kind == "gemma2":
        cfg.update({"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "hidden_act": "gelu_pytorch_tanh",
                    "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": dh, "attn_logit_softcapping": 50.0,
                    "final_logit_softcapping": 30.0, "sliding_window": 4096, "torch_dtype": "bfloat16"})
write_safetensors(f"{out}/model/model.safetensors", [named(n, spec) for n, spec in t])
json.dump(cfg, open(f"{out}/model/config.json", "w"), indent=1)
for f in ("vocab.json", "merges.txt"):  # a GPT-2 tokenizer: every id it makes is below V
    src = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "gpt2-tiny", f)
    if os.path.exists(src):
        shutil.copy(src, f"{out}/model/{f}")
del t

for l in range(L):
    write_safetensors(f"{out}/transcoders/layer_{l}.safetensors", [named(n, spec) for n, spec in [
        ("W_enc", normal(DSAE, D, scale=1 / np.sqrt(D))), ("b_enc", const(0, DSAE)),
        ("W_dec", normal(DSAE, D, scale=0.05 / np.sqrt(D))), ("b_dec", const(0, D)),
        ("activation_function.threshold", const(THR, DSAE))]])
if kind == "gemma2":  # Gemma Scope's transcoders read the norm before its weight and write after the post-MLP norm
    with open(f"{out}/transcoders/config.yaml", "w") as f:
        f.write("model_kind: transcoder_set\nfeature_input_hook: ln2.hook_normalized\nfeature_output_hook: hook_mlp_out\n")
print(f"{out}: {kind} L={L} d={D} H={H} d_sae={DSAE} V={V} ctx={CTX}")
