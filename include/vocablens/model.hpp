// vocablens/model.hpp — the one model interface every analysis reads.
//
// Every family of vocablens/arch.hpp (GPT-2, Llama, Mistral, Qwen2/3, Gemma/Gemma-2, Phi-3, GPT-NeoX, OPT) is
// the same class; ModelConfig's block recipe says which pieces are in play. Analyses never see a checkpoint
// format or a family name: fused tensors arrive split into roles, Gemma's (1 + w) norm offset is folded
// into the norm weights, OPT's project_in/out into W_E/W_U, and the final soft-cap is inside unembed(), so
// unembed(final_norm(resid)) is exactly the model's own last step (docs/projections.md).
//
//   vocablens::Model model = vocablens::load_model("path/to/gpt2");     // HF dir, llama2.c .bin, ckpt.pt
//   at::Tensor ids = at::tensor({464, 412, 733}, at::kLong);             // [T] or [B, T]
//   auto out = model.forward(ids, vocablens::CacheSpec::all());
//   at::Tensor logits = out.logits;                                      // [B, T, V] float32
//   at::Tensor r1 = out.cache.get("resid_post", 1);                      // [B, T, d_model]
//   at::Tensor lens1 = model.unembed(model.final_norm(r1));              // logit lens at layer 1
//
// Weight orientation: matrices are stored as "x @ W" (TransformerLens convention), e.g. W_U is
// [d_model, V]; accessors return views of the loaded tensors (zero-copy where the file allowed),
// never copies, and are valid as long as the Model (or any copy of it) lives. Weights keep the dtype they
// are stored in (float32, float16/bfloat16 views of the file, or packed GGUF blocks: vocablens/weight.hpp);
// the accessors below return float32 (upcast on demand) and the forward pass upcasts one tile at a time.
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "vocablens/cache.hpp"
#include "vocablens/model_config.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {

/// One transformer block's weights, "x @ W" orientation. Undefined tensors mean "absent" (e.g. biases of
/// Llama, ln bias of RMSNorm, w_gate of a non-gated MLP).
struct LayerWeights {
  at::Tensor ln1_w, ln1_b;        ///< [d_model]
  at::Tensor w_q, b_q;            ///< [d_model, n_heads*d_head], [n_heads*d_head]
  at::Tensor w_k, b_k;            ///< [d_model, n_kv_heads*d_head], [n_kv_heads*d_head]
  at::Tensor w_v, b_v;            ///< [d_model, n_kv_heads*d_head], [n_kv_heads*d_head]
  at::Tensor w_o, b_o;            ///< [n_heads*d_head, d_model], [d_model]
  at::Tensor ln2_w, ln2_b;        ///< [d_model]
  at::Tensor w_in, b_in;          ///< [d_model, d_mlp], [d_mlp]   (Llama: up_proj / llama2.c w3)
  at::Tensor w_gate, b_gate;      ///< [d_model, d_mlp]            (Llama: gate_proj / w1); undefined if not gated
  at::Tensor w_out, b_out;        ///< [d_mlp, d_model], [d_model] (Llama: down_proj / w2)
  at::Tensor q_norm_w, k_norm_w;  ///< [d_head]: per-head RMSNorm of q and k (Qwen3); [n_heads*d_head] and
                                  ///< [n_kv_heads*d_head] when qk_norm_full (OLMo 2); undefined otherwise
  at::Tensor post_attn_norm_w;    ///< [d_model]: norm of the attention output (Gemma-2); undefined otherwise
  at::Tensor post_mlp_norm_w;     ///< [d_model]: norm of the MLP output (Gemma-2); undefined otherwise
  // Mixture of experts (ModelConfig::n_experts > 0). The dense MLP above is then absent, or the shared expert.
  at::Tensor w_router;  ///< [d_model, n_experts]: router logits = x @ w_router
  /// One entry per expert, "x @ W" views of the stored matrices (never stacked or copied): [d_model, d_expert],
  /// [d_model, d_expert], [d_expert, d_model].
  std::vector<at::Tensor> exp_gate, exp_up, exp_down;
  at::Tensor w_shared_gate;  ///< [d_model, 1]: the shared expert's output x sigmoid(x @ w_shared_gate); or undefined
  at::Tensor b_router;       ///< [n_experts]: the router's bias (GPT-OSS); or undefined
  /// Each expert's biases (GPT-OSS): [d_expert], [d_expert], [d_model]; empty when the experts have none.
  std::vector<at::Tensor> exp_gate_b, exp_up_b, exp_down_b;
  at::Tensor sinks;  ///< [n_heads]: attention sink logits (ModelConfig::attn_sinks); or undefined
};

/// Every tensor of a block (undefined ones included), the experts' too: what parameter counts, memory estimates
/// and `inspect` walk.
std::vector<const at::Tensor*> layer_tensors(const LayerWeights& L);

