// Segment (token-type) embeddings: what the loader and the forward pass need to know about W_seg.
// config.json "vocablens_segments": S  ->  tensor "token_type_embeddings.weight" [S, d_model] (BERT's name).
#include <ATen/ATen.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tensor_store.hpp"
#include "util/regular_file.hpp"

namespace vocablens::detail {

void attach_segments(const std::string& config_path, const TensorStore& st, ModelConfig& cfg, ModelWeights& w) {
  nlohmann::json j = nlohmann::json::parse(detail::read_regular_file(config_path, kMaxSmallJsonBytes, "config files"), nullptr,
                                           false);  // read_hf_config has validated it
  if (!j.is_object() || !j.contains("vocablens_segments")) return;
  const auto& v = j["vocablens_segments"];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1024)
    throw FormatError(config_path, "\"vocablens_segments\" must be an integer in 1..1024");
  cfg.n_segments = v.get<int64_t>();
  const std::string name = "token_type_embeddings.weight";
  if (!st.has(name))
    throw FormatError(st.source, "missing tensor '" + name + "' (config.json says the model has " +
                                     std::to_string(cfg.n_segments) + " segment embeddings)");
  const at::Tensor& t = st.get(name);
  if (t.dim() != 2 || t.size(0) != cfg.n_segments || t.size(1) != cfg.d_model)
    throw FormatError(st.source, "tensor '" + name + "' should be [" + std::to_string(cfg.n_segments) + ", " +
                                     std::to_string(cfg.d_model) + "]");
  w.W_seg = t.to(at::kFloat);
}

at::Tensor segment_embedding(const ModelWeights& w, const at::Tensor& segment_ids, int64_t B, int64_t T) {
  if (!w.W_seg.defined()) throw UsageError("segment ids given, but this model has no segment embeddings (W_seg)");
  const int64_t S = w.W_seg.size(0), d = w.W_seg.size(1);
  if (!segment_ids.defined()) return w.W_seg[0];  // the default: segment 0 everywhere (broadcast)
  at::Tensor s = segment_ids.dim() == 1 ? segment_ids.unsqueeze(0) : segment_ids;
  if (s.dim() != 2 || s.size(0) != B || s.size(1) != T)
    throw UsageError("segment ids must have the shape of the token ids [" + std::to_string(B) + ", " + std::to_string(T) + "]");
  s = s.to(at::kLong).contiguous();
  const int64_t lo = s.min().item<int64_t>(), hi = s.max().item<int64_t>();
  if (lo < 0 || hi >= S)
    throw UsageError("segment id " + std::to_string(lo < 0 ? lo : hi) + " is outside [0, " + std::to_string(S) + ")");
  return w.W_seg.index_select(0, s.view(-1)).view({B, T, d});
}

}  // namespace vocablens::detail
