// vocablens/feature_encoder.hpp — the encoder side of SAE features read in vocabulary space: which tokens, as the
// model would read them, most excite each feature's encoder direction w_f = W_enc[:, f] [d_in].
//
// A feature reads the residual stream (it computes x · w_f), so its direction is read through a READ projection
// R [d, V] (vocablens/unembed.hpp), as Dar et al. read MLP keys and query/key directions: score_t = w_f · R[:, t].
//   pinv       R = E⁺ (E = W_Uᵀ): exact, Dar et al.'s E' = E⁺ᵀ — the token whose unembedding vector, written
//              into the stream, excites the feature most
//   transpose  R = W_U: Dar et al.'s approximation
//   embed      R = W_Eᵀ: the token whose input embedding excites the feature most (meaningful for SAEs reading
//              early layers)
// Top-k per feature through the streamed engine (vocablens/linalg/topk_stream.hpp): exact canonical float64
// values, order (value desc, token id asc), never forming d_sae × V.
//
//   auto e = vocablens::feature_encoder_tokens(model, sae, {0, 5}, 10, vocablens::InverseKind::Pinv);
//   e.top[0][0].j;     // the token exciting feature 0 most, e.top[0][0].value its score
//
// Requires d_in == d_model (an SAE on a residual-width point; not hook_z / MLP-neuron SAEs): UsageError otherwise.
#pragma once
#include <cstdint>
#include <vector>

#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/result.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens {

class Model;
struct Sae;

struct FeatureEncoderTokens {
  InverseKind kind = InverseKind::Pinv;
  std::vector<int64_t> features;
  std::vector<std::vector<TopkEntry>> top;  ///< per feature; TopkEntry.j = token id
  /// Adds arrays encoder_top_ids int64 / encoder_top_values float64 [N, k] and setting "encoder_read".
  void add_to(Result& r) const;
};

/// `features` empty = every feature. UsageError on k < 1 or > V, a feature out of range, d_in != d_model.
FeatureEncoderTokens feature_encoder_tokens(const Model& m, const Sae& sae, std::vector<int64_t> features, int64_t k,
                                            InverseKind kind);

}  // namespace vocablens
