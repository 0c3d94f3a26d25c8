// The small GPT of `vocablens train --model gpt`: GPT-2 layout and names, trained through run_forward.
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/hf_map.hpp"
#include "train/safetensors_writer.hpp"
#include "train/trainer.hpp"
#include "vocablens/arch.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"

namespace vocablens {

ModelConfig gpt_config(const TrainOptions& o, int64_t vocab) {
  if (o.d_model < 1 || o.n_heads < 1 || o.n_layers < 1 || o.n_ctx < 1 || vocab < 1)
    throw UsageError("GPT sizes must be positive (d_model, heads, layers, context, vocabulary)");
  if (o.d_model % o.n_heads != 0)
    throw UsageError("d_model " + std::to_string(o.d_model) + " is not divisible by " + std::to_string(o.n_heads) + " heads");
  ModelConfig c;
  c.architecture = "GPT2LMHeadModel";
  c.family = "gpt2";
  c.n_layers = o.n_layers;
  c.d_model = o.d_model;
  c.n_heads = c.n_kv_heads = o.n_heads;
  c.d_head = o.d_model / o.n_heads;
  c.d_mlp = o.d_mlp > 0 ? o.d_mlp : 4 * o.d_model;
  c.vocab_size = vocab;
  c.n_ctx = o.n_ctx;
  c.norm = NormKind::LayerNorm;
  c.norm_eps = 1e-5;
  c.positions = o.positions;
  c.rope_theta = o.rope_theta;
  c.rope_interleaved = false;
  c.activation = Activation::GeluNew;
  c.gated_mlp = false;
  c.attn_bias = c.mlp_bias = true;
  c.tied_embeddings = o.tied;
  if (c.positions == PositionKind::Rotary && c.d_head % 2 != 0) throw UsageError("rotary positions need an even head size");
  if (c.positions == PositionKind::Sinusoidal && c.d_model % 2 != 0)
    throw UsageError("sinusoidal positions need an even d_model");
  return c;
}

ModelWeights gpt_weights_from_named(const ModelConfig& c, const std::map<std::string, at::Tensor>& named) {
  // The same mapping as loading a GPT-2 directory (the architecture table's names, model/hf_map.cpp): views of
  // the named parameters, so gradients flow back to them.
  TensorStore st;
  st.source = "GPT parameters";
  st.tensors = named;
  ModelWeights w;
  try {
    w = detail::map_hf_weights(st, c, "the GPT configuration");
  } catch (const FormatError& e) { throw UsageError(e.what()); }
  if (named.count("token_type_embeddings.weight")) w.W_seg = named.at("token_type_embeddings.weight");
  return w;
}

GptParameters init_gpt_parameters(const ModelConfig& c, uint64_t seed) {
  using train_detail::normal_tensor;
  std::mt19937_64 rng(seed);
  const int64_t d = c.d_model, V = c.vocab_size, m = c.d_mlp;
  const double std = 0.02, resid_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layers));
  auto zeros = [](std::vector<int64_t> s) { return at::zeros(s, at::TensorOptions().dtype(at::kFloat)); };
  auto ones = [](std::vector<int64_t> s) { return at::ones(s, at::TensorOptions().dtype(at::kFloat)); };
  GptParameters P;
  auto& n = P.named;
  // Drawn in a fixed order (not the map's): the weights depend only on the seed and the shapes.
  // Names from the architecture table (GPT-2 entry, without the "transformer." base prefix, as before).
  const ArchSpec& a = architecture("gpt2");
  auto name = [&](TensorRole r, int64_t layer, const char* suffix) { return hf_tensor_name(a, r, layer, suffix, false); };
  n[name(TensorRole::TokenEmbd, -1, ".weight")] = normal_tensor({V, d}, std, rng);
  if (c.positions == PositionKind::Learned) n[name(TensorRole::PosEmbd, -1, ".weight")] = normal_tensor({c.n_ctx, d}, 0.01, rng);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    n[name(TensorRole::AttnNorm, i, ".weight")] = ones({d});
    n[name(TensorRole::AttnNorm, i, ".bias")] = zeros({d});
    n[name(TensorRole::AttnQKV, i, ".weight")] = normal_tensor({d, 3 * d}, std, rng);
    n[name(TensorRole::AttnQKV, i, ".bias")] = zeros({3 * d});
    n[name(TensorRole::AttnOut, i, ".weight")] = normal_tensor({d, d}, resid_std, rng);
    n[name(TensorRole::AttnOut, i, ".bias")] = zeros({d});
    n[name(TensorRole::FfnNorm, i, ".weight")] = ones({d});
    n[name(TensorRole::FfnNorm, i, ".bias")] = zeros({d});
    n[name(TensorRole::FfnUp, i, ".weight")] = normal_tensor({d, m}, std, rng);
    n[name(TensorRole::FfnUp, i, ".bias")] = zeros({m});
    n[name(TensorRole::FfnDown, i, ".weight")] = normal_tensor({m, d}, resid_std, rng);
    n[name(TensorRole::FfnDown, i, ".bias")] = zeros({d});
  }
  n[name(TensorRole::OutputNorm, -1, ".weight")] = ones({d});
  n[name(TensorRole::OutputNorm, -1, ".bias")] = zeros({d});
  if (!c.tied_embeddings) n[name(TensorRole::Output, -1, ".weight")] = normal_tensor({V, d}, std, rng);
  for (auto& kv : n) kv.second.requires_grad_(true);
  P.weights = gpt_weights_from_named(c, n);
  return P;
}

