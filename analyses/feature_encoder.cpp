// Encoder directions of SAE features through a read projection (see vocablens/feature_encoder.hpp).
#include "vocablens/feature_encoder.hpp"

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"

namespace vocablens {

FeatureEncoderTokens feature_encoder_tokens(const Model& m, const Sae& sae, std::vector<int64_t> features, int64_t k,
                                            InverseKind kind) {
  at::NoGradGuard no_grad;
  const int64_t d = m.config().d_model, V = m.config().vocab_size;
  if (sae.d_in != d)
    throw UsageError(sae.source + ": the encoder reads " + std::to_string(sae.d_in) + "-wide vectors, not the model's d_model " +
                     std::to_string(d) + ": no vocabulary reading of its encoder");
  if (k < 1 || k > V) throw UsageError("--top-k must be in [1, " + std::to_string(V) + "]");
  if (features.empty())
    for (int64_t f = 0; f < sae.d_sae; ++f) features.push_back(f);
  for (auto f : features)
    if (f < 0 || f >= sae.d_sae)
      throw UsageError("feature " + std::to_string(f) + " is out of range (0.." + std::to_string(sae.d_sae - 1) + ")");
  FeatureEncoderTokens e;
  e.kind = kind;
  e.features = features;
  // Rows w_f [N, d] (W_enc is [d_in, d_sae]: columns gathered, upcast from a BF16 file).
  const at::Tensor X = sae.W_enc.index_select(1, at::tensor(features, at::kLong)).t().to(at::kFloat).contiguous();
  e.top = project_topk(X, read_projection(m, kind), k);
  return e;
}

void FeatureEncoderTokens::add_to(Result& r) const {
  const int64_t N = static_cast<int64_t>(features.size()), k = top.empty() ? 0 : static_cast<int64_t>(top[0].size());
  std::vector<int64_t> ids(static_cast<size_t>(N * k), -1);
  std::vector<double> vals(static_cast<size_t>(N * k), 0.0);
  for (int64_t q = 0; q < N; ++q)
    for (size_t e = 0; e < top[static_cast<size_t>(q)].size() && static_cast<int64_t>(e) < k; ++e) {
      ids[static_cast<size_t>(q * k) + e] = top[static_cast<size_t>(q)][e].j;
      vals[static_cast<size_t>(q * k) + e] = top[static_cast<size_t>(q)][e].value;
    }
  r.arrays["encoder_top_ids"] = NdArray::i64({N, k}, ids.data());
  r.arrays["encoder_top_values"] = NdArray::f64({N, k}, vals.data());
  r.settings["encoder_read"] = to_string(kind);
}

}  // namespace vocablens