/// All weights of a model, as the checkpoint stores them: q/k rows of rotary models stay in the file's
/// order and ModelConfig::rope_interleaved says which rotary convention they follow (per-head products
/// such as W_Q W_K^T are identical under either order, since q and k features are permuted alike).
struct ModelWeights {
  at::Tensor W_E;                     ///< [V, d_model]
  at::Tensor W_pos;                   ///< [n_ctx, d_model] for learned positions; undefined otherwise
  at::Tensor W_seg;                   ///< [n_segments, d_model] segment (token-type) embeddings; undefined if none
  at::Tensor emb_norm_w, emb_norm_b;  ///< [d_model]: norm of the token embeddings (BLOOM); undefined otherwise
  at::Tensor lnf_w, lnf_b;            ///< [d_model]; lnf_b undefined for RMSNorm
  at::Tensor W_U;                     ///< [d_model, V]; a view of W_E.t() when tied
  at::Tensor b_U;                     ///< [V] or undefined
  std::vector<LayerWeights> layers;
};

struct ForwardOutput {
  at::Tensor logits;    ///< [B, T, V] float32; undefined if forward was asked not to compute them
  ResidualCache cache;  ///< what CacheSpec asked for
};

/// Applies a norm of the given kind over the last dimension: LayerNorm (biased variance) or RMSNorm,
/// then scale by `w` and add `b` when defined. Used by the runner and by analyses that re-normalise
/// a layer's own residual (logit lens).
at::Tensor apply_norm(const at::Tensor& x, NormKind kind, double eps, const at::Tensor& w, const at::Tensor& b);

/// The forward pass over explicit weights (no grad mode is the caller's business: the trainer calls it
/// with grad, Model::forward without). ids: int64 [B, T] with 1 <= T <= cfg.n_ctx, every id in [0, V).
ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids, const CacheSpec& spec,
                          bool compute_logits);
/// The same with segment (token-type) ids [B, T] (or [T]) in [0, n_segments): W_seg[segment] is added to
/// the embedding. Models with W_seg given no segment ids (the overload above, Model::forward, every
/// analysis) run with segment 0 everywhere; models without W_seg refuse defined segment ids.
ForwardOutput run_forward(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& ids, const CacheSpec& spec,
                          bool compute_logits, const at::Tensor& segment_ids);

/// Rotary inverse frequencies θ_i [rotary_dim / 2] (float64), exactly those the forward rotates by:
/// rope_theta^(−2i / rotary_dim) (rotary_dim = d_head unless partial), then rope_scaling (linear: / factor;
/// llama3: Llama-3.1's blend of θ_i / factor and θ_i by wavelength). Used by the positions analysis.
at::Tensor rotary_inv_freq(const ModelConfig& cfg);

/// c * tanh(x / c); x itself when c <= 0 (Gemma-2's attention and final logit soft-capping).
at::Tensor soft_cap(const at::Tensor& x, double c);

/// Applies blocks [first, last) to a residual stream x [B, T, d_model] that enters block `first`, with the
/// very operations run_forward uses (the same code), and returns the stream leaving block last - 1. Records
/// nothing. Throws UsageError unless 0 <= first <= last <= n_layers and 1 <= T <= n_ctx. Used by the logit
/// lens to treat the last k blocks as part of the decoder.
at::Tensor run_blocks(const ModelConfig& cfg, const ModelWeights& w, const at::Tensor& x, int64_t first, int64_t last);

class Model {
 public:
  Model(ModelConfig cfg, ModelWeights weights, std::string source);

  const ModelConfig& config() const { return cfg_; }
  const ModelWeights& weights() const { return w_; }
  /// The path the model was loaded from (directory or file).
  const std::string& source() const { return source_; }

  /// Forward pass, no grad, float32. ids: int64 [T] (treated as B = 1) or [B, T], all sequences the
  /// same length T with 1 <= T <= n_ctx. Throws UsageError on bad shapes or out-of-range ids.
  /// Returns logits [B, T, V] (skipped when compute_logits is false) and the activations `spec` asks for.
  ForwardOutput forward(const at::Tensor& ids, const CacheSpec& spec = {}, bool compute_logits = true) const;

  /// Greedy decoding: appends `steps` argmax tokens to `prompt` (stops early at stop_token if >= 0, or when
  /// the token predicted at position n_ctx - 1 has been appended: as llama2.c's run.c, a full context
  /// returns n_ctx + 1 tokens). Throws UsageError when the prompt is longer than n_ctx. Returns prompt +
  /// generated ids. The prompt runs in one pass, then one position per step (keys and values cached:
  /// vocablens/kv_cache.hpp).
  std::vector<int64_t> generate_greedy(std::vector<int64_t> prompt, int64_t steps, int64_t stop_token = -1) const;