std::string gpt_config_json(const ModelConfig& c, int64_t eos_id, const nlohmann::json& extra) {
  nlohmann::ordered_json j;
  j["architectures"] = {"GPT2LMHeadModel"};
  j["model_type"] = "gpt2";
  j["vocab_size"] = c.vocab_size;
  j["n_positions"] = c.n_ctx;
  j["n_ctx"] = c.n_ctx;
  j["n_embd"] = c.d_model;
  j["n_layer"] = c.n_layers;
  j["n_head"] = c.n_heads;
  j["n_inner"] = c.d_mlp;
  j["activation_function"] = "gelu_new";
  j["layer_norm_epsilon"] = c.norm_eps;
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["resid_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  j["attn_pdrop"] = 0.0;
  if (eos_id >= 0) {
    j["bos_token_id"] = eos_id;
    j["eos_token_id"] = eos_id;
  }
  j["torch_dtype"] = "float32";
  // Positions other than GPT-2's learned table: the vocablens runner reads this field (model_config.cpp);
  // no wpe.weight is written for them.
  if (c.positions != PositionKind::Learned) j["vocablens_positions"] = to_string(c.positions);
  if (c.positions == PositionKind::Rotary) j["rope_theta"] = c.rope_theta;
  if (!extra.is_null())
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j.dump(2) + "\n";
}

namespace train_detail {
namespace {

class GptTrainable final : public Trainable {
 public:
  GptTrainable(const TrainOptions& o, const TokenStream& s, int64_t vocab, int64_t eos)
      : o_(o), s_(s), cfg_(gpt_config(o, vocab)), eos_(eos) {
    GptParameters P = init_gpt_parameters(cfg_, o.seed);
    params = std::move(P.named);
    w_ = gpt_weights_from_named(cfg_, params);
    if (o.segments) {
      // Segment embeddings [2, d]: N(0, 0.01) like positions, from their own stream (the other weights do
      // not change with --segments).
      if (s.segment.size() != s.ids.size()) throw UsageError("--segments: the corpus has no segment ids");
      std::mt19937_64 rng(o.seed ^ 0x5E6D5E6D5E6Dull);
      cfg_.n_segments = 2;
      params["token_type_embeddings.weight"] = normal_tensor({2, cfg_.d_model}, 0.01, rng).requires_grad_(true);
      w_.W_seg = params["token_type_embeddings.weight"];
    }
    starts_ = window_starts(s, cfg_.n_ctx);
  }

  at::Tensor loss(std::mt19937_64& rng) override {
    at::Tensor in, tg;
    at::Tensor seg;
    do sample_windows(s_, starts_, o_.batch_size, cfg_.n_ctx, rng, in, tg, o_.segments ? &seg : nullptr);
    while (!(tg != -100).any().item<bool>());  // a batch entirely inside prompt spans has no loss
    ForwardOutput out = run_forward(cfg_, w_, in, CacheSpec::none(), true, seg);
    return at::cross_entropy_loss(out.logits.reshape({-1, cfg_.vocab_size}), tg.reshape({-1}), {}, at::Reduction::Mean, -100);
  }

  void write(const std::string& dir) const override {
    nlohmann::json extra = {{"vocablens_trained", {{"model", "gpt"}, {"seed", o_.seed}}}};
    if (o_.segments) {
      extra["vocablens_segments"] = cfg_.n_segments;  // the loader reads it (src/model/segments.cpp)
      extra["vocablens_segment_source"] = s_.segment_source;
    }
    write_file_atomic(dir + "/config.json", gpt_config_json(cfg_, eos_, extra));
    write_safetensors(dir + "/model.safetensors", params, {{"format", "pt"}});
  }

 private:
  const TrainOptions& o_;
  const TokenStream& s_;
  ModelConfig cfg_;
  int64_t eos_;
  ModelWeights w_;
  std::vector<int64_t> starts_;
};

}  // namespace

std::unique_ptr<Trainable> make_gpt(const TrainOptions& o, const TokenStream& s, int64_t vocab, int64_t eos_id) {
  return std::make_unique<GptTrainable>(o, s, vocab, eos_id);
}

}  // namespace train_detail
}  // namespace vocablens