  /// The final norm as a callable: x [..., d_model] -> normalised [..., d_model] (with scale and bias;
  /// identity for models without one, e.g. OPT-350m).
  at::Tensor final_norm(const at::Tensor& x) const;
  /// x [..., d_model] (already normalised) -> logits [..., V] = x @ W_U (+ b_U), then the final soft-cap
  /// c * tanh(logits / c) when the model has one (Gemma-2; monotonic, so rankings equal those of x @ W_U).
  at::Tensor unembed(const at::Tensor& x) const;

  // ---- weights by role, TransformerLens shapes (views, no copies) ----
  // Matrices come back as float32: a view when stored as float32, else upcast / dequantized on each call
  // (weights() holds them as stored; see vocablens/weight.hpp).
  at::Tensor W_E() const { return materialize_weight(w_.W_E); }      ///< [V, d_model]
  at::Tensor W_pos() const { return materialize_weight(w_.W_pos); }  ///< [n_ctx, d_model] or undefined
  at::Tensor W_seg() const { return materialize_weight(w_.W_seg); }  ///< [n_segments, d_model] or undefined
  at::Tensor W_U() const { return materialize_weight(w_.W_U); }      ///< [d_model, V]
  at::Tensor W_Q(int64_t layer) const;                               ///< [n_heads, d_model, d_head]
  at::Tensor W_K(int64_t layer) const;                               ///< [n_heads, d_model, d_head] (kv heads repeated for GQA)
  at::Tensor W_V(int64_t layer) const;                               ///< [n_heads, d_model, d_head] (kv heads repeated for GQA)
  at::Tensor W_O(int64_t layer) const;                               ///< [n_heads, d_head, d_model]
  at::Tensor b_Q(int64_t layer) const;                               ///< [n_heads, d_head] or undefined
  at::Tensor b_K(int64_t layer) const;
  at::Tensor b_V(int64_t layer) const;
  const at::Tensor& b_O(int64_t layer) const { return layer_checked(layer).b_o; }
  at::Tensor W_in(int64_t layer) const { return materialize_weight(layer_checked(layer).w_in); }      ///< [d_model, d_mlp]
  at::Tensor W_gate(int64_t layer) const { return materialize_weight(layer_checked(layer).w_gate); }  ///< or undefined
  at::Tensor W_out(int64_t layer) const { return materialize_weight(layer_checked(layer).w_out); }    ///< [d_mlp, d_model]
  const at::Tensor& b_in(int64_t layer) const { return layer_checked(layer).b_in; }
  const at::Tensor& b_out(int64_t layer) const { return layer_checked(layer).b_out; }
  /// Total number of parameters (tied matrices counted once).
  int64_t parameter_count() const;

 private:
  const LayerWeights& layer_checked(int64_t layer) const;
  ModelConfig cfg_;
  ModelWeights w_;
  std::string source_;
};

/// Options for load_model.
struct LoadOptions {
  /// llama2.c tokenizer path when loading a .bin whose tokenizer is not beside it (only recorded here;
  /// the tokenizer itself is loaded by load_tokenizer_for()).
  std::string tokenizer_path;
};

/// Loads a model from:
///  - a Hugging Face directory with config.json and model.safetensors, model.safetensors.index.json,
///    pytorch_model.bin or pytorch_model.bin.index.json (F16/BF16 weights kept in their stored dtype,
///    vocablens/weight.hpp; every family of vocablens/arch.hpp; names with or without the base prefix;
///    tied or explicit lm_head; causal-mask buffers ignored);
///  - a llama2.c checkpoint (.bin, 7-int32 header, negative vocab = untied classifier);
///  - a llama2.c PyTorch training checkpoint (ckpt.pt with "model" and "model_args").
/// Every tensor's shape is checked against the config. Throws FormatError naming the file on any problem.
Model load_model(const std::string& path, const LoadOptions& opts = {});

/// Sets LibTorch's intra-op thread count to the number of cores (it starts at 1 here) unless
/// VOCABLENS_THREADS is set. Idempotent; call once at program start.
void init_runtime();

/// The thread count for work on a model of `parameters` parameters: one per million, at least 1, at most
/// `max_threads`. Shared by adapt_threads_to() and `vocablens train`.
int threads_for_parameters(int64_t parameters, int max_threads);

/// When init_runtime() chose the thread count itself (VOCABLENS_THREADS unset), sets it for work on `m`:
/// one thread per million parameters, at least 1, at most the number of cores (the rule `vocablens train`
/// uses). Small models run operations so short that a second thread costs more in synchronisation than
/// it saves — on a machine with any other runnable process, 2.8x more (docs/runner.md). Otherwise (no
/// init_runtime(), or VOCABLENS_THREADS set) changes nothing. Returns the count in effect. The CLI calls
/// it in the commands whose work is the model's forward pass (generate, lens, project, demo), not in the
/// matrix analyses, whose V-sized products gain from threads whatever the parameter count; library users
/// decide for themselves.
int adapt_threads_to(const Model& m);

}  // namespace vocablens
